"""The read side of a knowledge base on Milvus, and moving an embedded knowledge base there.

`MilvusKnowledgeView` answers what kira.pipeline.query asks of a knowledge base when it
searches (`index(space)`, `document_groups()`, `lexical()`, `visual_query()`, `bridge()`),
from one Milvus collection: the piece `KnowledgeBase(backend="milvus")` will hand the pipeline
once the knowledge base has a Store seam. `export_knowledge_base` copies an embedded knowledge
base (SQLite + core indexes) into a collection under the same chunk ids, so both answer the
same searches with the same ids.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import numpy as np

from kira.knowledge_base.milvus.index import MilvusIndex, lexical_search
from kira.knowledge_base.milvus.schema import SPACES, MilvusCollection
from kira.knowledge_base.milvus.writes import ChunkRecord, upsert_chunks

log = logging.getLogger(__name__)


class DocumentGroups:
    """`groups=` for a `MilvusIndex` search: "at most n chunks per document", done by Milvus on ``doc_chunk``.

    Given a knowledge base's `document_chunk_of` and a chunk count, it also reads like the core's
    `GroupMap` (``len``, ``group_of``), without holding the map in this process.
    """

    def __init__(self, group_of: Any = None, count: Any = None) -> None:
        self._group_of, self._count = group_of, count

    def __len__(self) -> int:
        """Chunks that have a group (every chunk of the knowledge base)."""
        if self._count is None:
            raise TypeError("this DocumentGroups was made without a chunk count")
        return int(self._count())

    def group_of(self, ids: np.ndarray) -> np.ndarray:
        """The document chunk id of each chunk id (-1 for unknown ids)."""
        if self._group_of is None:
            raise TypeError("this DocumentGroups was made without a chunk -> document map")
        return self._group_of(np.asarray(ids, dtype=np.int64))

    def __repr__(self) -> str:
        return "DocumentGroups(field='doc_chunk')"


class MilvusLexical:
    """BM25 over chunk descriptions in Milvus, with the `search` of kira.knowledge_base.lexical.LexicalIndex."""

    def __init__(self, collection: MilvusCollection) -> None:
        self.collection = collection

    def search(self, text: str, k: int, *, allow: np.ndarray | None = None) -> Any:
        """The `k` best chunks for `text` (a `LexicalHits`, scores > 0); ValueError for k < 1."""
        from kira.knowledge_base.lexical import LexicalHits

        if k < 1:
            raise ValueError(f"k must be >= 1; got {k}")
        if not text.strip() or (allow is not None and len(allow) == 0):
            return LexicalHits(np.zeros(0, np.int64), np.zeros(0, np.float32))
        ids, scores = lexical_search(self.collection, text, k, allow=allow)
        return LexicalHits(ids, np.abs(scores))  # Milvus Lite 3.2 reports BM25 negated


class MilvusKnowledgeView:
    """What the pipeline's search stage reads from a knowledge base, served by one Milvus collection.

    No adapter transform and no text->image bridge are stored in Milvus yet: `visual_query` returns
    the raw vectors and `bridge()` None (a knowledge base using either keeps them beside its config).
    """

    def __init__(self, collection: MilvusCollection) -> None:
        self.collection = collection
        self._indexes = {space: MilvusIndex(collection, space) for space in SPACES}
        self._groups = DocumentGroups()

    def index(self, space: str) -> MilvusIndex:
        """The `MilvusIndex` of `space` ("visual" or "text")."""
        if space not in self._indexes:
            raise ValueError(f"space {space!r}: choose 'visual' or 'text'")
        return self._indexes[space]

    def document_groups(self) -> DocumentGroups:
        """The document grouping, for `search(..., groups=, per_group=)` on this view's indexes."""
        return self._groups

    def lexical(self) -> MilvusLexical:
        return MilvusLexical(self.collection)

    def visual_query(self, vectors: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)

    def bridge(self) -> None:
        return None

    def group_members(self, kind: str, group_id: str) -> list[str]:
        """Doc ids of a temporal / multiview group in their order (for compound expansion in-process)."""
        key = f"{kind}:{group_id}"
        rows = self.collection.client.query(
            self.collection.name, filter=f'array_contains(groups, "{key}") and level == "document"',
            output_fields=["doc_id", "group_order"])
        return [r["doc_id"] for r in sorted(rows, key=lambda r: (r["group_order"].get(key, 0.0), r["doc_id"]))]


def knowledge_base_records(kb: Any, *, batch: int = 1024) -> Iterator[ChunkRecord]:
    """Every chunk of an embedded `KnowledgeBase` as a `ChunkRecord` (same ids; the vectors its indexes
    hold, so searches agree), its document's tags, metadata and group memberships included."""
    store = kb.store
    memberships: dict[str, dict[str, float]] = {}
    for kind, gid, docs in store.groups():
        for order, doc in enumerate(docs):
            memberships.setdefault(doc, {})[f"{kind}:{gid}"] = float(order)
    documents = store.documents()
    ids = store.chunk_ids()
    indexes = {space: kb.index(space) for space in SPACES}
    for start in range(0, len(ids), batch):
        part = ids[start:start + batch]
        rows = store.chunks(part)
        doc_chunks = kb.document_chunk_of(part)
        vectors: dict[str, dict[int, np.ndarray]] = {}
        for space, index in indexes.items():
            have = np.array([i for i in part if index is not None and index.contains(int(i))], np.int64)
            vectors[space] = dict(zip(have.tolist(), index.get_vectors(have))) if len(have) else {}
        for cid, doc_chunk in zip(part.tolist(), doc_chunks.tolist()):
            row = rows[cid]
            doc = documents[row.doc_id]
            yield ChunkRecord(
                id=cid, doc_id=row.doc_id, doc_chunk=doc_chunk if doc_chunk >= 0 else cid, level=row.level,
                parent=row.parent_id if row.parent_id is not None else -1, box=row.box,
                description=row.description, tags=doc.tags, metadata=dict(doc.metadata),
                groups=memberships.get(row.doc_id, {}),
                visual=vectors["visual"].get(cid), text=vectors["text"].get(cid))


def export_knowledge_base(kb: Any, collection: MilvusCollection) -> int:
    """Copy every chunk of an embedded knowledge base into `collection` (upserts: safe to repeat), then
    flush; returns the number of chunks written. The collection's dims must match the knowledge base's."""
    written = upsert_chunks(collection, knowledge_base_records(kb))
    collection.flush()
    log.info("exported %d chunks to %s", written, collection.name)
    return written
