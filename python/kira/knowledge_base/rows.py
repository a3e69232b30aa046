"""The rows a knowledge base answers reads with, whichever backend stores them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_DESCRIPTION_CHARS = 8192
"""A chunk description longer than this is cut when stored: a 10 MB caption made every ask
that retrieved it take 40 s and 3.5 GB (tokenised, verified and quoted whole)."""


@dataclass(frozen=True)
class ChunkRow:
    """One stored chunk (vectors not included; fetch them with `Store.vectors`)."""

    id: int
    doc_id: str
    level: str
    parent_id: int | None
    box: tuple[int, int, int, int] | None
    description: str


@dataclass(frozen=True)
class DocumentRow:
    """One stored document."""

    doc_id: str
    source: str | None
    caption: str | None
    width: int
    height: int
    metadata: dict[str, Any]
    tags: tuple[str, ...]


__all__ = ["ChunkRow", "DocumentRow", "MAX_DESCRIPTION_CHARS"]
