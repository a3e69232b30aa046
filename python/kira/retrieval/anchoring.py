"""How the question's rankings and the image's ranking meet, and pseudo-relevance feedback.

* `anchor_to_image`: when a query carries an image, the image is the subject and the
  question says what to answer about it. "What is the most likely fault in this
  photo?" matches every photo's caption equally, so its rankings, fused as
  independent lists, only dilute the image's. Here each question-derived ranking keeps
  only the documents among the image's `anchor_documents` nearest and, when
  `anchor_by_specificity`, its weight is scaled by the question's max-idf specificity
  in this knowledge base (`LexicalIndex.specificity`): words no document uses weigh
  nothing, an identifier held by one document weighs fully.
* `lead_with_named`: a question that names documents by identifier (kira.pipeline.question)
  is about them: they move to the front of the fused list, in fused order.
* `clear_visual_match`: the document a query image clearly shows (a copy, crop or mirror of
  a stored image) leads the fused list too.
* `feedback_ranking`: pseudo-relevance feedback across modalities (average query
  expansion, Chum et al. 2007): the mean visual vector of the top `feedback_documents`
  documents the query is surest about (those named by identifier when the question
  names any; else the BM25 `lexical` ranking's matches scoring >= `feedback_min_score`
  of its best; else the fused list's top) re-queries the visual index, so documents whose captions say nothing
  are found through their look-alikes among those whose captions matched. A mean of named
  documents is the subject itself and weighs `named_feedback_weight_scale` (4) times more:
  what fills the places after a named subject's documents should look like that subject's.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from kira.config import RetrievalConfig
from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.query_state import Fused, Ranking, RetrievalPath
from kira.retrieval.search import search


def anchor_to_image(kb: KnowledgeBaseLike, image: Ranking, rankings: Sequence[Ranking], scale: float,
                    config: RetrievalConfig) -> list[Ranking]:
    """`rankings` restricted to the documents of `image`'s top `anchor_documents`, weights x `scale`."""
    docs = kb.document_chunk_of(image.ids)
    seen: list[int] = []
    for d in docs.tolist():
        if d >= 0 and d not in seen:
            seen.append(d)
            if len(seen) >= config.anchor_documents:
                break
    allowed = np.array(seen, dtype=np.int64)
    return [r.restricted(np.isin(kb.document_chunk_of(r.ids), allowed), scale) for r in rankings]


def clear_visual_match(kb: KnowledgeBaseLike, image: Ranking, config: RetrievalConfig) -> np.ndarray:
    """The chunks (in `image`'s order) of the document the query image clearly shows, or an empty array.

    RRF fuses ranks, not scores: a stored copy of the query image ranks first on the visual
    path by a wide cosine margin, yet a document second there and first on the paths derived
    from the same image (its generated description, a crop, a hop) outscores it. So the
    image's nearest document leads when its best cosine beats the runner-up document's by at
    least `clear_match_margin` x the spread of the image's `anchor_documents` nearest
    (best minus the last of them): then the image itself says which document it shows.
    """
    if config.clear_match_margin <= 0 or not len(image.ids):
        return np.zeros(0, np.int64)
    docs = kb.document_chunk_of(image.ids)
    best: dict[int, float] = {}
    for d, s in zip(docs.tolist(), image.scores.tolist()):
        if d >= 0 and d not in best:
            best[d] = float(s)  # the ranking is best first: the first score of a document is its best
    if len(best) < 2:
        return image.ids[docs == next(iter(best))] if best else np.zeros(0, np.int64)
    scores = list(best.values())[: max(config.anchor_documents, 2)]
    spread = scores[0] - scores[-1]
    if spread <= 0 or scores[0] - scores[1] < config.clear_match_margin * spread:
        return np.zeros(0, np.int64)
    anchored: np.ndarray = image.ids[docs == next(iter(best))]
    return anchored


def lead_with_named(fused: Fused, named: np.ndarray, path: RetrievalPath = RetrievalPath.IDENTIFIER) -> Fused:
    """A copy of `fused` with the chunks of the documents the question names (`QuestionFacts.named_chunks`)
    first, in fused order; named chunks missing from `fused` join with the top score. Leading chunks
    keep their order but score at least every chunk behind them; they carry `path` and are recorded as
    what `path` led with (`Fused.led_by`)."""
    if not len(named):
        return fused
    present = np.isin(fused.ids, named)
    missing = named[~np.isin(named, fused.ids)]
    top = float(fused.scores[0]) if len(fused.scores) else 1.0
    lead_ids = np.concatenate([fused.ids[present], missing])
    lead_scores = np.concatenate([fused.scores[present], np.full(len(missing), top, np.float32)])
    floor = float(fused.scores[~present].max()) if (~present).any() else 0.0
    lead_scores = np.maximum(lead_scores, floor).astype(np.float32)
    paths = {cid: list(p) for cid, p in fused.paths.items()}
    for cid in lead_ids.tolist():
        paths.setdefault(int(cid), []).append(str(path))
    leaders = {**fused.leaders, path: np.unique(lead_ids).astype(np.int64)}
    return Fused(np.concatenate([lead_ids, fused.ids[~present]]),
                 np.concatenate([lead_scores, fused.scores[~present]]).astype(np.float32), paths, dict(fused.cosine),
                 leaders)


def feedback_ranking(kb: KnowledgeBaseLike, fused: Fused, config: RetrievalConfig, allow: np.ndarray | None,
                     lexical: Ranking | None = None, seeds: np.ndarray | None = None) -> Ranking | None:
    """Path A re-queried with the mean of the top fused documents' visual vectors; None when nothing to average.

    seeds: the chunk ids to average (documents already judged on topic, kira.reasoning.feedback_seeds),
    unless the question names documents; None: chosen here. The ranking's `vector` is the (unit) mean
    it searched with.
    """
    index = kb.index("visual")
    if config.feedback_documents < 1 or index is None or not len(fused.ids):
        return None
    head = fused.ids[: 20 * config.feedback_documents]
    named = np.isin(head, fused.led_by(RetrievalPath.IDENTIFIER))
    if named.any():  # the documents the question names are the surest relevant ones
        head = head[named]
    elif seeds is not None:
        head = np.asarray(seeds, dtype=np.int64)
    elif lexical is not None and len(lexical.ids):
        # BM25 scores separate matches from near misses (fused RRF scores are flat): keep the strong matches
        head = lexical.ids[lexical.scores >= config.feedback_min_score * float(lexical.scores[0])]
    top: list[int] = []
    for d in kb.document_chunk_of(head).tolist():
        if d >= 0 and d not in top and index.contains(d):
            top.append(d)
            if len(top) >= config.feedback_documents:
                break
    if not top:
        return None
    centroid = np.asarray(index.get_vectors(np.array(top, dtype=np.int64)), dtype=np.float32).mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm == 0:
        return None
    centroid = (centroid / norm).astype(np.float32)
    (ids, scores), = search(index, centroid[None, :], config.candidates, allow, ef=config.search_ef)
    weight = config.visual_weight * config.feedback_weight_scale
    if named.any():
        weight *= config.named_feedback_weight_scale
    return Ranking(RetrievalPath.FEEDBACK, ids, scores, weight, f"mean of the top {len(top)} documents", vector=centroid)
