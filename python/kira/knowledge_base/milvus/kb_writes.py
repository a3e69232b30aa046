"""Writing a prepared batch (`kira.knowledge_base.batch.WriteBatch`) into a Milvus-backed knowledge base.

Chunk ids do not come from a database counter but from each image's ordinal,
``ordinal * CHUNKS_PER_IMAGE + index in its document + 1`` (`chunk_id`), so a Ray ingest's workers
compute them alone and a retried batch writes the same ids again (Milvus upserts replace them;
nothing is duplicated). `milvus_rows` makes the chunk rows and the ``<name>__kb`` rows (document
records, thumbnails, text pieces) of a batch; `write_items` stores them: a journal row naming its
documents, chunks (upserts by chunk id, a document's older chunks deleted), the document records,
then the journal row deleted: a document is listed only once its chunks are in, and chunks a crash
leaves without a record are removed by the next writer (kira.knowledge_base.milvus.orphans).
`MilvusStorage.write` and the Ray actors (kira.ray_ingest.kb) both take this path.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

from kira.knowledge_base.batch import WriteBatch
from kira.knowledge_base.milvus.records import KbRecords, document_value, piece_value, thumbnail_value
from kira.knowledge_base.milvus.schema import MilvusCollection
from kira.knowledge_base.milvus.writes import ChunkRecord, replace_documents

log = logging.getLogger(__name__)

CHUNKS_PER_IMAGE = 1024  # id space per image: 1 document + max_regions + patch_grid**2 + passages must fit


def chunk_id(ordinal: int, index: int) -> int:
    """The chunk id of the `index`-th chunk of the document with ordinal `ordinal` (>= 0)."""
    if ordinal < 0 or not 0 <= index < CHUNKS_PER_IMAGE:
        raise ValueError(f"ordinal must be >= 0 and index in 0..{CHUNKS_PER_IMAGE - 1}; got {ordinal}, {index}")
    return ordinal * CHUNKS_PER_IMAGE + index + 1  # ids start at 1, as the SQLite store's


@dataclass
class KbBatch:
    """What `milvus_rows` makes of a batch: chunk rows, and ``__kb`` rows (documents, thumbnails, pieces)."""

    records: list[ChunkRecord] = field(default_factory=list)
    documents: dict[str, str] = field(default_factory=dict)  # "doc:<id>" / "thumb:<id>" / "piece:<id>" -> value
    chunks_per_doc: dict[str, int] = field(default_factory=dict)


def milvus_rows(batch: WriteBatch, ordinals: Sequence[int]) -> KbBatch:
    """The Milvus rows of `batch`; document i gets chunk ids from ``ordinals[i]``. ValueError for a document
    with more chunks than `CHUNKS_PER_IMAGE` (nothing is made)."""
    if len(ordinals) != len(batch.documents):
        raise ValueError(f"{len(batch.documents)} documents but {len(ordinals)} ordinals")
    for doc in batch.documents:
        if len(doc.chunks) > CHUNKS_PER_IMAGE:
            raise ValueError(f"{doc.doc_id}: {len(doc.chunks)} chunks, over {CHUNKS_PER_IMAGE}; lower patch_grid or "
                             "split it")
    out = KbBatch()
    for doc, ordinal in zip(batch.documents, ordinals):
        common: dict[str, Any] = dict(doc_id=doc.doc_id, doc_chunk=chunk_id(ordinal, 0), tags=doc.tags, metadata=dict(doc.metadata),
                      groups={f"{kind}:{gid}": position for kind, gid, position in doc.groups})
        for j, chunk in enumerate(doc.chunks):
            out.records.append(ChunkRecord(
                id=chunk_id(ordinal, j), level=chunk.level,
                parent=chunk_id(ordinal, chunk.parent) if chunk.parent is not None else -1, box=chunk.box,
                description=chunk.description, visual=chunk.visual, text=chunk.text, **common))
        out.chunks_per_doc[doc.doc_id] = len(doc.chunks)
        out.documents[f"doc:{doc.doc_id}"] = document_value(
            source=doc.source, caption=doc.caption, width=doc.width, height=doc.height, metadata=dict(doc.metadata),
            tags=doc.tags, provenance=doc.provenance)
        if doc.piece_texts and doc.piece_vectors is not None:
            value = piece_value(list(doc.piece_texts), doc.piece_vectors)
            if value is not None:  # past one row's 64 KB: none (the verifier encodes what it cites)
                out.documents[f"piece:{doc.doc_id}"] = value
        thumb = thumbnail_value(doc.thumbnail)
        if thumb is not None:
            out.documents[f"thumb:{doc.doc_id}"] = thumb
    return out


def write_items(collection: MilvusCollection, records: KbRecords, batch: KbBatch) -> int:
    """Store `batch`: its chunks (replacing any earlier chunks of its documents), then its document
    records. Returns the chunk rows written."""
    from kira.knowledge_base.milvus.orphans import journal_key

    records.check(batch.documents)  # a document record Milvus would refuse fails the batch before any chunk is written
    journal = journal_key(min(r.id for r in batch.records)) if batch.records else None
    if journal is not None:  # names the documents whose chunks may be left without a record by a crash
        records.put({journal: json.dumps(sorted(batch.chunks_per_doc))})
    written = replace_documents(collection, batch.records)
    records.put(batch.documents)
    if journal is not None:
        records.delete([journal])
    return written


__all__ = ["CHUNKS_PER_IMAGE", "KbBatch", "chunk_id", "milvus_rows", "write_items"]
