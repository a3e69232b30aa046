"""Stage 2, the retrieval paths: every search of the visual and the text index, and BM25.

Path A (visual index) is queried with the query image's embedding and/or the question
embedded into image space (the stack's `image_text` encoder, CLIP's text tower; else
the knowledge base's fitted TextToImageBridge, weighed by its measured held-out skill and left
out when it has none: kira.models.bridge). Path B (text index, chunk
descriptions) is queried with the sentence embedding of the question (or, for an
image-only query, of the captioner's description of the image) and of the expansions,
and with BM25 over document texts (`lexical_rankings`; kira.knowledge_base.lexical).
How the rankings of an image query meet, and feedback, live in kira.retrieval.anchoring.
Every search result list is one ranking for the core's weighted `rrf_fuse`: visual
rankings carry alpha = 0.6, text rankings 1 - alpha = 0.4, expansions 0.4 x their
similarity to the question x 0.5, hop and fine-grained rankings as their path says
(kira.retrieval.fusion).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from kira.backends.protocols import VectorIndex, search_options
from kira.config import RetrievalConfig
from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.query_state import QueryVectors, Ranking, RetrievalPath


def search(
    index: VectorIndex | None, queries: np.ndarray, k: int, allow: np.ndarray | None, groups: Any = None,
    per_group: int = 1,
    *, ef: int | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Search `index` (a `kira.backends.VectorIndex`) with (m, dim) queries; per query (ids, scores) with
    padding removed.

    groups: a `kira._core.GroupMap`; then at most `per_group` results of one group.
    ef: an HNSW index's candidate list for this call (`RetrievalConfig.search_ef`); None
    keeps the index's own ef_search, and an exact index takes none.
    """
    if index is None or len(index) == 0 or k <= 0:
        return [(np.zeros(0, np.int64), np.zeros(0, np.float32)) for _ in range(len(queries))]
    k = min(k, len(index))
    extra = search_options(index, ef=ef)
    ids, scores = index.search(np.ascontiguousarray(queries, dtype=np.float32), k, allow=allow, groups=groups,
                               per_group=per_group, **extra)
    out = []
    for row_ids, row_scores in zip(np.atleast_2d(ids), np.atleast_2d(scores)):
        keep = row_ids >= 0
        out.append((row_ids[keep].astype(np.int64), row_scores[keep].astype(np.float32)))
    return out


def visual_search(kb: KnowledgeBaseLike, q: QueryVectors, config: RetrievalConfig,
                  allow: np.ndarray | None) -> tuple[Ranking | None, Ranking | None]:
    """Path A: (the image embedding's ranking, the question-in-image-space ranking) against the visual
    index; None for a side the query does not have."""
    # A question mapped by the fitted ridge bridge is weaker evidence than an image or a CLIP text tower, and
    # counts only as far as the bridge ranks held-out captioned images of this knowledge base (its skill).
    bridge = 1.0
    if q.text_in_image_from_bridge:
        bridge = config.bridge_weight_scale * (1.0 if q.bridge_skill is None else q.bridge_skill)
    sides = [(q.image_vector, "image", config.visual_weight), (q.text_in_image, q.question, config.visual_weight * bridge)]
    present = [(vector, name, weight) for vector, name, weight in sides if vector is not None]
    if not present:
        return None, None
    results = iter(search(kb.index("visual"), np.stack([v for v, _, _ in present]), config.candidates, allow,
                          ef=config.search_ef))
    found = [Ranking(RetrievalPath.VISUAL, *next(results), weight, name) if vector is not None else None
             for vector, name, weight in sides]
    return found[0], found[1]


def visual_rankings(kb: KnowledgeBaseLike, q: QueryVectors, config: RetrievalConfig,
                    allow: np.ndarray | None) -> list[Ranking]:
    """Path A's rankings (`visual_search`) as a list: the image's first, then the question's."""
    return [r for r in visual_search(kb, q, config, allow) if r is not None]


def text_rankings(
    kb: KnowledgeBaseLike, q: QueryVectors, expansions: Sequence[tuple[str, np.ndarray, float]], config: RetrievalConfig,
    allow: np.ndarray | None,
) -> list[Ranking]:
    """Path B: the question (and each expansion) against the description index, in one search call."""
    queries: list[np.ndarray] = []
    meta: list[tuple[RetrievalPath, float, str]] = []
    if q.text_vector is not None:
        queries.append(q.text_vector)
        # A generated description of the query image is weaker evidence than a question.
        meta.append((RetrievalPath.TEXT, config.text_weight * (config.caption_query_weight_scale if q.text_from_caption else 1.0), q.text_query))
    for text, vector, sim in expansions:
        queries.append(vector)
        meta.append((RetrievalPath.EXPANSION, config.text_weight * config.expansion_weight_scale * max(sim, 0.0), text))
    if not queries:
        return []
    # Region and patch chunks repeat their document's caption, so one document could fill a
    # whole result list; the search keeps at most `text_chunks_per_document` of each document.
    results = search(kb.index("text"), np.stack(queries), config.candidates, allow, kb.document_groups(),
                     config.text_chunks_per_document, ef=config.search_ef)
    return [Ranking(path, ids, scores, w, text) for (ids, scores), (path, w, text) in zip(results, meta)]


def lexical_rankings(kb: KnowledgeBaseLike, q: QueryVectors, config: RetrievalConfig, allow: np.ndarray | None) -> list[Ranking]:
    """Path B's lexical half: BM25 of the question over document texts (`KnowledgeBase.lexical`)."""
    if not q.question or config.lexical_weight_scale <= 0:
        return []
    hits = kb.lexical().search(q.question, config.candidates, allow=allow)
    if not len(hits.ids):
        return []
    return [Ranking(RetrievalPath.LEXICAL, hits.ids, hits.scores, config.text_weight * config.lexical_weight_scale, q.question,
                    cosine=False)]


__all__ = ["lexical_rankings", "search", "text_rankings", "visual_rankings", "visual_search"]
