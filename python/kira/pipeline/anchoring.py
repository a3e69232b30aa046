"""How the question's rankings and the image's ranking meet, and pseudo-relevance feedback.

* `anchor_to_image`: when a query carries an image, the image is the subject and the
  question says what to answer about it. "What is the most likely diagnosis on this
  radiograph?" matches every radiograph's caption equally, so its rankings, fused as
  independent lists, only dilute the image's. Here each question-derived ranking keeps
  only the documents among the image's `anchor_documents` nearest and, when
  `anchor_by_specificity`, its weight is scaled by the question's max-idf specificity
  in this knowledge base (`LexicalIndex.specificity`): words no document uses weigh
  nothing, an identifier held by one document weighs fully.
* `lead_with_identifiers`: a question that names an identifier the knowledge base holds
  ("patient P017", "design C012", "2021-04-09") is about the documents carrying it:
  they move to the front of the fused list, in fused order, ahead of everything else.
  A subject (a document with its compound-group partners) whose named identifiers are
  a strict subset of another subject's is a coincidence, not the subject: "tile T047
  acquired on 2019-05-08" names T047, not the other tile that was also flown that day.
* `feedback_ranking`: pseudo-relevance feedback across modalities (average query
  expansion, Chum et al. 2007): the mean visual vector of the top `feedback_documents`
  documents the query is surest about (those named by identifier when the question
  names any; else the BM25 `lexical` ranking's matches scoring >= `feedback_min_score`
  of its best; else the fused list's top) re-queries the visual index, so documents whose captions say nothing
  are found through their look-alikes among those whose captions matched. A mean of named
  documents is the subject itself and weighs `named_feedback_weight_scale` (4) times more:
  what fills the places after a named patient's studies should look like that patient's.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from kira.config import RetrievalConfig
from kira.pipeline.query import Fused, Ranking, search


def anchor_to_image(kb: Any, image: Ranking, rankings: Sequence[Ranking], scale: float,
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
    out = []
    for r in rankings:
        keep = np.isin(kb.document_chunk_of(r.ids), allowed)
        out.append(Ranking(r.path, r.ids[keep], r.scores[keep], r.weight * scale, r.query, cosine=r.cosine,
                           vector=r.vector))
    return out


def lead_with_identifiers(kb: Any, fused: Fused, question: str, allow: np.ndarray | None) -> int:
    """Move the chunks whose document text holds an identifier of `question` to the front (in place).

    Chunks of a subject whose named identifiers another subject's strictly include stay
    where they are (see the module doc). Chunks missing from `fused` join with the top
    score. Returns how many chunks lead.
    """
    if not question:
        return 0
    postings = kb.lexical().identifier_postings(question, allow=allow)
    if not postings:
        return 0
    matches = _named_subjects(kb, postings)
    present = np.isin(fused.ids, matches)
    missing = matches[~np.isin(matches, fused.ids)]
    top = float(fused.scores[0]) if len(fused.scores) else 1.0
    lead_ids = np.concatenate([fused.ids[present], missing])
    lead_scores = np.concatenate([fused.scores[present], np.full(len(missing), top, np.float32)])
    # Leading chunks keep their order but score at least every chunk behind them.
    floor = float(fused.scores[~present].max()) if (~present).any() else 0.0
    lead_scores = np.maximum(lead_scores, floor).astype(np.float32)
    fused.ids = np.concatenate([lead_ids, fused.ids[~present]])
    fused.scores = np.concatenate([lead_scores, fused.scores[~present]]).astype(np.float32)
    for cid in lead_ids.tolist():
        fused.paths.setdefault(int(cid), []).append("identifier")
    return int(len(lead_ids))


def _named_subjects(kb: Any, postings: dict[str, np.ndarray]) -> np.ndarray:
    """The matched chunk ids whose subject's named identifiers no other subject's strictly include."""
    chunks = np.unique(np.concatenate(list(postings.values())))
    doc_of = dict(zip(chunks.tolist(), kb.document_chunk_of(chunks).tolist()))
    held: dict[int, set[str]] = {}  # document chunk (or the chunk itself, outside any document) -> terms
    for term, ids in postings.items():
        for cid in ids.tolist():
            held.setdefault(doc_of[cid] if doc_of[cid] >= 0 else cid, set()).add(term)
    partners = kb.group_partners()
    subject = {d: frozenset(terms.union(*(held.get(p, ()) for p in partners.get(d, ())))) for d, terms in held.items()}
    distinct = set(subject.values())
    named = {d for d, terms in subject.items() if not any(terms < other for other in distinct)}
    keep = [cid for cid in chunks.tolist() if (doc_of[cid] if doc_of[cid] >= 0 else cid) in named]
    return np.asarray(keep, dtype=np.int64)


def feedback_ranking(kb: Any, fused: Fused, config: RetrievalConfig, allow: np.ndarray | None,
                     lexical: Ranking | None = None) -> Ranking | None:
    """Path A re-queried with the mean of the top fused documents' visual vectors; None when nothing to average.

    The ranking's `vector` is the (unit) mean it searched with.
    """
    index = kb.index("visual")
    if config.feedback_documents < 1 or index is None or not len(fused.ids):
        return None
    head = fused.ids[: 20 * config.feedback_documents]
    named = np.array([int(c) in fused.paths and "identifier" in fused.paths[int(c)] for c in head.tolist()], bool)
    if named.any():  # the documents the question names are the surest relevant ones
        head = head[named]
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
    return Ranking("feedback", ids, scores, weight, f"mean of the top {len(top)} documents", vector=centroid)
