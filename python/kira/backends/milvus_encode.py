"""Images -> `ChunkRecord`s for the Milvus backend: chunk, describe and encode a batch, with stable ids.

This is the knowledge base's own batch path (kira.knowledge_base.chunker's `plan_image` and
`describe`, one encoder call per space per `ENCODE_BATCH` items, each distinct text encoded
once), with one difference a distributed writer needs: chunk ids do not come from a
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
from kira.knowledge_base.chunker import LEVELS, describe, plan_image

log = logging.getLogger(__name__)

CHUNKS_PER_IMAGE = 1024  # id space per image: 1 document + max_regions + patch_grid**2 must fit
ENCODE_BATCH = 64  # crops / texts per encoder call (as the knowledge base's ingest)


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


def _encode(encoder: Any, items: Sequence[Any]) -> np.ndarray:
    parts = [np.asarray(encoder.encode(list(items[i:i + ENCODE_BATCH])), dtype=np.float32)
             for i in range(0, len(items), ENCODE_BATCH)]
    return np.concatenate(parts, axis=0) if parts else np.zeros((0, encoder.dim), np.float32)


def _encode_texts(encoder: Any, texts: Sequence[str]) -> np.ndarray:
    unique = list(dict.fromkeys(texts))
    vectors = _encode(encoder, unique)
    row = {t: i for i, t in enumerate(unique)}
    return vectors[[row[t] for t in texts]] if texts else vectors


def encode_images(stack: Any, items: Sequence[ImageItem], *, chunking: ChunkingConfig | None = None,
                  levels: Sequence[str] = LEVELS, caption_children: bool = False) -> list[ChunkRecord]:
    """Chunk, describe and encode `items` with the model `stack` (kira.models.load_default() or any
    ModelStack): every chunk of every image as a `ChunkRecord` with both vectors.

    chunking / levels / caption_children: as the knowledge base's config (defaults: its defaults).
    Raises ValueError for an image with more chunks than `CHUNKS_PER_IMAGE` or a bad level.
    """
    chunking = chunking or ChunkingConfig()
    plans, crops, texts = [], [], []
    for item in items:
        plan = plan_image(item.pixels, getattr(stack, "regions", None), chunking, levels)
        if len(plan.chunks) > CHUNKS_PER_IMAGE:
            raise ValueError(f"{item.doc_id}: {len(plan.chunks)} chunks, over {CHUNKS_PER_IMAGE}; lower patch_grid")
        describe(plan, item.caption, item.tags, getattr(stack, "captioner", None), caption_children=caption_children)
        plans.append(plan)
        crops += plan.crops()
        texts += [c.embed_text or c.description or item.doc_id for c in plan.chunks]
    visual = _encode(stack.image, crops)
    text = _encode_texts(stack.text, texts)
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
