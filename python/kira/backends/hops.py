"""Residual hops over any `kira.backends.VectorIndex` (a Milvus collection), as the core runs them.

The core's `kira._core.residual_hops` takes only its own indexes; this is the same
algorithm (cpp/src/residual_hops.cpp) over an index's ``search`` and ``get_vectors``, so a
knowledge base on another backend hops the same way: search with the unit query q; stop at
confidence (mean score) >= `confidence`, at a hop with nothing new, or after `max_hops`;
else q <- normalize(q - beta * mean(unit vectors of the hop's results)). The hops run in the
kira process over what the backend's searches return.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kira.backends.protocols import search_options


@dataclass
class Hop:
    """One hop: its valid results best first, their scores, mean score, unit query and new ids."""

    ids: np.ndarray
    scores: np.ndarray
    confidence: float
    query: np.ndarray
    new_ids: int


@dataclass
class HopTrace:
    """The hops, why they stopped, and the merged results (best score per id, score desc, ties smaller id)."""

    hops: list[Hop] = field(default_factory=list)
    stop_reason: str = ""
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    first_hop: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))


def residual_hops(index: Any, query: np.ndarray, k: int, *, beta: float = 0.3, max_hops: int = 3,
                  confidence: float = 0.85, allow: np.ndarray | None = None, ef: int | None = None) -> HopTrace:
    """Residual hops from `query` on `index` (module docstring). ValueError for k < 1, max_hops < 1, a
    negative or non-finite beta, a NaN confidence, or a zero / non-finite query."""
    if k < 1 or max_hops < 1:
        raise ValueError(f"k and max_hops must be >= 1; got {k}, {max_hops}")
    if not np.isfinite(beta) or beta < 0:
        raise ValueError("beta must be finite and >= 0 (the paper uses 0.3)")
    if np.isnan(confidence):
        raise ValueError("confidence must be a number (the paper uses 0.85)")
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(q)):
        raise ValueError("query has a NaN or inf; pass a finite vector")
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        raise ValueError("query is the zero vector; pass a non-zero query")
    q = (q / norm).astype(np.float32)
    trace = HopTrace()
    best: dict[int, tuple[float, int]] = {}  # id -> (best score, first hop)
    extra = search_options(index, ef=ef)
    for h in range(max_hops):
        ids, scores = index.search(q[None, :], k, allow=allow, **extra)
        keep = ids[0] >= 0
        hop_ids, hop_scores = ids[0][keep].astype(np.int64), scores[0][keep].astype(np.float32)
        new = 0
        for i, s in zip(hop_ids.tolist(), hop_scores.tolist()):
            if i not in best:
                best[i], new = (s, h), new + 1
            elif s > best[i][0]:
                best[i] = (s, best[i][1])
        found = len(hop_ids)
        conf = float(np.float32(np.sum(hop_scores, dtype=np.float64) / found)) if found else 0.0
        trace.hops.append(Hop(hop_ids, hop_scores, conf, q.copy(), new))
        if found and conf >= confidence:
            trace.stop_reason = "confidence"
            break
        if new == 0:
            trace.stop_reason = "no_new"
            break
        if h + 1 == max_hops:
            trace.stop_reason = "max_hops"
            break
        mean = np.asarray(index.get_vectors(hop_ids), dtype=np.float64).sum(axis=0)
        q64 = q.astype(np.float64) - (beta / found) * mean
        q32 = q64.astype(np.float32)
        n = float(np.linalg.norm(q32.astype(np.float64)))
        if n <= 1e-6:
            trace.stop_reason = "zero_residual"
            break
        q = (q32.astype(np.float64) / n).astype(np.float32)
    order = sorted(best, key=lambda i: (-best[i][0], i))
    trace.ids = np.array(order, dtype=np.int64)
    trace.scores = np.array([best[i][0] for i in order], dtype=np.float32)
    trace.first_hop = np.array([best[i][1] for i in order], dtype=np.int32)
    return trace


def hops_for(index: Any) -> Any:
    """The residual-hop routine for `index`: the core's `residual_hops` (one C++ call) for the core's
    own indexes, this module's `residual_hops` (same algorithm, same arguments, same trace fields)
    for any other `kira.backends.VectorIndex`, such as a Milvus collection's."""
    from kira import _core

    return _core.residual_hops if isinstance(index, _core.CosineIndex) else residual_hops

