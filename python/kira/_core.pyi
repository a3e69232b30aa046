# Type stub for the compiled module kira._core. tests/core/test_core_stub.py checks that every
# name here exists in the module and vice versa.
from __future__ import annotations

import numpy as np
import numpy.typing as npt

class GroupMap:
    """id -> group labels for a capped search (`search(..., groups=g, per_group=2)`)."""

    def __init__(self, ids: npt.ArrayLike, groups: npt.ArrayLike) -> None: ...
    def __len__(self) -> int: ...
    def group_of(self, ids: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Group of each id; an unlabelled id gets -1 - id (a group of its own)."""

class CosineIndex:
    """Base class of FlatIndex and HNSWIndex; not constructible."""

# ---- indexes (cpp/bindings/bind_indexes.cpp) -------------------------------------------
from os import PathLike  # noqa: E402
from typing import Literal  # noqa: E402

def simd_level() -> Literal["avx512", "avx2", "scalar"]:
    """Kernel set chosen once at run time: "avx512", "avx2" or "scalar"."""

class FlatIndex(CosineIndex):
    """Exact cosine index. Searches share a lock (parallel); add/remove are exclusive."""

    def __init__(self, dim: int, *, dtype: Literal["f32", "f16", "i8"] = "f32") -> None: ...
    def add(self, ids: npt.ArrayLike, vectors: npt.NDArray[np.float32]) -> None:
        """Add float32 (n, dim) rows under unique int64 ids; ValueError leaves the index unchanged."""
    def remove(self, ids: npt.ArrayLike) -> None:
        """Remove ids; ValueError (index unchanged) for an unknown or repeated id."""
    def search(
        self,
        queries: npt.NDArray[np.float32],
        k: int,
        *,
        allow: npt.ArrayLike | None = None,
        groups: GroupMap | None = None,
        per_group: int = 1,
        threads: int | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """(ids (m, k), scores (m, k)) best first, padded with -1 / -inf; with groups at most
        per_group results of one group; thread-safe."""
    def __len__(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> Literal["f32", "f16", "i8"]: ...
    def ids(self) -> npt.NDArray[np.int64]:
        """Stored ids, ascending."""
    def contains(self, id: int) -> bool: ...
    def get_vectors(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Decoded unit vectors (n, dim); ValueError for an unknown id."""
    def memory_bytes(self) -> int: ...
    def save(self, path: str | PathLike[str]) -> None:
        """Atomic write (temp file + fsync + rename)."""
    @staticmethod
    def load(path: str | PathLike[str]) -> FlatIndex:
        """ValueError naming the problem for a truncated/corrupted/foreign/wrong-version file."""

class HNSWIndex(CosineIndex):
    """Approximate cosine index (HNSW graph); removal leaves tombstones never returned.
    Searches share a lock (parallel); add/remove are exclusive; ef_search is atomic."""

    def __init__(
        self,
        dim: int,
        *,
        M: int = 16,
        ef_construction: int = 200,
        seed: int = 0,
        dtype: Literal["f32", "f16", "i8"] = "f32",
    ) -> None: ...
    def add(self, ids: npt.ArrayLike, vectors: npt.NDArray[np.float32], *, threads: int | None = None) -> None:
        """Insert float32 (n, dim) rows under unique int64 ids; threads=1 is deterministic."""
    def remove(self, ids: npt.ArrayLike) -> None:
        """Tombstone ids; ValueError (index unchanged) for an unknown or repeated id."""
    def search(
        self,
        queries: npt.NDArray[np.float32],
        k: int,
        *,
        allow: npt.ArrayLike | None = None,
        groups: GroupMap | None = None,
        per_group: int = 1,
        threads: int | None = None,
        ef: int | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """(ids (m, k), scores (m, k)) best first, padded with -1 / -inf; with groups at most
        per_group results of one group; candidate list max(ef or ef_search, k); thread-safe."""
    ef_search: int
    @property
    def M(self) -> int: ...
    @property
    def ef_construction(self) -> int: ...
    @property
    def seed(self) -> int: ...
    def __len__(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> Literal["f32", "f16", "i8"]: ...
    def ids(self) -> npt.NDArray[np.int64]:
        """Stored (live) ids, ascending."""
    def contains(self, id: int) -> bool: ...
    def get_vectors(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Decoded unit vectors (n, dim); ValueError for an unknown id."""
    def memory_bytes(self) -> int: ...
    def save(self, path: str | PathLike[str]) -> None:
        """Atomic write (temp file + fsync + rename)."""
    @staticmethod
    def load(path: str | PathLike[str]) -> HNSWIndex:
        """ValueError naming the problem for a truncated/corrupted/foreign/wrong-version file."""

# ---- retrieval (cpp/bindings/bind_retrieval.cpp) ---------------------------------------

from collections.abc import Sequence  # noqa: E402
from typing import Literal  # noqa: E402

def rrf_fuse(
    rankings: Sequence[npt.NDArray[np.int64]],
    weights: Sequence[float] | None = None,
    k: float = 60,
    *,
    limit: int | None = None,
    documents: Sequence[npt.NDArray[np.int64]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Weighted RRF: score = sum_i w_i / (k + rank_i), ranks from 1; an id repeated in one
    ranking counts once at its best rank; id -1 is skipped. Sorted by score desc, ties to
    the smaller id. documents (one int64 array per ranking, parallel to its ids; -1: the
    chunk is its own document): each document counts once per ranking, at its rank among the
    ranking's documents, and its chunks share its score in proportion to their own (ties in
    the chunk-level order). ValueError for non-int64 rankings, bad weights, k <= 0, limit < 0,
    documents not parallel to the rankings, < -1, or giving a chunk two documents."""

class Hop:
    """One hop of residual_hops."""

    @property
    def ids(self) -> npt.NDArray[np.int64]: ...
    @property
    def scores(self) -> npt.NDArray[np.float32]: ...
    @property
    def confidence(self) -> float:
        """Mean cosine score of the hop's valid results (0.0 when it found nothing)."""
    @property
    def query(self) -> npt.NDArray[np.float32]: ...
    @property
    def new_ids(self) -> int: ...

class HopTrace:
    """The result of residual_hops."""

    @property
    def hops(self) -> list[Hop]: ...
    @property
    def stop_reason(self) -> Literal["confidence", "no_new", "max_hops", "zero_residual"]: ...
    @property
    def ids(self) -> npt.NDArray[np.int64]: ...
    @property
    def scores(self) -> npt.NDArray[np.float32]: ...
    @property
    def first_hop(self) -> npt.NDArray[np.int32]: ...

def residual_hops(
    index: CosineIndex,
    query: npt.NDArray[np.float32],
    k: int,
    *,
    beta: float = 0.3,
    max_hops: int = 3,
    confidence: float = 0.85,
    allow: npt.NDArray[np.int64] | Sequence[int] | None = None,
    ef: int | None = None,
) -> HopTrace:
    """Residual multi-hop retrieval: q <- normalize(q - beta * mean(unit vectors of the hop's
    results)); a hop's confidence is the mean cosine of its valid top-k results; stops on
    'confidence', 'no_new', 'max_hops' or 'zero_residual' (beta >= 1 only). ef: an
    HNSWIndex's candidate list per hop (None = its ef_search); a FlatIndex ignores it."""

def extract_regions(
    attention: npt.NDArray[np.float32],
    image_size: tuple[int, int],
    *,
    k_sigma: float = 0.5,
    connectivity: int = 8,
    min_cells: int = 1,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32], npt.NDArray[np.int32]]:
    """(boxes (n, 4) x0, y0 inclusive / x1, y1 exclusive pixels, scores (n,) mean attention,
    labels (h, w) with 0 = background and i + 1 = region i) for cells > mean + k_sigma*std."""

class CompoundGroups:
    """Temporal sequences and multiview sets; an id is in at most one group of each kind."""

    def __init__(self) -> None: ...
    def add_temporal(self, member_ids: Sequence[int] | npt.NDArray[np.int64]) -> int: ...
    def add_multiview(self, member_ids: Sequence[int] | npt.NDArray[np.int64]) -> int: ...
    def temporal_of(self, id: int) -> npt.NDArray[np.int64]: ...
    def multiview_of(self, id: int) -> npt.NDArray[np.int64]: ...
    def contains(self, id: int) -> bool: ...
    @property
    def temporal_count(self) -> int: ...
    @property
    def multiview_count(self) -> int: ...
    def __len__(self) -> int: ...

def expand_compound(
    groups: CompoundGroups,
    ids: npt.NDArray[np.int64],
    scores: npt.NDArray[np.float32],
    *,
    temporal_decay: float = 0.8,
    multiview_decay: float = 0.7,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """(ids, scores, origin): retrieved ids keep their score, the rest of their groups come in
    at decay x score (best offer), sorted by score desc, ties to the smaller id."""

# ---- pixel features (cpp/bindings/bind_pixels.cpp) --------------------------------------
def saliency_maps(
    images: npt.NDArray[np.uint8],
    *,
    grid: int,
    residual_filter: int,
    residual_sigma: float,
    centre_sigma: float,
    surround_sigma: float,
    residual_weight: float,
) -> npt.NDArray[np.float32]:
    """Saliency of uint8 (n, size, size, 3) (spectral residual + centre-surround contrast): float32
    (n, grid, grid) in [0, 1], zeros for a uniform image; GIL released. TypeError for another dtype,
    ValueError for another shape, a non-contiguous array or size not a multiple of grid."""

def pixel_descriptor(
    images: npt.NDArray[np.uint8],
    colour_table: npt.NDArray[np.int32],
    *,
    colour_bins: int,
    colour_levels: Sequence[int],
    lbp_radii: Sequence[int],
    texture_levels: Sequence[int],
    orientation_bins: int,
    gradient_levels: Sequence[int],
    layout_grid: int,
    salience_grid: int,
    mirror_weight: float,
    salience_mirror_weight: float,
    weights: Sequence[float],
    saliency_grid: int,
    residual_filter: int,
    residual_sigma: float,
    centre_sigma: float,
    surround_sigma: float,
    residual_weight: float,
) -> npt.NDArray[np.float32]:
    """The default pixel descriptor (kira.models.default.pixel_encoder) of uint8 (n, size, size, 3):
    float32 (n, dim) unit rows; colour_table: int32 (32768,) bins of 5-bit RGB; weights: colour,
    texture, gradient, layout, salience; GIL released. TypeError / ValueError as saliency_maps."""
