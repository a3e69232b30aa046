"""Which retrieved documents pseudo-relevance feedback may average: those the relevance judge finds on the
question's topic (kira.reasoning.feedback_seeds). The Feedback stage (kira.retrieval.stages) asks this of
stage 4's judge: a mean of off-topic look-alikes would re-query path A with the wrong subject."""

from __future__ import annotations

import numpy as np

from kira.grounding.answer_relevance import label_vocabulary, relevance_judge
from kira.grounding.evidence import build_items
from kira.grounding.pieces import built_with_this_text_encoder, stored_vectors
from kira.query_state import QueryState, Ranking, StageContext
from kira.reasoning.feedback_seeds import on_topic_seeds


def judged_seeds(state: QueryState, ctx: StageContext, lexical: Ranking | None, n: int) -> np.ndarray | None:
    """The document chunks feedback may average: of the fused list's first 4n documents and the strong BM25
    matches, those the relevance judge finds on the question's topic (kira.reasoning.feedback_seeds); None
    without a text encoder or when the question has nothing to judge by (feedback then seeds as before)."""
    encoder = getattr(ctx.models, "text", None)
    if encoder is None or not callable(getattr(encoder, "encode", None)):
        return None
    cfg = ctx.config.retrieval
    head = [d for d in dict.fromkeys(ctx.kb.document_chunk_of(state.fused.ids[: 20 * n]).tolist()) if d >= 0]
    strong = lexical.ids[lexical.scores >= cfg.feedback_min_score * float(lexical.scores[0])] \
        if lexical is not None and len(lexical.ids) else np.zeros(0, np.int64)
    docs = list(dict.fromkeys(head[: 4 * n] + [d for d in ctx.kb.document_chunk_of(strong).tolist() if d >= 0]))
    items = build_items(ctx.kb, docs, [0.0] * len(docs), {}, {}, thumbnails=False)
    words = tuple(getattr(ctx.profile, "appearance_words", ()) or ())
    known = stored_vectors(ctx.kb, items, getattr(encoder, "dim", 0)) \
        if built_with_this_text_encoder(ctx.kb, ctx.models) else {}
    asked = state.query.embeds_question(state.question) if state.query is not None else None  # not encoded again
    seeds = on_topic_seeds(relevance_judge(encoder, words, label_vocabulary(ctx.models)), state.question, items, n,
                           known=known, question_vector=asked)
    return None if seeds is None else np.array([i.chunk_id for i in seeds], dtype=np.int64)


__all__ = ["judged_seeds"]
