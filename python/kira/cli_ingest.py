"""`kira ingest`: add images to a knowledge base, in this process or (Milvus-backed) as a Ray Data job.

Split from kira.cli (the parser and the other commands live there). A new knowledge base is
embedded unless ``--backend milvus``, ``--uri`` or ``--engine ray`` say Milvus; ``--engine ray``
on an embedded one is refused with the fix before Ray starts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from kira import cli_opening
from kira.cli_opening import image_suffixes


def cmd_ingest(args: argparse.Namespace) -> int:
    """Run `kira ingest` for the parsed `args`; returns the exit status (1: nothing added and nothing was there
    already: files unchanged since an earlier ingest count as done, exit 0)."""
    from kira.knowledge_base.ingest import collect_entries, printable

    captions = None
    if args.captions:
        captions = json.loads(Path(args.captions).read_text())
        if not isinstance(captions, dict):
            raise ValueError(f"{args.captions} must hold a JSON object: file name or stem -> caption")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1; got {args.batch_size}")
    if args.max_pixels < 1:
        raise ValueError(f"--max-pixels must be at least 1; got {args.max_pixels}")
    sources: Any = args.inputs[0] if len(args.inputs) == 1 else args.inputs
    remote = args.engine == "ray" and "://" in args.inputs[0]  # a pyarrow uri: listed by the Ray job
    for given in () if remote else args.inputs:  # before anything is created: a typo must not leave an empty KB
        if not os.path.lexists(given):
            raise ValueError(f"no such file or folder: {printable(given)}")
    found, _skipped, _root = ([args.inputs[0]], [], None) if remote else collect_entries(
        sources, follow_links=args.follow_links)
    path = Path(args.kb)
    if not found:
        print(f"kira ingest: no image files in {' '.join(printable(i) for i in args.inputs)} (looked for "
              f"{', '.join(sorted(image_suffixes()))}); nothing was added", file=sys.stderr)
        for where, reason in _skipped:
            print(f"  skipped {printable(where)}: {reason}", file=sys.stderr)
        return 1
    if args.engine == "ray" and len(args.inputs) != 1:
        raise ValueError("--engine ray reads one folder (or pyarrow uri); give one input")
    ocr = getattr(args, "ocr", False)
    stack = cli_opening.model_stack
    models = stack(args.models, ocr=True, kb=args.kb, uri=args.uri) if ocr else stack(args.models)
    if args.engine == "ray":
        return _ingest_with_ray(args, path, models, sources, captions)
    kb, created = _open_for_ingest(args, path, models)
    return _ingest_into(args, kb, created, path, sources, captions)


def _ingest_with_ray(args: argparse.Namespace, path: Path, models: Any, sources: Any, captions: Any) -> int:
    """`kira ingest --engine ray`: Ray starts before Milvus Lite's gRPC threads do (a fork beside them is
    what makes Ray's node start time out), and stops at the end."""
    from kira.ray_ingest.sources import require_ray
    from kira.ray_ingest.runtime import start_ray, stop_ray
    from kira.knowledge_base.opening import is_embedded_directory

    if not args.uri and is_embedded_directory(path):  # refused before Ray starts
        raise ValueError(f"{path} is an embedded knowledge base; --engine ray writes to a knowledge base created "
                         "with the Milvus backend (a new KB with --backend milvus); run without --engine ray")
    if args.backend == "embedded":
        raise ValueError("--engine ray writes to a Milvus-backed knowledge base; drop --backend embedded")
    ray = require_ray()
    start_ray(ray, args.ray_address)
    try:
        kb, created = _open_for_ingest(args, path, models)
        return _ingest_into(args, kb, created, path, sources, captions)
    finally:
        stop_ray(ray)


def _ingest_into(args: argparse.Namespace, kb: Any, created: bool, path: Path, sources: Any, captions: Any) -> int:
    with kb:
        if args.engine == "ray":
            from kira.ray_ingest.kb import ingest_ray_kb

            summary = ingest_ray_kb(kb, sources, address=args.ray_address, actors=args.actors, captions=captions,
                                    batch_size=args.batch_size, follow_links=args.follow_links,
                                    max_pixels=args.max_pixels, progress=not args.quiet or None)
        else:
            summary = kb.ingest(sources, captions=captions, batch_size=args.batch_size,
                                progress=not args.quiet or None, follow_links=args.follow_links,
                                max_pixels=args.max_pixels)
        print(summary)
        stats = kb.stats()
        if created and not summary.added and stats["documents"] == 0 and args.uri:
            kb.drop()  # this run made it in Milvus, and it holds nothing
    unchanged = len(getattr(summary, "unchanged", ()))
    if not summary.added and unchanged and not summary.skipped:
        print(f"kira ingest: all {unchanged} image file(s) are in the knowledge base already, unchanged; nothing to add")
        return 0
    if not summary.added and not unchanged:
        if created and stats["documents"] == 0 and not args.uri:
            shutil.rmtree(path, ignore_errors=True)  # this run made it, and it holds nothing
        print(f"kira ingest: none of the {summary.found} image file(s) was added (see the reasons above); "
              "fix or remove them and run again", file=sys.stderr)
        return 1
    print(f"{stats['documents']} document(s), chunks {stats['chunks']} in {path}")
    return 0


def _open_for_ingest(args: argparse.Namespace, path: Path, models: Any) -> tuple[Any, bool]:
    """(the knowledge base to ingest into, whether this run created it). A new one is embedded unless
    --backend milvus, --uri or --engine ray say Milvus; --engine ray on an embedded one is refused."""
    from kira.knowledge_base import KnowledgeBase
    from kira.knowledge_base.opening import is_knowledge_base

    token = os.environ.get("KIRA_MILVUS_TOKEN", "")
    if args.uri:
        from kira.knowledge_base.opening import exists as kb_exists

        exists = kb_exists(args.kb, uri=args.uri, token=token)
    else:
        exists = is_knowledge_base(path)
    if exists:
        kb = KnowledgeBase.open(args.kb if args.uri else path, models=models, uri=args.uri, token=token)
        if args.engine == "ray" and getattr(kb, "backend", "embedded") != "milvus":
            kb.close()
            raise ValueError(f"{path} is an embedded knowledge base; --engine ray writes to a knowledge base created "
                             "with the Milvus backend (a new KB with --backend milvus); run without --engine ray")
        if args.profile:
            kb.set_profile(args.profile)
        return kb, False
    backend = args.backend or ("milvus" if args.uri or args.engine == "ray" else "embedded")
    if args.engine == "ray" and backend != "milvus":
        raise ValueError("--engine ray writes to a Milvus-backed knowledge base; drop --backend embedded")
    kb = KnowledgeBase.create(args.kb if args.uri else path, models=models, index=args.index, profile=args.profile,
                              backend=backend, uri=args.uri, token=token)
    return kb, True
