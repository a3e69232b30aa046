"""Vector index backends: the seam (`VectorIndex`) and its implementations.

The core's `FlatIndex` and `HNSWIndex` (kira._core) implement `VectorIndex` as they are;
other backends (a Milvus collection, `kira[milvus]`) implement the same shape, so the
pipeline never checks which class it was given.
"""

from __future__ import annotations

from kira.backends.protocols import VectorIndex, search_options

__all__ = ["VectorIndex", "search_options"]
