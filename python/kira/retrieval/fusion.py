"""Stage 2, fusion: weighted RRF over every ranking, and the cross-encoder re-rank.

Every search result list is one ranking for the core's weighted `rrf_fuse`: visual rankings
carry alpha = 0.6, text rankings 1 - alpha = 0.4, expansions 0.4 x their similarity to the
question x 0.5, hop and fine-grained rankings as their path says. What leads the fused list
whatever RRF says (named documents, a clearly shown document) is kira.retrieval.anchoring's.

Given which document each chunk belongs to, a document counts once per ranking, at the rank of
its best chunk among that ranking's documents:

    S(D) = sum_r  w_r / (k + rank of D among the documents of ranking r)
    s'(c) = S(doc(c)) x s(c) / max over the chunks c' of doc(c) of s(c')     (s: chunk-level RRF)

Rankings differ in what they list: the query crop's (fine-grained) lists regions and patches
only, the image's every level. Fused chunk by chunk, each region of another image collects a
vote its document chunk cannot, and a document with many parts near the query takes many places
of one ranking, pushing the documents after it down; so the image a query is a brighter copy of
(its document chunk first on the image's ranking) fell behind the regions of others. Counted
per document, each ranking votes once for each image; a document's chunks share its score in
proportion to their own, so its best chunk carries it and its others follow.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from kira import _core
from kira.config import RetrievalConfig
from kira.models.stack import ModelStack
from kira.query_state import Fused, Ranking, RetrievalPath


def fuse(rankings: Sequence[Ranking], config: RetrievalConfig,
         document_of: Callable[[np.ndarray], np.ndarray] | None = None) -> Fused:
    """Weighted RRF over every ranking (kira._core.rrf_fuse, k = config.rrf_k), scores scaled to top = 1.

    document_of: each chunk id's document (e.g. `KnowledgeBase.document_chunk_of`; -1: a chunk of its own);
    then a document counts once per ranking (module docstring). None: chunk by chunk.
    """
    rankings = [r for r in rankings if len(r.ids) and r.weight > 0]
    if not rankings:
        return Fused(np.zeros(0, np.int64), np.zeros(0, np.float32), {}, {})
    weights = [r.weight for r in rankings]
    if document_of is None:
        ids, scores = _core.rrf_fuse([r.ids for r in rankings], weights, config.rrf_k, limit=config.candidates)
    else:
        ids, scores = _per_document(rankings, weights, config, document_of)
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


def _per_document(rankings: Sequence[Ranking], weights: list[float], config: RetrievalConfig,
                  document_of: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scores) of the fused chunks, best first, with each document counted once per ranking."""
    ids, chunk_scores = _core.rrf_fuse([r.ids for r in rankings], weights, config.rrf_k)
    ids = np.asarray(ids, np.int64)
    chunk_scores = np.asarray(chunk_scores, np.float64)
    docs = _documents(ids, document_of)
    doc_ids, doc_scores = _core.rrf_fuse([_first_of_each(_documents(r.ids, document_of)) for r in rankings],
                                         weights, config.rrf_k)
    doc_ids = np.asarray(doc_ids, np.int64)
    order = np.argsort(doc_ids)
    doc_score = np.asarray(doc_scores, np.float64)[order][np.searchsorted(doc_ids[order], docs)]
    unique, slot = np.unique(docs, return_inverse=True)
    best = np.zeros(len(unique), np.float64)
    np.maximum.at(best, slot, chunk_scores)
    share = np.divide(chunk_scores, best[slot], out=np.zeros_like(chunk_scores), where=best[slot] > 0)
    scores = doc_score * share
    keep = np.argsort(-scores, kind="stable")[: config.candidates]  # ties keep chunk-level RRF order
    return ids[keep], scores[keep]


def _documents(ids: np.ndarray, document_of: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The document of each chunk id; an unknown chunk (-1) is a document of its own."""
    docs = np.asarray(document_of(ids), np.int64)
    return np.where(docs >= 0, docs, ids)


def _first_of_each(values: np.ndarray) -> np.ndarray:
    """`values` with repeats removed, in order of first appearance."""
    _, first = np.unique(values, return_index=True)
    return values[np.sort(first)]


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
