"""Stage 2, query expansion: captioner hypotheses and the profile's concepts as extra text queries."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from kira.config import RetrievalConfig
from kira.models.stack import ModelStack
from kira.query_state import QueryVectors
from kira.retrieval.concepts import ConceptBank, top_concepts


def expand_query(
    stack: ModelStack, q: QueryVectors, image: np.ndarray | None, banks: Sequence[ConceptBank], config: RetrievalConfig
) -> list[tuple[str, np.ndarray, float]]:
    """Query expansion: captioner hypotheses + concept-bank concepts, de-duplicated and scored.

    Returns (text, unit text vector, cosine to the question) best first; texts equal to
    the question (case-insensitively) are dropped. Image-only queries get no expansions.
    """
    if q.text_vector is None or q.text_from_caption:
        return []  # expansions are scored against the question; a generated image caption is too weak a query
    candidates: list[str] = []
    captioner = getattr(stack, "captioner", None)
    if captioner is not None and config.expansion_hypotheses > 0:
        candidates += [h for h in captioner.hypotheses(image, q.question or q.text_query, config.expansion_hypotheses) if h]
    candidates += [c for c, _ in top_concepts(banks, stack.text, q.text_vector, config.expansion_concepts)]
    seen = {(q.text_query or "").strip().lower()}
    unique = []
    for text in candidates:
        key = " ".join(text.lower().split())
        if key and key not in seen:
            seen.add(key)
            unique.append(text.strip())
    if not unique:
        return []
    vectors = np.asarray(stack.text.encode(unique), dtype=np.float32)
    sims = vectors @ q.text_vector
    order = np.argsort(-sims, kind="stable")
    limit = config.expansion_hypotheses + config.expansion_concepts
    return [(unique[i], vectors[i], float(sims[i])) for i in order[:limit]]


__all__ = ["expand_query"]
