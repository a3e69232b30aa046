"""Writes to a knowledge base's Milvus collection: batched upserts by chunk id, deletes by document.

An upsert replaces a chunk with the same id, so an ingest job retried after a crash writes
the same rows again and duplicates nothing. Deleting a document deletes every chunk whose
``doc_id`` is that document (its document, region, patch and passage chunks).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from kira.knowledge_base.milvus.lexical import delete_terms, upsert_terms
from kira.knowledge_base.milvus.schema import MAX_DESCRIPTION, MAX_GROUPS, MAX_TAGS, MilvusCollection

log = logging.getLogger(__name__)

LEVELS = ("document", "region", "patch", "passage")


@dataclass
class ChunkRecord:
    """One chunk as the Milvus backend stores it (the SQLite store's chunk row plus its document's fields)."""

    id: int  # chunk id, unique in the knowledge base (the primary key)
    doc_id: str  # the document it belongs to
    doc_chunk: int  # the id of its document's document-level chunk (itself for a document chunk)
    level: str  # "document", "region", "patch" or "passage"
    parent: int = -1  # parent chunk id; -1 for none
    box: tuple[int, int, int, int] | None = None  # x0, y0, x1, y1 in image pixels; None for the whole image
    description: str = ""
    tags: Sequence[str] = ()
    metadata: dict[str, Any] = field(default_factory=dict)  # the document's user metadata (JSON-serialisable)
    groups: dict[str, float] = field(default_factory=dict)  # "kind:group_id" -> position (temporal / multiview)
    visual: np.ndarray | None = None  # (visual_dim,) float32; None if the chunk has no visual vector
    text: np.ndarray | None = None  # (text_dim,) float32; None if it has no text vector


def _vector(v: np.ndarray | None, dim: int, what: str) -> tuple[list[float], bool]:
    if v is None:
        placeholder = [0.0] * dim
        placeholder[0] = 1.0  # a unit placeholder: never searched (has_<space> is false), never a zero norm
        return placeholder, False
    a = np.asarray(v, dtype=np.float32).reshape(-1)
    if a.shape[0] != dim:
        raise ValueError(f"{what}: vector has {a.shape[0]} dimensions, the collection holds {dim}")
    norm = float(np.linalg.norm(a))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError(f"{what}: vector is zero or not finite; drop the chunk or give it a real embedding")
    return (a / norm).tolist(), True


def to_row(record: ChunkRecord, collection: MilvusCollection) -> dict[str, Any]:
    """The Milvus row of `record`, validated (ValueError naming the chunk and the fix)."""
    what = f"chunk {record.id}"
    if record.level not in LEVELS:
        raise ValueError(f"{what}: level {record.level!r}, choose one of {LEVELS}")
    if len(record.tags) > MAX_TAGS or len(record.groups) > MAX_GROUPS:
        raise ValueError(f"{what}: at most {MAX_TAGS} tags and {MAX_GROUPS} group memberships")
    if record.box is not None and len(record.box) != 4:
        raise ValueError(f"{what}: box must be (x0, y0, x1, y1), got {record.box!r}")
    try:
        json.dumps(record.metadata)
    except TypeError as exc:
        raise ValueError(f"{what}: metadata must be JSON-serialisable ({exc})") from exc
    cfg = collection.config
    visual, has_visual = _vector(record.visual, cfg.visual_dim, what)
    text, has_text = _vector(record.text, cfg.text_dim, what)
    description = record.description
    if len(description.encode("utf-8")) > MAX_DESCRIPTION:
        description = description.encode("utf-8")[:MAX_DESCRIPTION].decode("utf-8", "ignore")
        log.warning("%s: description cut to %d bytes", what, MAX_DESCRIPTION)
    return {
        "id": int(record.id), "doc_id": str(record.doc_id), "doc_chunk": int(record.doc_chunk),
        "level": record.level, "parent": int(record.parent),
        "box": [int(b) for b in record.box] if record.box is not None else [],
        "tags": [str(t) for t in record.tags], "metadata": dict(record.metadata),
        "groups": sorted(record.groups), "group_order": {k: float(v) for k, v in record.groups.items()},
        "description": description, "has_visual": has_visual, "has_text": has_text,
        "visual": visual, "text": text,
    }


def upsert_chunks(collection: MilvusCollection, records: Iterable[ChunkRecord], *, batch_size: int | None = None) -> int:
    """Write `records` in batches of `batch_size` (default: the config's), replacing chunks with the same id.

    Every row of a batch is validated before the batch is sent, so a bad record leaves that
    batch unwritten (earlier batches stay). Returns the number of rows written.
    """
    size = int(batch_size or collection.config.batch_size)
    written, batch = 0, []
    for record in records:
        batch.append(to_row(record, collection))
        if len(batch) >= size:
            written += _send(collection, batch)
            batch = []
    if batch:
        written += _send(collection, batch)
    return written


def _send(collection: MilvusCollection, rows: list[dict[str, Any]]) -> int:
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("a batch repeats a chunk id; give each chunk its own id")
    result = collection.client.upsert(collection.name, rows, timeout=collection.config.timeout)
    upsert_terms(collection, rows)  # after the chunks: a term hit always finds its chunk
    collection.generation += 1
    return int(result.get("upsert_count", len(rows)) if isinstance(result, dict) else len(rows))


def _quoted(values: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(str(v)) for v in values) + "]"


def delete_documents(collection: MilvusCollection, doc_ids: Sequence[str]) -> int:
    """Delete every chunk of the documents `doc_ids`; returns how many chunks were deleted."""
    if not doc_ids:
        return 0
    expr = f"doc_id in {_quoted(doc_ids)}"
    before = collection.count(expr)
    delete_terms(collection, expr)
    collection.client.delete(collection.name, filter=expr)
    collection.generation += 1
    return before


def delete_chunks(collection: MilvusCollection, ids: Sequence[int]) -> None:
    """Delete chunks by id (ids not stored are ignored)."""
    if len(ids):
        delete_terms(collection, ids=[int(i) for i in ids])
        collection.client.delete(collection.name, ids=[int(i) for i in ids])
        collection.generation += 1


def replace_documents(collection: MilvusCollection, records: Sequence[ChunkRecord]) -> int:
    """Upsert `records`, then delete any other chunk of their documents (left by an earlier ingest of the
    same document under other ids). Readers never see a document missing; returns rows written."""
    written = upsert_chunks(collection, records)
    by_doc: dict[str, list[int]] = {}
    for r in records:
        by_doc.setdefault(r.doc_id, []).append(int(r.id))
    if by_doc:
        keep = sorted(i for ids in by_doc.values() for i in ids)
        stale = f"doc_id in {_quoted(by_doc)} and not (id in {keep})"
        delete_terms(collection, stale)
        collection.client.delete(collection.name, filter=stale)
        collection.generation += 1
    return written


def _meta_name(collection: MilvusCollection) -> str:
    return f"{collection.name}__meta"


def reserved_ordinals(collection: MilvusCollection) -> int:
    """How many image ordinals have been reserved (`reserve_ordinals`) so far: every chunk id is below
    this many ordinals' ids."""
    client, name = collection.client, _meta_name(collection)
    if not client.has_collection(name):
        return 0
    client.load_collection(name)
    rows = client.get(name, ids=["next_ordinal"], output_fields=["value"])
    return int(rows[0]["value"]) if rows else 0


def reserve_ordinals(collection: MilvusCollection, n: int) -> int:
    """Reserve `n` image ordinals (chunk id ranges, kira.knowledge_base.milvus.kb_writes.chunk_id) for one ingest job;
    returns the first. Kept in a small ``<collection>__meta`` collection. One ingest job at a time per
    knowledge base (as the local store has one writer): two drivers reserving at once may overlap."""
    pm = __import__("pymilvus")
    client, name = collection.client, _meta_name(collection)
    if not client.has_collection(name):
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("key", pm.DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("value", pm.DataType.INT64)
        schema.add_field("unused", pm.DataType.FLOAT_VECTOR, dim=2)  # Milvus wants a vector field in every collection
        params = client.prepare_index_params()
        params.add_index(field_name="unused", index_type="FLAT", metric_type="L2")
        client.create_collection(name, schema=schema, index_params=params, consistency_level="Strong")
    else:
        client.load_collection(name)  # a restarted server holds it released until loaded
    rows = client.get(name, ids=["next_ordinal"], output_fields=["value"])
    first = int(rows[0]["value"]) if rows else 0
    client.upsert(name, [{"key": "next_ordinal", "value": first + int(n), "unused": [1.0, 0.0]}])
    return first
