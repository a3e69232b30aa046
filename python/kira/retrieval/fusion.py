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
    then a document counts once per ranking (module docstring; the core's `rrf_fuse(documents=...)`).
    None: chunk by chunk.
    """
    rankings = [r for r in rankings if len(r.ids) and r.weight > 0]
    if not rankings:
        return Fused(np.zeros(0, np.int64), np.zeros(0, np.float32), {}, {})
    weights = [r.weight for r in rankings]
    documents = None if document_of is None else _documents(rankings, document_of)
    ids, scores = _core.rrf_fuse([r.ids for r in rankings], weights, config.rrf_k, limit=config.candidates,
                                 documents=documents)
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


def _documents(rankings: Sequence[Ranking], document_of: Callable[[np.ndarray], np.ndarray]) -> list[np.ndarray]:
    """Each ranking's document ids, parallel to its ids (one `document_of` call for all of them)."""
    ids = np.concatenate([r.ids for r in rankings])
    docs = np.ascontiguousarray(document_of(ids), dtype=np.int64)
    if docs.shape != ids.shape:
        raise ValueError(f"document_of returned shape {docs.shape} for {len(ids)} chunk ids; "
                         "it must return one document id (or -1) per chunk id")
    return np.split(docs, np.cumsum([len(r.ids) for r in rankings])[:-1])


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
