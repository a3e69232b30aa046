"""kira: knowledge-intensive image retrieval and reasoning.

The compiled core (indexes, fusion, hops, regions) is imported eagerly; the pipeline
(knowledge base, models, reasoning) is imported on first use so `import kira` stays
fast and never pulls in heavy optional dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

from kira import _core
from kira.config import KiraConfig

__version__ = "0.1.0"

# name -> module that defines it; resolved lazily by __getattr__.
_CORE_NAMES = (
    "FlatIndex",
    "HNSWIndex",
    "GroupMap",
    "Hop",
    "HopTrace",
    "CompoundGroups",
    "rrf_fuse",
    "residual_hops",
    "extract_regions",
    "expand_compound",
    "simd_level",
)
_LAZY = {
    "KnowledgeBase": "kira.knowledge_base",
    "Kira": "kira.pipeline",
    "Result": "kira.pipeline",
    "VisualRAG": "kira.visual_rag",
    "DomainProfile": "kira.profile",
}

__all__ = ["KiraConfig", "__version__", *_CORE_NAMES, *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _CORE_NAMES:
        try:
            return getattr(_core, name)
        except AttributeError:
            raise AttributeError(f"kira._core has no {name!r}: rebuild with `pip install .`") from None
    module = _LAZY.get(name)
    if module is not None:
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'kira' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
