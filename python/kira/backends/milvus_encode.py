"""Images -> `ChunkRecord`s for the Milvus backend: chunk, describe and encode a batch, with stable ids.

This is the knowledge base's own batch path (kira.knowledge_base.batch_encode.encode_batch:
one forward pass per image with the CNN, each distinct text encoded once), with one difference a distributed writer needs: chunk ids do not come from a
database counter but from the image's ordinal in the job, ``ordinal * CHUNKS_PER_IMAGE +
index in its plan``, so every worker computes them alone and a retried job writes the same
ids again (Milvus upserts replace them; nothing is duplicated).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from kira.backends.milvus_writes import ChunkRecord
from kira.config import ChunkingConfig
from kira.knowledge_base.batch_encode import encode_batch
from kira.knowledge_base.chunker import LEVELS

log = logging.getLogger(__name__)

CHUNKS_PER_IMAGE = 1024  # id space per image: 1 document + max_regions + patch_grid**2 must fit


def chunk_id(ordinal: int, index: int) -> int:
    """The chunk id of the `index`-th chunk of the image with job ordinal `ordinal` (>= 0)."""
    if ordinal < 0 or not 0 <= index < CHUNKS_PER_IMAGE:
        raise ValueError(f"ordinal must be >= 0 and index in 0..{CHUNKS_PER_IMAGE - 1}; got {ordinal}, {index}")
    return ordinal * CHUNKS_PER_IMAGE + index + 1  # ids start at 1, as the SQLite store's


@dataclass
class ImageItem:
    """One decoded image to be stored."""

    ordinal: int  # its position in the job (fixes its chunk ids)
    doc_id: str
    pixels: np.ndarray = field(repr=False)  # uint8 (h, w, 3)
    caption: str | None = None
    tags: Sequence[str] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


def encode_images(stack: Any, items: Sequence[ImageItem], *, chunking: ChunkingConfig | None = None,
                  levels: Sequence[str] = LEVELS, caption_children: bool = False) -> list[ChunkRecord]:
    """Chunk, describe and encode `items` with the model `stack` (kira.models.load_default() or any
    ModelStack): every chunk of every image as a `ChunkRecord` with both vectors.

    chunking / levels / caption_children: as the knowledge base's config (defaults: its defaults).
    Raises ValueError for an image with more chunks than `CHUNKS_PER_IMAGE` or a bad level.
    """
    chunking = chunking or ChunkingConfig()
    batch = encode_batch(stack, [{"doc_id": i.doc_id, "pixels": i.pixels, "caption": i.caption, "tags": tuple(i.tags)}
                                 for i in items], chunking, levels, caption_children=caption_children)
    plans, texts, visual, text = batch.plans, batch.texts, batch.visual, batch.text
    for item, plan in zip(items, plans):
        if plan is not None and len(plan.chunks) > CHUNKS_PER_IMAGE:
            raise ValueError(f"{item.doc_id}: {len(plan.chunks)} chunks, over {CHUNKS_PER_IMAGE}; lower patch_grid")
    records, row = [], 0
    for item, plan in zip(items, plans):
        doc_chunk = chunk_id(item.ordinal, 0)
        for j, chunk in enumerate(plan.chunks):
            records.append(ChunkRecord(
                id=chunk_id(item.ordinal, j), doc_id=item.doc_id, doc_chunk=doc_chunk, level=chunk.level,
                parent=chunk_id(item.ordinal, chunk.parent) if chunk.parent is not None else -1,
                box=chunk.box, description=chunk.description or texts[row], tags=tuple(item.tags),
                metadata=dict(item.metadata), visual=visual[row], text=text[row]))
            row += 1
    return records
