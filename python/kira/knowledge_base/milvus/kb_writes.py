"""Writing a batch of images (and text documents) into a Milvus-backed knowledge base.

`encode_items` is the one path from the items `KnowledgeBase._add_images` takes (pixels,
doc id, caption, tags, metadata, source, sequence, view, passages) to what Milvus stores:
`kira.knowledge_base.batch_encode.encode_batch` (the embedded knowledge base's own chunking,
describing and encoding), chunk ids from the images' ordinals
(`kira.knowledge_base.milvus.encode.chunk_id`), each document's record (source, caption, size,
metadata, tags, provenance as the embedded store writes it) and thumbnail. The knowledge
base's `add_image` / `ingest` and a Ray ingest actor both call it, so both write the same
rows for the same image and ordinal. `write_items` stores a batch: a journal row naming its
documents, chunks (upserts by chunk id, a document's older chunks deleted), the document
records, then the journal row deleted: a document is listed only once its chunks are in, a
retried batch duplicates nothing, and chunks a crash leaves without a record are removed by
the next writer (kira.knowledge_base.milvus.orphans).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from kira.knowledge_base.milvus.encode import CHUNKS_PER_IMAGE, chunk_id
from kira.knowledge_base.milvus.records import KbRecords, document_value, piece_value, thumbnail_value
from kira.knowledge_base.milvus.schema import MilvusCollection
from kira.knowledge_base.milvus.writes import ChunkRecord, replace_documents
from kira.knowledge_base.inputs import group_arg

log = logging.getLogger(__name__)


@dataclass
class KbBatch:
    """What `encode_items` makes of a batch: chunk rows, and ``__kb`` rows (documents, thumbnails)."""

    records: list[ChunkRecord] = field(default_factory=list)
    documents: dict[str, str] = field(default_factory=dict)  # "doc:<id>" / "thumb:<id>" -> value
    chunks_per_doc: dict[str, int] = field(default_factory=dict)


def encode_items(stack: Any, items: Sequence[Mapping[str, Any]], ordinals: Sequence[int], *, chunking: Any,
                 levels: Sequence[str], caption_children: bool = False,
                 group_size: Callable[[str, str], int] | None = None, thumbnails: bool = True,
                 pieces: bool = False, patch_pieces: bool = False) -> KbBatch:
    """Chunk, describe and encode `items` (module docstring); item i gets chunk ids from ``ordinals[i]``.

    group_size(kind, group id): members a group has now, the position of an item joining a
    group without one (as the embedded store numbers them). thumbnails: make the ``thumb:`` rows. Raises ValueError for an image
    with more chunks than `CHUNKS_PER_IMAGE` or a bad sequence / view argument.
    pieces: also encode each document's text pieces (`GroundingConfig.pieces_at_ingest`; with
    `patch_pieces`, patch chunks' too; `kira.knowledge_base.kb_writing.stored_pieces`) into a
    ``piece:<doc id>`` row (`piece_value`), as the embedded knowledge base stores them; a document whose pieces pass one row's 64 KB gets none (the verifier
    then encodes what it cites).
    """
    from kira.knowledge_base.batch_encode import encode_batch
    from kira.knowledge_base.kb_writing import _thumbnail_png, stored_source

    if len(ordinals) != len(items):
        raise ValueError(f"{len(items)} items but {len(ordinals)} ordinals")
    groups_of: list[dict[str, float]] = []
    added: dict[str, int] = {}
    for item in items:
        member: dict[str, float] = {}
        for kind, arg in (("temporal", item.get("sequence")), ("multiview", item.get("view"))):
            group = group_arg(arg, "sequence" if kind == "temporal" else "view")
            if group is not None:
                gid, pos = group
                key = f"{kind}:{gid}"
                if pos is None:
                    pos = float((group_size(kind, gid) if group_size else 0) + added.get(key, 0))
                added[key] = added.get(key, 0) + 1
                member[key] = pos
        groups_of.append(member)
    batch = encode_batch(stack, items, chunking, levels, caption_children=caption_children)
    piece_rows: list[tuple[list[str], Any]] = []
    if pieces:
        from kira.knowledge_base.kb_writing import encode_pieces, stored_pieces

        piece_rows = encode_pieces(stack.text, stored_pieces(items, batch.plans, batch.texts, patches=patch_pieces),
                                   batch.texts, batch.text)
    image_identity = stack.identity().get("image") if hasattr(stack, "identity") else None
    out = KbBatch()
    vi = ti = 0
    for item, plan, ordinal, member in zip(items, batch.plans, ordinals, groups_of):
        doc_id, pixels = item["doc_id"], item["pixels"]
        n_chunks = (len(plan.chunks) if plan is not None else 1) + len(item.get("passages", ()))
        if n_chunks > CHUNKS_PER_IMAGE:
            raise ValueError(f"{doc_id}: {n_chunks} chunks, over {CHUNKS_PER_IMAGE}; lower patch_grid or split it")
        common = dict(doc_id=doc_id, doc_chunk=chunk_id(ordinal, 0), tags=tuple(item.get("tags", ())),
                      metadata=dict(item.get("metadata") or {}), groups=dict(member))
        j = 0
        if plan is None:
            out.records.append(ChunkRecord(id=chunk_id(ordinal, 0), level="document", description=batch.texts[ti],
                                           text=batch.text[ti], **common))
            ti, j = ti + 1, 1
        else:
            for chunk in plan.chunks:
                out.records.append(ChunkRecord(
                    id=chunk_id(ordinal, j), level=chunk.level,
                    parent=chunk_id(ordinal, chunk.parent) if chunk.parent is not None else -1, box=chunk.box,
                    description=chunk.description or batch.texts[ti], visual=batch.visual[vi], text=batch.text[ti],
                    **common))
                vi, ti, j = vi + 1, ti + 1, j + 1
        for passage in item.get("passages", ()):
            out.records.append(ChunkRecord(id=chunk_id(ordinal, j), level="passage", parent=chunk_id(ordinal, 0),
                                           description=passage, text=batch.text[ti], **common))
            ti, j = ti + 1, j + 1
        out.chunks_per_doc[doc_id] = j
        h, w = pixels.shape[:2] if pixels is not None else (0, 0)
        labels, read = batch.labels.get(doc_id), batch.read_lines.get(doc_id)
        source = stored_source(item.get("source"))
        provenance = {
            "source": source or "(in memory)",
            "image_encoder": image_identity or type(stack.image).__name__,
            "text_encoder": type(stack.text).__name__,
            "described_by": "user caption/tags" if (item.get("caption") or item.get("tags")) else "captioner",
            **({"digest": item["digest"]} if item.get("digest") else {}),
            **({"labels": labels} if labels else {}),
            **({"text_read": read} if read else {}),
        }
        out.documents[f"doc:{doc_id}"] = document_value(
            source=source, caption=item.get("caption"), width=w, height=h,
            metadata=dict(item.get("metadata") or {}), tags=tuple(item.get("tags", ())), provenance=provenance)
        if piece_rows:
            value = piece_value(*piece_rows[len(out.chunks_per_doc) - 1])
            if value is not None:
                out.documents[f"piece:{doc_id}"] = value
        thumb = thumbnail_value(_thumbnail_png(pixels)) if pixels is not None and thumbnails else None
        if thumb is not None:
            out.documents[f"thumb:{doc_id}"] = thumb
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


def add_items(kb: Any, collection: MilvusCollection, items: Sequence[Mapping[str, Any]]) -> None:
    """`MilvusKnowledgeBase._add_images`: refuse a doc id stored or repeated (ValueError, nothing written), encode
    the batch with the knowledge base's settings, reserve its ordinals (only once it encoded: no ids wasted on
    errors) and write it."""
    from kira.knowledge_base.milvus.writes import reserve_ordinals

    seen: set[str] = set()
    stored = kb._records.get([f"doc:{item['doc_id']}" for item in items])  # one round trip for the batch
    for item in items:
        if item["doc_id"] in seen or f"doc:{item['doc_id']}" in stored:
            raise ValueError(f"document {item['doc_id']!r} is already in the knowledge base; remove it first or "
                             "pick another id")
        seen.add(item["doc_id"])
    grounding = kb.config.grounding
    batch = encode_items(kb.models, items, list(range(len(items))), chunking=kb.config.chunking, levels=kb.levels,
                         caption_children=kb.caption_children, group_size=kb.store.group_size,
                         pieces=grounding.pieces_at_ingest, patch_pieces=grounding.patch_pieces_at_ingest)
    write_items(collection, kb._records, renumber(batch, reserve_ordinals(collection, len(items))))


def renumber(batch: KbBatch, first: int) -> KbBatch:
    """`batch`, encoded with ordinals 0..n-1, moved to the ordinals first..first+n-1 (in place; returned)."""
    shift = int(first) * CHUNKS_PER_IMAGE
    for r in batch.records:
        r.id += shift
        r.doc_chunk += shift
        if r.parent >= 0:
            r.parent += shift
    return batch
