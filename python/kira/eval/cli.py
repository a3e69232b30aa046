"""`kira eval domainvqa --out DIR [--small] [--domains ...] [--variants ...] [--seed N]`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from kira.eval.dataset import DOMAINS

VARIANT_CHOICES = ("visual_only", "dual_path", "query_expansion", "multi_hop", "grounded", "full")


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="directory for results.json, tables.md and figures/")
    parser.add_argument("--small", action="store_true", help="CI size: 24 documents and 12 questions per domain")
    parser.add_argument("--domains", nargs="+", choices=DOMAINS, default=None, help="domains to run (default: all)")
    parser.add_argument("--variants", nargs="+", choices=VARIANT_CHOICES, default=None,
                        help="ablation variants to run (default: all six)")
    parser.add_argument("--seed", type=int, default=0, help="dataset and bootstrap seed (default 0)")
    parser.add_argument("--no-adapt", action="store_true", help="skip the domain-adaptation measurements")
    parser.add_argument("--no-planted", action="store_true", help="skip the planted-claim verifier check")
    parser.add_argument("--adapt-epochs", type=int, default=None, help="override the adapter's 50 epochs")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    parser.set_defaults(handler=run_from_args, func=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """Run the benchmark from parsed arguments; prints the headline numbers as JSON. Returns 0."""
    from kira.eval.runner import run_domainvqa

    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    summary = run_domainvqa(args.out, small=args.small, domains=args.domains, variants=args.variants,
                            seed=args.seed, adapt=not args.no_adapt, planted=not args.no_planted,
                            adapt_epochs=args.adapt_epochs)
    headline: dict[str, Any] = {v: {k: round(x, 4) if isinstance(x, float) else x for k, x in m.items()}
                                for v, m in summary.results["variants"].items()}
    print(json.dumps({"out": str(summary.out_dir), "seconds": round(summary.seconds, 1), "variants": headline,
                      "planted": {k: summary.results["planted"].get(k) for k in
                                  ("planted_flag_rate", "supported_flag_rate")} if summary.results["planted"] else {}},
                     indent=2))
    return 0


def add_eval_subcommands(subparsers: Any) -> None:
    """Register `eval domainvqa` on an argparse subparsers object (kira.cli calls this)."""
    evaluate = subparsers.add_parser("eval", help="run benchmarks (DomainVQA-R)")
    benchmarks = evaluate.add_subparsers(dest="benchmark", required=True)
    _configure(benchmarks.add_parser("domainvqa", help="the DomainVQA-R benchmark and six-variant ablation"))


def main(argv: list[str] | None = None) -> int:
    """`python -m kira.eval.domainvqa ...`: the same options as `kira eval domainvqa`."""
    parser = argparse.ArgumentParser(prog="python -m kira.eval.domainvqa", description="Run DomainVQA-R.")
    _configure(parser)
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
