"""Stage 2, fusion: weighted RRF over every ranking, and the cross-encoder re-rank.

Every search result list is one ranking for the core's weighted `rrf_fuse`: visual rankings
carry alpha = 0.6, text rankings 1 - alpha = 0.4, expansions 0.4 x their similarity to the
question x 0.5, hop and fine-grained rankings as their path says. What leads the fused list
whatever RRF says (named documents, a clearly shown document) is kira.retrieval.anchoring's.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from kira import _core
from kira.config import RetrievalConfig
from kira.models.stack import ModelStack
from kira.query_state import Fused, Ranking, RetrievalPath


def fuse(rankings: Sequence[Ranking], config: RetrievalConfig) -> Fused:
    """Weighted RRF over every ranking (kira._core.rrf_fuse, k = config.rrf_k), scores scaled to top = 1."""
    rankings = [r for r in rankings if len(r.ids) and r.weight > 0]
    if not rankings:
        return Fused(np.zeros(0, np.int64), np.zeros(0, np.float32), {}, {})
    ids, scores = _core.rrf_fuse([r.ids for r in rankings], [r.weight for r in rankings], config.rrf_k,
                                 limit=config.candidates)
    ids = np.asarray(ids, np.int64)
    # Paths and best cosine of the fused ids only (the rankings hold several times as many).
    paths: dict[int, list[str]] = {i: [] for i in ids.tolist()}
    cosine: dict[int, float] = {}
    fused_sorted = np.sort(ids)
    for r in rankings:
        hit = fused_sorted[np.minimum(np.searchsorted(fused_sorted, r.ids), len(ids) - 1)] == r.ids
        for i, s in zip(r.ids[hit].tolist(), r.scores[hit].tolist()):
            if r.label not in paths[i]:
                paths[i].append(r.label)
            if r.cosine:
                cosine[i] = max(cosine.get(i, -1.0), s)
    scores = np.asarray(scores, dtype=np.float64)
    top = float(scores[0]) if len(scores) and scores[0] > 0 else 1.0
    return Fused(ids, (scores / top).astype(np.float32), paths, cosine)


def rerank(stack: ModelStack, question: str, fused: Fused, descriptions: dict[int, str], config: RetrievalConfig, n: int) -> bool:
    """Blend the top `n` fused scores with the cross-encoder's: 0.4 * fused + 0.6 * cross (in place).

    Cross-encoder scores outside [0, 1] are squashed with a sigmoid. Returns whether it ran.
    """
    reranker = getattr(stack, "reranker", None)
    if reranker is None or not question or not len(fused.ids):
        return False
    head = fused.ids[:n]
    cross = np.asarray(reranker.score(question, [descriptions.get(int(i), "") for i in head]), dtype=np.float64)
    if cross.size and (cross.min() < 0 or cross.max() > 1):
        cross = 1.0 / (1.0 + np.exp(-cross))
    blended = config.rerank_original_weight * fused.scores[: len(head)] + config.rerank_cross_weight * cross
    order = np.argsort(-blended, kind="stable")
    fused.ids[: len(head)] = head[order]
    fused.scores[: len(head)] = blended[order].astype(np.float32)
    for i in fused.ids[: len(head)].tolist():
        fused.paths.setdefault(int(i), []).append(str(RetrievalPath.RERANK))
    return True


__all__ = ["fuse", "rerank"]
