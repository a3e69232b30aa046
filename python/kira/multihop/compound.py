"""Stage 3, compound documents, through the core.

`expand_groups`: kira._core.expand_compound with the knowledge base's temporal and
multiview groups; a retrieved chunk stands for its document, and the other members
of that document's groups come in at 0.8x (temporal) / 0.7x (multiview) its score.
"""

from __future__ import annotations

import numpy as np

from kira.config import KiraConfig
from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.query_state import Fused, RetrievalPath


def expand_groups(kb: KnowledgeBaseLike, fused: Fused, config: KiraConfig, allow: np.ndarray | None = None) -> int:
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
        fused.paths.setdefault(cid, []).append(kinds.get((src, cid), str(RetrievalPath.TEMPORAL)))
    if new_ids:
        all_ids = np.concatenate([fused.ids, np.array(new_ids, dtype=np.int64)])
        all_scores = np.concatenate([fused.scores, np.array(new_scores, dtype=np.float32)])
        order2 = np.lexsort((all_ids, -all_scores))
        fused.ids, fused.scores = all_ids[order2], all_scores[order2]
    return len(new_ids)


__all__ = ["expand_groups"]
