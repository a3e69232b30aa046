"""`VectorIndex`: what the pipeline needs of a vector index, as a Protocol.

Ids are int64 chunk ids; vectors are unit float32 rows; scores are cosines, best first,
with -1 padding where fewer than k results exist. The core's indexes are the reference
implementations: `FlatIndex` (exact) and `HNSWIndex` (graph; takes a per-call ``ef``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class VectorIndex(Protocol):
    """A searchable set of unit vectors under int64 ids (see the module docstring)."""

    @property
    def dim(self) -> int:
        """The vector dimension."""
        ...

    def __len__(self) -> int:
        ...

    def search(self, queries: np.ndarray, k: int, *, allow: np.ndarray | None = None, groups: Any = None,
               per_group: int = 1, **options: Any) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), each (m, k), for float32 (m, dim) queries. allow: only these ids may be returned;
        groups (a `kira._core.GroupMap`): at most per_group results of one group; options: backend tuning
        (``ef`` for a graph index) given only where `search_options` says the index takes them."""
        ...

    def contains(self, id: int) -> bool:
        ...

    def get_vectors(self, ids: np.ndarray) -> np.ndarray:
        """The stored (decoded, unit) vectors of `ids`, (n, dim) float32; ValueError for an unknown id."""
        ...


def search_options(index: Any, *, ef: int | None = None) -> dict[str, Any]:
    """The tuning options `index` takes for one search: ``ef`` for a graph index (one with an ``ef_search``
    candidate list), nothing for an exact one."""
    return {"ef": ef} if ef is not None and hasattr(index, "ef_search") else {}
