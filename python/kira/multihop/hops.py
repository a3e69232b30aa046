"""Stage 3, residual multi-hop retrieval, through the core.

`residual_hop_rankings`: residual hops (kira._core.residual_hops, or kira.backends.hops on
another backend's index) on the visual index from the primary visual query
(q' = normalize(q - beta * mean(hop results)); stops at confidence >= 0.85, 3 hops, or a hop
with nothing new). Hops after the first become rankings "hop2", "hop3" for fusion (the first
equals the plain visual search).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kira.config import KiraConfig
from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.query_state import HopNote, Ranking, RetrievalPath


@dataclass
class HopResult:
    """What the hops did, for fusion and the rationale card."""

    rankings: list[Ranking] = field(default_factory=list)
    hops: list[HopNote] = field(default_factory=list)
    stop_reason: str | None = None


def residual_hop_rankings(kb: KnowledgeBaseLike, query: np.ndarray, config: KiraConfig,
                          allow: np.ndarray | None) -> HopResult:
    """Run residual hops from `query` (unit, visual index space): the core's on its own indexes,
    `kira.backends.hops` on another backend's (a Milvus collection)."""
    from kira.backends.hops import hops_for

    index = kb.index("visual")
    if index is None or len(index) == 0:
        return HopResult()
    k = min(config.retrieval.candidates, len(index))
    trace = hops_for(index)(  # the core's for its own indexes, kira.backends.hops' for any other
        index, np.ascontiguousarray(query, dtype=np.float32), k,
        beta=config.hops.beta, max_hops=config.hops.max_hops, confidence=config.hops.confidence, allow=allow,
        ef=config.retrieval.search_ef,
    )
    out = HopResult(stop_reason=str(trace.stop_reason))
    for n, hop in enumerate(trace.hops, start=1):
        ids = np.asarray(hop.ids, dtype=np.int64)
        scores = np.asarray(hop.scores, dtype=np.float32)
        keep = ids >= 0
        ids, scores = ids[keep], scores[keep]
        out.hops.append({"hop": n, "ids": ids[:10].tolist(), "confidence": float(hop.confidence),
                         "new": int(getattr(hop, "new_ids", len(ids)))})
        if n >= 2:
            weight = config.retrieval.visual_weight * config.retrieval.hop_weight_scale
            out.rankings.append(Ranking(RetrievalPath.HOP, ids, scores, weight, f"residual hop {n}", hop=n))
    return out


__all__ = ["HopResult", "residual_hop_rankings"]
