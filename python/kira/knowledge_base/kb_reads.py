"""What a query reads of a knowledge base: its derived views and its rows by id.

`KnowledgeBaseReads` is the reading half of `kira.knowledge_base.kb.KnowledgeBase` (its base class):
the per-commit views over the stored contents (chunk ids per level, each chunk's document, the
per-document grouping of a search, the lexical index, compound groups, the names a question uses;
kira.knowledge_base.views builds and caches them, or the storage answers them itself where it can,
kira.knowledge_base.storage) and the rows the stages read by id, never through ``store``. It holds no
state of its own: the knowledge base's storage and views, and whether it is closed or has uncommitted
writes, which `refresh` and `warm` look at.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from kira.knowledge_base.compound import CompoundIndex
from kira.knowledge_base.storage import ServesCompoundsPerHit, ServesNames, Storage
from kira.knowledge_base.views import DerivedView, DerivedViews, decode_thumbnail, warm

T = TypeVar("T")


class KnowledgeBaseReads:
    """The reading methods of `kira.knowledge_base.kb.KnowledgeBase` (module docstring), over its ``storage`` and
    ``views``. Thread safety: as the knowledge base's, one instance belongs to one thread."""

    storage: Storage
    views: DerivedViews
    _closed: bool
    _dirty: bool

    # ---- reading ----------------------------------------------------------------------
    def refresh(self) -> bool:
        """Pick up commits made by another process since this one looked; returns whether any were."""
        if self._closed or self._dirty or not self.storage.refresh():
            return False
        self.views.clear()
        return True

    def index(self, space: str) -> Any:
        """The vector index of `space` ('visual' or 'text'), or None for an empty knowledge base."""
        return self.storage.index(space)

    def level_ids(self, levels: Iterable[str]) -> np.ndarray:
        """Sorted int64 ids of chunks at `levels` (cached per commit)."""
        return self.views.level_ids(levels)

    def document_chunk_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document-level chunk id of each chunk id (-1 for unknown ids)."""
        return self.views.document_chunk_of(chunk_ids, self)

    def document_groups(self) -> Any:
        """``groups=`` for an index search (with ``per_group=n``: at most n chunks of any one document)."""
        return self.views.document_groups(self)

    def lexical(self) -> Any:
        """The lexical (BM25) index over document and passage chunks: each document chunk with its description,
        doc id and metadata values, each passage with its text (cached per commit)."""
        return self.views.lexical(self)

    def compounds(self) -> CompoundIndex:
        """The compound groups of this commit, in one representation (`kira.knowledge_base.compound`)."""
        return self.views.compounds(self)

    def compounds_for(self, *, doc_ids: Iterable[str] = (), chunk_ids: Iterable[int] = ()) -> CompoundIndex:
        """A `CompoundIndex` holding at least every group these documents (doc ids, or document chunk ids) reach:
        what a query reads of its hits. The whole index of this commit, or where the storage fetches them per hit
        (Milvus: `ServesCompoundsPerHit`), those groups alone."""
        if isinstance(self.storage, ServesCompoundsPerHit):
            return self.storage.compounds_for(doc_ids=doc_ids, chunk_ids=chunk_ids)
        return self.compounds()

    def compound_groups(self) -> tuple[Any, dict[tuple[int, int], str]]:
        """(kira._core.CompoundGroups over document-chunk ids, {(a, b): kind} for member pairs)."""
        c = self.compounds()
        return c.core, dict(c.kinds)

    def group_partners(self) -> Mapping[int, frozenset[int]]:
        """{document chunk id: the document chunks sharing a temporal or multiview group with it}."""
        return self.compounds().partners

    def compound_of(self) -> Mapping[str, str]:
        """{doc_id: its compound document's key (the smallest member doc id)} for every grouped document."""
        return self.compounds().compound_of

    def view_set_of(self) -> Mapping[str, str]:
        """{doc_id: its multiview group's id} for every document in a multiview group of 2+."""
        return self.compounds().view_set_of

    def identifier_postings(self, text: str, *, allow: np.ndarray | None = None) -> Mapping[str, np.ndarray]:
        """{word of `text`: the document chunk ids it names}: the words a document id, group id or metadata
        value of this knowledge base holds (kira.knowledge_base.identifiers; read once per commit)."""
        if isinstance(self.storage, ServesNames):  # asked per word (Milvus: text_match)
            return self.storage.identifier_postings(text, allow=allow)
        from kira.knowledge_base.identifiers import identifier_index

        names = self.memo("identifiers", lambda: identifier_index(self))
        return names.named(text, allow=allow, holding=self.lexical().chunks_holding)

    def view(self, spec: DerivedView[T]) -> T:
        """The value of a derived view for the current commit (built on first use)."""
        return self.views.view(spec, self)

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """`build()`'s value, computed once per commit (a caller's own views of the stored contents)."""
        return self.views.cached(f"memo:{key}", build)

    def warm(self) -> dict[str, float]:
        """Pick up new commits, then build the derived views a query reads (`kira.knowledge_base.views.warm`), so
        the first query after a commit does not pay for them; returns {view: seconds}."""
        if self._closed:
            raise ValueError(f"{self.storage.where} is closed; open it again with KnowledgeBase.open before warming it")
        self.refresh()
        return warm(self)

    # ---- rows a query reads by id (stages read these, never ``store``) -------------------
    def documents(self, doc_ids: Iterable[str] | None = None) -> dict[str, Any]:
        return dict(self.storage.rows.documents(doc_ids))

    def chunks(self, ids: Sequence[int] | np.ndarray) -> Mapping[int, Any]:
        return self.storage.rows.chunks(ids)

    def provenances(self, doc_ids: Iterable[str]) -> Mapping[str, dict[str, Any]]:
        return self.storage.rows.provenances(doc_ids)

    def document_chunk_ids(self, doc_ids: Iterable[str]) -> Mapping[str, int]:
        return self.storage.rows.document_chunk_ids(doc_ids)

    def piece_vectors(self, keys: Iterable[tuple[str, str]], dim: int) -> Mapping[tuple[str, str], np.ndarray]:
        return self.storage.rows.piece_vectors(keys, dim)

    def has_document(self, doc_id: str) -> bool:
        return bool(self.storage.rows.has_document(doc_id))

    def generation(self) -> int:
        """How many commits the knowledge base has seen (any process's)."""
        return int(self.storage.generation())

    def thumbnail_png(self, doc_id: str) -> bytes | None:
        return self.storage.rows.thumbnail(doc_id)

    def thumbnail(self, doc_id: str) -> np.ndarray | None:
        """The stored <= 160 px preview of a document's image (uint8 RGB), or None."""
        return decode_thumbnail(self.storage.rows.thumbnail(doc_id))

    @property
    def adapter(self) -> Any:
        """The domain adapter the visual index is projected through (kira.knowledge_base.adaptation), or None."""
        return getattr(self.storage, "adapter", None)

    def visual_query(self, vectors: np.ndarray) -> np.ndarray:
        """Raw image-space query vectors -> the visual index's space (through the adapter, if set)."""
        raw = np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)
        adapter = self.adapter
        return np.ascontiguousarray(adapter.apply(raw), dtype=np.float32) if adapter is not None and len(raw) else raw


__all__ = ["KnowledgeBaseReads"]
