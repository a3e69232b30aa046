"""Hugging Face checkpoints -> ONNX files + a kira manifest (needs the `export` extra: torch).

`export(kind, checkpoint_dir, out_dir, dtype=...)` is the one entry point; each model
family has its own module. Nothing here runs at query time.
"""

from __future__ import annotations

import os
from pathlib import Path

from kira.models.manifest import KINDS

__all__ = ["KINDS", "export"]


def export(kind: str, checkpoint_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
           dtype: str = "fp32", opset: int = 17) -> Path:
    """Export a checkpoint of `kind` to ONNX in out_dir and return the manifest path.

    kind: "clip" | "dino" | "blip2" | "cross-encoder" | "sentence".
    checkpoint_dir: a local Hugging Face checkpoint directory, or a hub id where a network exists.
    dtype: "fp32" or "fp16" (weights and compute; graph inputs/outputs stay float32).
    Raises ValueError for an unknown kind or dtype or a hub id without network,
    FileNotFoundError for a missing checkpoint, ImportError without torch/transformers.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown model kind {kind!r}; choose one of {', '.join(KINDS)}")
    if dtype not in ("fp32", "fp16"):
        raise ValueError(f"dtype must be 'fp32' or 'fp16', not {dtype!r}")
    if kind == "clip":
        from kira.models.exporters.clip import export_clip as fn
    elif kind == "dino":
        from kira.models.exporters.dino import export_dino as fn
    elif kind == "blip2":
        from kira.models.exporters.blip2 import export_blip2 as fn
    elif kind == "cross-encoder":
        from kira.models.exporters.bert_text import export_cross_encoder as fn
    else:
        from kira.models.exporters.bert_text import export_sentence as fn
    return fn(checkpoint_dir, out_dir, dtype=dtype, opset=opset)
