"""`kira models ...`: export checkpoints to ONNX and inspect exports.

The pipeline's python/kira/cli.py calls `add_models_subcommands(subparsers)`; each leaf
command sets `func`, a callable (argparse.Namespace) -> int exit status.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kira.models.manifest import KINDS, ManifestError


def add_models_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Register `models export` and `models inspect` under `subparsers` (from add_subparsers()).

    Returns the `models` parser.
    """
    models = subparsers.add_parser("models", help="export Hugging Face checkpoints to ONNX; inspect exports")
    sub = models.add_subparsers(dest="models_command", metavar="{export,inspect}")
    sub.required = True

    exp = sub.add_parser("export", help="turn a checkpoint directory (or a hub id, with network) into ONNX + manifest")
    exp.add_argument("kind", choices=KINDS, help="model family")
    exp.add_argument("checkpoint", help="Hugging Face checkpoint directory, or a hub id where a network exists")
    exp.add_argument("out_dir", help="directory for the ONNX files and kira-model.json")
    exp.add_argument("--dtype", choices=("fp32", "fp16"), default="fp32", help="weight precision (default fp32)")
    exp.add_argument("--opset", type=int, default=17, help="ONNX opset (default 17)")
    exp.set_defaults(func=_export)

    ins = sub.add_parser("inspect", help="print an export's manifest and verify its checksums")
    ins.add_argument("path", help="a kira-model.json or a directory of exports")
    ins.set_defaults(func=_inspect)
    return models


def _export(args: argparse.Namespace) -> int:
    from kira.models.exporters import export

    try:
        path = export(args.kind, args.checkpoint, args.out_dir, dtype=args.dtype, opset=args.opset)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        print(f"kira models export: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from kira.models.loading import find_manifests
    from kira.models.manifest import load_manifest

    try:
        for p in find_manifests(args.path):
            m = load_manifest(p)
            dims = ", ".join(f"{k}={v}" for k, v in sorted(m.dims.items()))
            size = sum(f.bytes for f in m.files.values())
            print(f"{p}: {m.kind} {m.model_id} ({m.architecture}, {m.dtype}, opset {m.opset}); {dims}; "
                  f"{len(m.files)} files, {size / 1e6:.1f} MB, checksums ok")
    except (FileNotFoundError, ManifestError) as exc:
        print(f"kira models inspect: {exc}", file=sys.stderr)
        return 1
    return 0
