"""The numpy per-document fusion that kira.retrieval.fusion ran before the core's
`rrf_fuse(documents=...)` took it over: the reference the core is checked against.

The peer benchmarks/peers/compare_fusion_documents.py times the core against, and the reference
tests/core/test_core_rrf_documents.py and tests/pipeline/test_fusion_per_document.py check it
against; both import it by its full name, ``benchmarks.peers.fusion_reference``."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from kira import rrf_fuse


def numpy_per_document(rankings: Sequence[np.ndarray], weights: Sequence[float], k: float,
                       document_of: Callable[[np.ndarray], np.ndarray],
                       limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scores) best first, each document counted once per ranking, from two chunk-level fusions."""
    ids, chunk_scores = rrf_fuse(list(rankings), list(weights), k)
    ids = np.asarray(ids, np.int64)
    chunk_scores = np.asarray(chunk_scores, np.float64)
    docs = _documents(ids, document_of)
    doc_ids, doc_scores = rrf_fuse([_first_of_each(_documents(r, document_of)) for r in rankings], list(weights), k)
    doc_ids = np.asarray(doc_ids, np.int64)
    order = np.argsort(doc_ids)
    doc_score = np.asarray(doc_scores, np.float64)[order][np.searchsorted(doc_ids[order], docs)]
    unique, slot = np.unique(docs, return_inverse=True)
    best = np.zeros(len(unique), np.float64)
    np.maximum.at(best, slot, chunk_scores)
    share = np.divide(chunk_scores, best[slot], out=np.zeros_like(chunk_scores), where=best[slot] > 0)
    scores = doc_score * share
    keep = np.argsort(-scores, kind="stable")[:limit]  # ties keep chunk-level RRF order
    return ids[keep], scores[keep]


def _documents(ids: np.ndarray, document_of: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The document of each chunk id; an unknown chunk (-1) is a document of its own."""
    docs = np.asarray(document_of(ids), np.int64)
    return np.where(docs >= 0, docs, ids)


def _first_of_each(values: np.ndarray) -> np.ndarray:
    """`values` with repeats removed, in order of first appearance."""
    _, first = np.unique(values, return_index=True)
    return values[np.sort(first)]


def lookup(table: dict[int, int]) -> Callable[[np.ndarray], np.ndarray]:
    """document_of from a {chunk id: document id} table; ids not in it (padding included) map to -1."""
    return lambda ids: np.array([table.get(int(i), -1) for i in ids], dtype=np.int64)
