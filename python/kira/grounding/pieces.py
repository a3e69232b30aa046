"""Stored sentence vectors of evidence pieces: what the relevance judge and the verifier may reuse.

A knowledge base stores, at ingest, the sentence vector of every piece of a chunk's summary
(kira.text.pieces.summary_pieces). They are only this stack's vectors when its text encoder
built the knowledge base (`built_with_this_text_encoder`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.models.stack import ModelStack
from kira.reasoning.types import EvidenceItem
from kira.text.pieces import summary_pieces


def built_with_this_text_encoder(kb: KnowledgeBaseLike, models: ModelStack) -> bool:
    """Whether `models`' text encoder is the one that built `kb` (its recorded identity, or class name for a
    knowledge base that recorded none); True when the knowledge base records nothing. Vectors stored by
    another encoder are not this one's, whatever their length."""
    built_with = getattr(kb, "built_with", None)
    if built_with is None:
        return True
    built = built_with().get("text")  # one small meta read
    if not built:
        return True
    text = getattr(models, "text", None)
    mine = models.identity().get("text") if hasattr(models, "identity") else None
    return built in (mine, type(text).__name__)


def stored_piece_vectors(kb: KnowledgeBaseLike, items: Sequence[EvidenceItem], dim: int) -> dict[str, np.ndarray]:
    """{text: raw text vector} of the items' summary pieces (`summary_pieces`) that the knowledge base
    stored at ingest: what the verifier compares claims with, so that an ask encodes only its claims.
    Pieces it does not hold (a knowledge base built before it stored them; a summary that is not the
    chunk's description) are absent, and the verifier encodes them."""
    if not items:
        return {}
    keys = [(item.doc_id, piece) for item in items for piece in summary_pieces(item.summary)]
    return {text: vector for (_, text), vector in kb.piece_vectors(keys, dim).items()}


__all__ = ["built_with_this_text_encoder", "stored_piece_vectors"]
