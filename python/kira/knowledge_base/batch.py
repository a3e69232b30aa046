"""The typed records of one write: what the knowledge base hands its storage to keep, all or nothing.

`kira.knowledge_base.writing.prepare_batch` makes a `WriteBatch` from the user's items (chunked,
described, encoded, with text pieces, thumbnails, provenance and group positions); the embedded
and the Milvus storage each store it their own way, and a Ray ingest's actors build theirs with
the same function. Chunk ids are the storage's to give: a chunk names its parent by its position
in its document's chunk list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kira.knowledge_base.rows import DocumentRow


@dataclass(frozen=True)
class ChunkToStore:
    """One chunk of a document: its level, parent (index into the document's chunks, None for the top),
    box, description and raw vectors (``visual`` None for a text-only chunk)."""

    level: str
    parent: int | None
    box: tuple[int, int, int, int] | None
    description: str
    visual: np.ndarray | None
    text: np.ndarray


@dataclass(frozen=True)
class DocumentToStore(DocumentRow):
    """One document's row and everything stored with it. ``chunks[0]`` is its document-level chunk; passages
    (``level == "passage"``, text in ``passages`` in order) follow its image chunks. ``groups``:
    (kind, group id, position) of each temporal / multiview group it joins. ``piece_texts`` /
    ``piece_vectors``: its text pieces and their raw sentence vectors (none: the verifier encodes what it
    cites)."""

    provenance: dict[str, Any]
    thumbnail: bytes | None
    chunks: tuple[ChunkToStore, ...]
    passages: tuple[str, ...] = ()
    groups: tuple[tuple[str, str, float], ...] = ()
    piece_texts: tuple[str, ...] = ()
    piece_vectors: np.ndarray | None = None


@dataclass
class WriteBatch:
    """Documents written together, whole or not at all."""

    documents: list[DocumentToStore] = field(default_factory=list)

    @property
    def doc_ids(self) -> list[str]:
        return [d.doc_id for d in self.documents]


__all__ = ["ChunkToStore", "DocumentToStore", "WriteBatch"]
