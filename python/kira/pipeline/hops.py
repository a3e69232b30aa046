"""Stage 3, multi-hop retrieval and compound documents, through the core.

* `residual_hop_rankings`: residual hops (kira._core.residual_hops, or kira.backends.hops on
  another backend's index) on the visual index from the
  primary visual query (q' = normalize(q - beta * mean(hop results)); stops at
  confidence >= 0.85, 3 hops, or a hop with nothing new). Hops after the first become
  rankings "hop2", "hop3" for fusion (the first equals the plain visual search).
* `expand_groups`: kira._core.expand_compound with the knowledge base's temporal and
  multiview groups; a retrieved chunk stands for its document, and the other members
  of that document's groups come in at 0.8x (temporal) / 0.7x (multiview) its score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kira.config import KiraConfig
from kira.pipeline.query import Fused, Ranking


@dataclass
class HopResult:
    """What the hops did, for fusion and the rationale card."""

    rankings: list[Ranking] = field(default_factory=list)
    hops: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None


def residual_hop_rankings(kb: Any, query: np.ndarray, config: KiraConfig, allow: np.ndarray | None) -> HopResult:
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
            out.rankings.append(Ranking(f"hop{n}", ids, scores, config.retrieval.visual_weight * config.retrieval.hop_weight_scale, f"residual hop {n}"))
    return out


def expand_groups(kb: Any, fused: Fused, config: KiraConfig, allow: np.ndarray | None = None) -> int:
    """Append compound-group members of the fused documents to `fused` (in place); returns how many.

    `allow` (sorted chunk ids, None: all) is the query's filter (levels, metadata, tags, documents):
    a group member outside it stays out, as every search already keeps it out.
    """
    from kira import _core

    if not len(fused.ids):
        return 0
    best: dict[int, float] = {}
    for d, score in zip(kb.document_chunk_of(fused.ids).tolist(), fused.scores.tolist()):
        if d >= 0:
            best[d] = max(best.get(d, 0.0), score)
    if not best:
        return 0
    compounds = kb.compounds_for(chunk_ids=best)  # the groups these documents are in (fetched per hit on Milvus)
    groups, kinds = compounds.core, compounds.kinds
    if len(groups) == 0:
        return 0
    order = sorted(best, key=lambda d: (-best[d], d))
    ids, scores, origin = _core.expand_compound(
        groups, np.array(order, dtype=np.int64), np.array([best[d] for d in order], dtype=np.float32),
        temporal_decay=config.hops.temporal_decay, multiview_decay=config.hops.multiview_decay,
    )
    present = set(fused.ids.tolist())
    inside = np.isin(ids, allow) if allow is not None else np.ones(len(ids), bool)
    new_ids, new_scores = [], []
    for cid, score, src, ok in zip(ids.tolist(), scores.tolist(), origin.tolist(), inside.tolist()):
        if cid == src or cid in present or not ok:
            continue
        new_ids.append(cid)
        new_scores.append(score)
        fused.paths.setdefault(cid, []).append(kinds.get((src, cid), "temporal"))
    if new_ids:
        all_ids = np.concatenate([fused.ids, np.array(new_ids, dtype=np.int64)])
        all_scores = np.concatenate([fused.scores, np.array(new_scores, dtype=np.float32)])
        order2 = np.lexsort((all_ids, -all_scores))
        fused.ids, fused.scores = all_ids[order2], all_scores[order2]
    return len(new_ids)
