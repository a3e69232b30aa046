"""The `kira` command (also `python -m kira`).

    kira ingest KB FOLDER_OR_FILES... [--captions captions.json] [--batch-size N] [--models DIR]
    kira ask KB [QUESTION] [--image PATH] [--top-k 5] [--variant full] [--card text|json|html] [--out FILE]
    kira card KB [QUESTION] [--image PATH] --format html --out card.html   (a card only)
    kira info KB
    kira demo [--out DIR] [--quick]
    kira serve KB [--host 127.0.0.1] [--port 8000] [--workers N] [--read-only] ...   (kira.serve.cli)
    kira models ...   (when kira.models.cli is installed)
    kira eval ...     (when kira.eval.cli is installed)

Exit status: 0 on success, 2 for bad input (the message says what to fix).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from pathlib import Path
from typing import Any


def _stack(models_dir: str | None) -> Any:
    if models_dir:
        from kira.models import load

        return load(models_dir)
    return None  # the knowledge base loads the default stack on first use


def _cmd_ingest(args: argparse.Namespace) -> int:
    from kira.knowledge_base import KnowledgeBase

    captions = None
    if args.captions:
        captions = json.loads(Path(args.captions).read_text())
        if not isinstance(captions, dict):
            raise ValueError(f"{args.captions} must hold a JSON object: file name or stem -> caption")
    path = Path(args.kb)
    models = _stack(args.models)
    if (path / "kira.sqlite").is_file():
        kb = KnowledgeBase.open(path, models=models)
    else:
        kb = KnowledgeBase.create(path, models=models, index=args.index)
    with kb:
        sources: Any = args.inputs[0] if len(args.inputs) == 1 else args.inputs
        summary = kb.ingest(sources, captions=captions, batch_size=args.batch_size, progress=not args.quiet or None)
        print(summary)
        stats = kb.stats()
    print(f"{stats['documents']} document(s), chunks {stats['chunks']} in {path}")
    return 0


def _ask(args: argparse.Namespace) -> Any:
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    if not args.question and not args.image:
        raise ValueError("give a question, --image PATH, or both")
    kb = KnowledgeBase.open(args.kb, models=_stack(args.models), read_only=True)
    try:
        levels = [lvl.strip() for lvl in args.levels.split(",") if lvl.strip()] if args.levels else None
        banks = [b.strip() for b in args.domains.split(",") if b.strip()] if args.domains else None
        return Kira(kb, concept_banks=banks).ask(args.question, image=args.image, top_k=args.top_k,
                                                 variant=args.variant, levels=levels)
    finally:
        kb.close()


def _render(card: Any, fmt: str) -> str:
    if fmt == "json":
        return card.to_json()
    if fmt == "html":
        return card.to_html()
    return card.to_text()


def _write(text: str, out: str | None) -> None:
    if out:
        Path(out).write_text(text, encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    else:
        print(text)


def _cmd_ask(args: argparse.Namespace) -> int:
    result = _ask(args)
    if args.card:
        _write(_render(result.card, args.card), args.out)
    else:
        print(result.answer.text)
        for item in result.evidence.items:
            print(f"  [Evidence {item.number}] {item.doc_id} ({item.level}, score {item.score:.3f})")
    return 0


def _cmd_card(args: argparse.Namespace) -> int:
    result = _ask(args)
    _write(_render(result.card, args.format), args.out)
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from kira.knowledge_base import KnowledgeBase

    kb = KnowledgeBase.open(args.kb, read_only=True)
    try:
        stats = kb.stats()
    finally:
        kb.close()
    if args.json:
        print(json.dumps(stats, indent=2, sort_keys=True))
        return 0
    print(f"knowledge base {stats['path']}")
    print(f"  documents: {stats['documents']}")
    print(f"  chunks:    {', '.join(f'{k} {v}' for k, v in sorted(stats['chunks'].items())) or 'none'}")
    print(f"  groups:    temporal {stats['groups']['temporal']}, multiview {stats['groups']['multiview']}")
    print(f"  index:     {stats['index_kind']} {stats['index_sizes']} dims {stats['dims']}")
    print(f"  adapter:   {stats['adapter'] or 'none'}; generation {stats['generation']}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from kira.demo import run_demo

    run_demo(out_dir=args.out, quick=args.quick)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `kira` command."""
    from kira.pipeline import VARIANTS

    parser = argparse.ArgumentParser(prog="kira", description="Grounded retrieval and reasoning over images.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO (progress bars on)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="add images (a folder or files) to a knowledge base (created if new)")
    p.add_argument("kb", help="knowledge base directory")
    p.add_argument("inputs", nargs="+", help="a folder of images, or image files")
    p.add_argument("--captions", help="JSON file: file name or stem -> caption (default: <stem>.txt beside each image)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--index", choices=("flat", "hnsw"), default="flat", help="index kind for a new knowledge base")
    p.add_argument("--models", help="directory of exported ONNX models (default: the embedded default stack)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_ingest)

    for name, helptext in (("ask", "answer a question (text and/or --image)"), ("card", "write a rationale card")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("kb")
        p.add_argument("question", nargs="?", default=None)
        p.add_argument("--image", help="query image path")
        p.add_argument("--top-k", type=int, default=5)
        p.add_argument("--variant", choices=VARIANTS, default="full")
        p.add_argument("--models", help="directory of exported ONNX models")
        p.add_argument("--levels", help="restrict retrieval to chunk levels, e.g. document,region")
        p.add_argument("--domains", help="concept banks for query expansion, e.g. radiology,circuits (default: all)")
        p.add_argument("--out", help="write the card to this file instead of stdout")
        if name == "ask":
            p.add_argument("--card", choices=("text", "json", "html"), help="print the rationale card in this format")
            p.set_defaults(func=_cmd_ask)
        else:
            p.add_argument("--format", choices=("text", "json", "html"), default="html")
            p.set_defaults(func=_cmd_card)

    p = sub.add_parser("info", help="what a knowledge base holds")
    p.add_argument("kb")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("demo", help="offline demo on images that ship with Python packages")
    p.add_argument("--out", default="kira_demo_out", help="where the HTML cards go")
    p.add_argument("--quick", action="store_true", help="fewer images and questions")
    p.set_defaults(func=_cmd_demo)

    for module, hook in (("kira.models.cli", "add_models_subcommands"), ("kira.eval.cli", "add_eval_subcommands"),
                         ("kira.serve.cli", "add_serve_subcommand")):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        add = getattr(mod, hook, None)
        if add is not None:
            add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the `kira` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        print(f"kira {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
