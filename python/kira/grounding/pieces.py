"""Stored sentence vectors of evidence pieces: what the relevance judge and the verifier may reuse.

A knowledge base stores, at ingest, the sentence vector of every piece of a chunk's summary
(kira.text.pieces.summary_pieces). They are only this stack's vectors when its text encoder
built the knowledge base (`built_with_this_text_encoder`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

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


def _piece_keys(items: Sequence[EvidenceItem]) -> list[tuple[str, str]]:
    return [(item.doc_id, piece) for item in items for piece in summary_pieces(item.summary)]


def _shown_keys(items: Sequence[EvidenceItem]) -> list[tuple[str, str]]:
    from kira.reasoning.shown import shows_text

    return [(item.doc_id, text) for item in items if (text := shows_text(item))]


def _read(kb: KnowledgeBaseLike, keys: list[tuple[str, str]], dim: int) -> dict[str, np.ndarray]:
    keys = list(dict.fromkeys(keys))
    return {text: vector for (_, text), vector in kb.piece_vectors(keys, dim).items()} if keys else {}


def stored_piece_vectors(kb: KnowledgeBaseLike, items: Sequence[EvidenceItem], dim: int) -> dict[str, np.ndarray]:
    """{text: raw text vector} of the items' summary pieces (`summary_pieces`) that the knowledge base
    stored at ingest: what the verifier compares claims with, so that an ask encodes only its claims.
    Pieces it does not hold (a knowledge base built before it stored them; a summary that is not the
    chunk's description) are absent, and the verifier encodes them."""
    return _read(kb, _piece_keys(items), dim)


def stored_shown_vectors(kb: KnowledgeBaseLike, items: Sequence[EvidenceItem], dim: int) -> dict[str, np.ndarray]:
    """{text: raw text vector} of what the items show (kira.reasoning.shown: caption, tags, labels, text read,
    metadata as one text) where ingest stored it as a piece (kira.knowledge_base.pieces.shown_piece): what the
    critic and the relevance judge compare a question with. Absent where not stored (a knowledge base built
    before; metadata whose text changed in storage); the caller encodes those."""
    return _read(kb, _shown_keys(items), dim)


def shown_rows(items: Sequence[EvidenceItem], vectors: Mapping[str, np.ndarray], dim: int) -> np.ndarray:
    """One unit row per item: the vector of what it shows from `vectors` ({text: raw vector}), zeros where
    absent (the critic's ``item_vectors``: it encodes those)."""
    from kira.reasoning.shown import shows_text

    rows = np.zeros((len(items), dim), np.float32)
    for n, item in enumerate(items):
        vector = vectors.get(shows_text(item))
        if vector is not None:
            rows[n] = np.asarray(vector, np.float32) / max(float(np.linalg.norm(vector)), 1e-12)
    return rows


def stored_vectors(kb: KnowledgeBaseLike, items: Sequence[EvidenceItem], dim: int) -> dict[str, np.ndarray]:
    """`stored_piece_vectors` and `stored_shown_vectors` together, in one read of the store."""
    return _read(kb, _piece_keys(items) + _shown_keys(items), dim)


__all__ = ["built_with_this_text_encoder", "shown_rows", "stored_piece_vectors", "stored_shown_vectors", "stored_vectors"]
