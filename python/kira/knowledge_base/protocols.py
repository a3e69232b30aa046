"""The knowledge base seam: what the pipeline, the reasoning stages and the server read and write.

`KnowledgeBaseLike` is everything `kira.Kira` and `kira serve` ask of a knowledge base; they never
read its storage. `kira.knowledge_base.KnowledgeBase` satisfies it on every backend (a new backend
implements `kira.knowledge_base.storage.Storage`, not this); tests/knowledge_base/test_kb_protocols.py checks that
every ``kb.<name>`` the pipeline, reasoning and serve packages use is listed here.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, TypeVar, runtime_checkable

import numpy as np

T = TypeVar("T")


@runtime_checkable
class KnowledgeBaseLike(Protocol):
    """What kira.pipeline, kira.reasoning and kira.serve use of a knowledge base."""

    config: Any  # kira.config.KiraConfig
    read_only: bool

    @property
    def profile(self) -> Any:
        """The `kira.DomainProfile` stored with it."""
        ...

    @property
    def models(self) -> Any:
        """The model stack it is encoded with (loaded on first use)."""
        ...

    @property
    def adapter(self) -> Any:
        """The domain adapter its visual space is projected with, or None."""
        ...

    # ---- searching --------------------------------------------------------------------
    def index(self, space: str) -> Any:
        """The `kira.backends.VectorIndex` of 'visual' or 'text' (None before the first image)."""
        ...

    def level_ids(self, levels: Iterable[str]) -> np.ndarray:
        """Sorted ids of the chunks at `levels`."""
        ...

    def document_chunk_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document chunk id of each chunk id (-1 unknown)."""
        ...

    def document_groups(self) -> Any:
        """``groups=`` for its indexes' searches: at most n chunks per document."""
        ...

    def compounds_for(self, *, doc_ids: Iterable[str] = (), chunk_ids: Iterable[int] = ()) -> Any:
        """The `CompoundIndex` of (at least) every group these documents reach: what a query reads of its hits."""
        ...

    def compound_groups(self) -> tuple[Any, dict[tuple[int, int], str]]:
        """(kira._core.CompoundGroups over document chunks, {(a, b): kind})."""
        ...

    def compound_of(self) -> Mapping[str, str]:
        ...

    def view_set_of(self) -> Mapping[str, str]:
        ...

    def group_partners(self) -> Mapping[int, frozenset[int]]:
        ...

    def lexical(self) -> Any:
        """The BM25 index (``search``, ``specificity``, ``document_frequency``, ``len``)."""
        ...

    def identifier_postings(self, text: str, *, allow: np.ndarray | None = None) -> Mapping[str, np.ndarray]:
        """{word of `text`: the document chunks it names}: words its document ids, group ids or metadata hold."""
        ...

    def visual_query(self, vectors: np.ndarray) -> np.ndarray:
        """Raw image-space vectors -> the visual index's space."""
        ...

    def bridge(self) -> Any:
        """The fitted text->image bridge, or None."""
        ...

    # ---- rows by id (what stages read; never ``store``) ----------------------------------
    def documents(self, doc_ids: Iterable[str] | None = None) -> Mapping[str, Any]:
        """doc id -> `DocumentRow` (source, caption, width, height, metadata, tags); all when None."""
        ...

    def chunks(self, ids: Sequence[int] | np.ndarray) -> Mapping[int, Any]:
        """chunk id -> `ChunkRow` (id, doc_id, level, parent_id, box, description); unknown ids absent."""
        ...

    def provenances(self, doc_ids: Iterable[str]) -> Mapping[str, dict[str, Any]]:
        """doc id -> how the document was made (encoders, labels, text read)."""
        ...

    def document_chunk_ids(self, doc_ids: Iterable[str]) -> Mapping[str, int]:
        """doc id -> its document-level chunk id."""
        ...

    def piece_vectors(self, keys: Iterable[tuple[str, str]], dim: int) -> Mapping[tuple[str, str], np.ndarray]:
        """(doc id, piece text) -> its stored sentence vector (pieces not stored are absent)."""
        ...

    def has_document(self, doc_id: str) -> bool:
        ...

    def generation(self) -> int:
        """How many commits the knowledge base has seen (any process's)."""
        ...

    def thumbnail(self, doc_id: str) -> np.ndarray | None:
        """The stored preview as an RGB array, or None."""
        ...

    def thumbnail_png(self, doc_id: str) -> bytes | None:
        """The stored preview's PNG bytes, or None."""
        ...

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """`build()` once per commit."""
        ...

    def refresh(self) -> bool:
        """Pick up other processes' commits; whether there were any."""
        ...

    def warm(self) -> dict[str, float]:
        ...

    def check_models(self, stack: Any) -> None:
        """ValueError when `stack` encodes with other models than the knowledge base was built with."""
        ...

    def built_with(self) -> dict[str, str]:
        ...

    def stats(self) -> dict[str, Any]:
        ...

    # ---- writing ----------------------------------------------------------------------
    def add_image(self, image: Any, *, doc_id: str | None = None, caption: str | None = None,
                  tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
                  sequence: Any = None, view: Any = None) -> str:
        ...

    def remove(self, doc_id: str) -> None:
        ...

    def commit(self, *, checkpoint: bool | None = None) -> int:
        ...

    def close(self) -> None:
        ...

    def __len__(self) -> int:
        ...


PROTOCOL_NAMES = frozenset(
    name for cls in (KnowledgeBaseLike,) for name in (*cls.__dict__.get("__annotations__", {}), *vars(cls))
    if not name.startswith("_") or name == "__len__")
"""Every attribute `KnowledgeBaseLike` lists (for the test that keeps it complete)."""
