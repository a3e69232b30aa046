"""Images -> `ChunkRecord`s for the Milvus backend: chunk, describe and encode a batch, with stable ids.

This is the knowledge base's own batch path (kira.knowledge_base.batch_encode.encode_batch, through
kira.knowledge_base.milvus.kb_writes.encode_items), with one difference a distributed writer needs:
chunk ids do not come from a database counter but from the image's ordinal in the job,
``ordinal * CHUNKS_PER_IMAGE + index in its plan``, so every worker computes them alone and a
retried job writes the same ids again (Milvus upserts replace them; nothing is duplicated).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from kira.knowledge_base.milvus.writes import ChunkRecord
from kira.config import ChunkingConfig
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
    The chunks are `kira.knowledge_base.milvus.kb_writes.encode_items`'s (the Milvus knowledge base's
    own write path). Raises ValueError for an image with more chunks than `CHUNKS_PER_IMAGE` or a bad level.
    """
    from kira.knowledge_base.milvus.kb_writes import encode_items

    batch = encode_items(stack, [{"doc_id": i.doc_id, "pixels": i.pixels, "caption": i.caption, "tags": tuple(i.tags),
                                  "metadata": dict(i.metadata)} for i in items],
                         [i.ordinal for i in items], chunking=chunking or ChunkingConfig(), levels=levels,
                         caption_children=caption_children, thumbnails=False)
    return batch.records
