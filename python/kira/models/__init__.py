"""kira.models: the model seams, the embedded default stack, and ONNX model loading/export.

`load_default()` needs no model files; `load(path)` reads models exported with
`export(...)` (parts not exported fall back to the default and say so in `notes`).
Heavy or optional modules are imported inside the functions that need them.
"""

from __future__ import annotations

import importlib
from typing import Any

from kira.models.protocols import (
    Captioner,
    Critic,
    ImageEncoder,
    LanguageModel,
    RegionProposer,
    Reranker,
    TextEncoder,
    TextReader,
)
from kira.models.stack import ModelStack, load_default

__all__ = [
    "Captioner",
    "Critic",
    "ImageEncoder",
    "LanguageModel",
    "ModelStack",
    "RegionProposer",
    "Reranker",
    "TextEncoder",
    "TextReader",
    "export",
    "load",
    "load_default",
]


def load(path: Any, **kwargs: Any) -> ModelStack:
    """A ModelStack from exported ONNX files (a manifest or its directory); see kira.models.loading.

    Raises ImportError if this kira has no ONNX loader, FileNotFoundError naming a missing file.
    """
    module = _import_submodule("kira.models.loading")
    return module.load(path, **kwargs)


def export(kind: str, checkpoint_dir: Any, out_dir: Any, **kwargs: Any) -> Any:
    """Export a Hugging Face checkpoint to ONNX + manifest; see kira.models.exporters.export.

    Returns the manifest path. Raises ImportError naming the `export` extra when torch is missing.
    """
    module = _import_submodule("kira.models.exporters")
    return module.export(kind, checkpoint_dir, out_dir, **kwargs)


def _import_submodule(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise  # the module exists but one of its own imports is missing
        raise ImportError(f"{name} is not part of this kira installation") from exc
