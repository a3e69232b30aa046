"""Stages 2 and 3 as stage objects: encode, search both paths, expand, fuse, feed back, hop, expand compounds.

Each stage wraps one function of kira.pipeline.query / anchoring / fine / hops and returns
a new `QueryState`. Which stages run, and in which order, is the variant's stage list
(kira.pipeline.variants).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from kira.pipeline.anchoring import anchor_to_image, clear_visual_match, feedback_ranking, lead_with_named
from kira.pipeline.concepts import ConceptBank
from kira.pipeline.fine import choose_region, fine_ranking
from kira.pipeline.hops import expand_groups, residual_hop_rankings
from kira.pipeline.query import (Fused, Ranking, encode_query, expand_query, fuse, lexical_rankings, rerank,
                                 text_rankings, visual_rankings)
from kira.pipeline.state import QueryState, StageContext


class EncodeQuery:
    """The question and image into the indexes' spaces (`QueryVectors`), and the question analysis."""

    name = "encode"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        q = encode_query(ctx.kb, ctx.models, state.question, state.pixels, prompt=ctx.profile.captioner_prompt or None,
                         describe_image=ctx.config.retrieval.caption_query_weight_scale > 0)
        facts = ctx.analysis.analyze(state.question, ctx.kb, state.allow)
        return state.evolve(query=q, facts=facts, trace={"notes": list(q.notes)})


@dataclass(frozen=True)
class VisualSearch:
    """Path A: the image and the question in image space against the visual index.

    image_only: with a query image, search with the image alone (the paper's visual-only baseline).
    """

    image_only: bool = False
    name: str = "visual_search"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        visual = visual_rankings(ctx.kb, state.query, ctx.config.retrieval, state.allow)
        if self.image_only and state.image_query:
            visual = visual[:1]
        return state.evolve(rankings=state.rankings + tuple(visual))


class ExpandQuery:
    """Query expansion: the captioner's hypotheses and the profile's concept bank, scored against the question."""

    name = "expansion"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        banks = [ConceptBank(ctx.profile.name or "profile", ctx.profile.concepts)] if ctx.profile.concepts else []
        expansions = expand_query(ctx.models, state.query, state.pixels, banks, ctx.config.retrieval)
        return state.evolve(expansions=tuple(expansions),
                            trace={"expansions": [(t, round(s, 4)) for t, _, s in expansions]})


class TextSearch:
    """Path B: the question and expansions against the description index, and BM25 over document texts.

    With a query image the question's rankings re-rank inside the image's nearest documents, at a
    weight x the question's specificity (kira.pipeline.anchoring.anchor_to_image).
    """

    name = "text_search"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        kb, cfg, q = ctx.kb, ctx.config.retrieval, state.query
        visual = [r for r in state.rankings if r.path == "visual"]
        image_ranking = visual[0] if state.image_query and visual else None
        from_question = visual[1:] if image_ranking is not None else []
        from_question += text_rankings(kb, q, state.expansions, cfg, state.allow)
        from_question += lexical_rankings(kb, q, cfg, state.allow)
        trace = {}
        if image_ranking is not None:
            words = state.question or q.text_query
            specificity = kb.lexical().specificity(words) if words else 1.0  # a raw text vector has no words to weigh
            trace["question_specificity"] = round(specificity, 4)
            scale = specificity if cfg.anchor_by_specificity else 1.0
            from_question = anchor_to_image(kb, image_ranking, from_question, scale, cfg)
            rankings = (image_ranking, *from_question)
        else:
            rankings = (*state.rankings, *from_question)
        return state.evolve(rankings=tuple(rankings), trace=trace)


class FineGrained:
    """ReAG coarse + fine: the query crop matching the question re-ranks the regions of the image's
    nearest documents (kira.pipeline.fine). Needs a query image; otherwise passes."""

    name = "fine"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        if state.pixels is None or not ctx.config.retrieval.fine_grained or not state.rankings:
            return state
        crop = choose_region(ctx.kb, ctx.models, state.pixels, state.query, ctx.config)
        if crop is None:
            return state
        ranking = fine_ranking(ctx.kb, crop, ctx.config, state.allow)
        anchored = anchor_to_image(ctx.kb, state.rankings[0], [ranking], 1.0, ctx.config.retrieval)
        return state.evolve(rankings=state.rankings + tuple(anchored), trace={"fine_box": crop.box})


@dataclass(frozen=True)
class Fuse:
    """Weighted RRF over every ranking so far. The document a query image clearly shows leads
    (kira.pipeline.anchoring.clear_visual_match); with lead_named, documents the question names lead."""

    lead_named: bool = True
    name: str = "fusion"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        fused = fuse(state.rankings, ctx.config.retrieval)
        image = next((r for r in state.rankings if r.path == "visual" and r.query == "image"), None)
        if state.image_query and image is not None:
            fused = lead_with_named(fused, clear_visual_match(ctx.kb, image, ctx.config.retrieval), "clear_match")
        if self.lead_named:
            fused = lead_with_named(fused, state.facts.named_chunks)
        return state.evolve(fused=fused)


FEEDBACK_SHARE = 0.2
"""Feedback averages at most this share of the knowledge base's documents: the mean of a large part of a
collection is its centre, not what the question is about (a five-image knowledge base feeds back its
top document alone)."""


class Feedback:
    """Pseudo-relevance feedback for text queries: the mean of the surest documents re-queries path A,
    and the rankings are fused again. An image query is already a visual query: it passes. It averages
    at most `feedback_documents` and at most `FEEDBACK_SHARE` of the documents.

    Feedback needs evidence of its own to seed from: documents the question names, or BM25 matches of
    its words. With neither, its seed would be the fused list's top alone, the dense rankings' guess,
    and on a varied collection the mean of a few wrong guesses lands on whatever sits near the centre
    (uncaptioned real photos: "a kitten" fed back to handwritten digits); the stage then passes."""

    name = "feedback"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        if state.image_query:
            return state
        cfg = ctx.config.retrieval
        lexical = next((r for r in state.rankings if r.path == "lexical"), None)
        named = any("identifier" in p for p in state.fused.paths.values())
        if not named and (lexical is None or not len(lexical.ids)):
            return state.evolve(trace={"feedback": "no named document or term match to seed from: skipped"})
        documents = len(ctx.kb.level_ids(["document"]))
        n = min(cfg.feedback_documents, int(FEEDBACK_SHARE * documents))
        if n < 1:
            return state
        seeds = None if named else judged_seeds(state, ctx, lexical, n)
        if seeds is not None and not len(seeds):
            return state.evolve(trace={"feedback": "no retrieved document is on the question's topic: skipped"})
        ranking = feedback_ranking(ctx.kb, state.fused, dataclasses.replace(cfg, feedback_documents=n), state.allow,
                                   lexical, seeds=seeds)
        if ranking is None:
            return state
        return state.evolve(rankings=state.rankings + (ranking,))


def judged_seeds(state: QueryState, ctx: StageContext, lexical: Ranking | None, n: int) -> np.ndarray | None:
    """The document chunks feedback may average: of the fused list's first 4n documents and the strong BM25
    matches, those the relevance judge finds on the question's topic (kira.reasoning.feedback_seeds); None
    without a text encoder or when the question has nothing to judge by (feedback then seeds as before)."""
    from kira.pipeline.answer_relevance import label_vocabulary, relevance_judge
    from kira.pipeline.evidence import build_items
    from kira.pipeline.grounding_stages import built_with_this_text_encoder, stored_piece_vectors
    from kira.reasoning.feedback_seeds import on_topic_seeds

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
    known = stored_piece_vectors(ctx.kb, items, getattr(encoder, "dim", 0)) \
        if built_with_this_text_encoder(ctx.kb, ctx.models) else {}
    seeds = on_topic_seeds(relevance_judge(encoder, words, label_vocabulary(ctx.models)), state.question, items, n,
                           known=known)
    return None if seeds is None else np.array([i.chunk_id for i in seeds], dtype=np.int64)


class ResidualHops:
    """Residual multi-hop retrieval (core) from the best visual query there is: the image, the feedback
    mean, or the question in image space."""

    name = "hops"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        q = state.query
        feedback = next((r.vector for r in state.rankings if r.path == "feedback"), None)
        start = next((v for v in (q.image_vector, feedback, q.text_in_image) if v is not None), None)
        if start is None:
            return state
        hops = residual_hop_rankings(ctx.kb, start, ctx.config, state.allow)
        return state.evolve(rankings=state.rankings + tuple(hops.rankings), hops=tuple(hops.hops),
                            stop_reason=hops.stop_reason)


class CompoundExpansion:
    """Compound documents (core): a retrieved member of a temporal sequence or multiview set pulls in the
    rest at 0.8x / 0.7x its score; members outside the query's filter (`QueryState.allow`) stay out."""

    name = "compound"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        fused = _copy(state.fused)
        added = expand_groups(ctx.kb, fused, ctx.config, state.allow)
        return state.evolve(fused=fused, trace={"compound_added": added})


class Rerank:
    """The cross-encoder re-rank (0.4 x fused + 0.6 x cross-encoder) when the stack has one."""

    name = "rerank"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        if getattr(ctx.models, "reranker", None) is None or not state.question or state.empty:
            return state
        n = ctx.config.retrieval.rerank_candidates_per_result * state.top_k
        fused = _copy(state.fused)
        head = fused.ids[:n]
        desc = {cid: row.description for cid, row in ctx.kb.chunks(head).items()}
        ran = rerank(ctx.models, state.question, fused, desc, ctx.config.retrieval, len(head))
        return state.evolve(fused=fused, trace={"reranked": ran})


def _copy(fused: Fused) -> Fused:
    """A deep copy of `fused`, for the helpers that change one in place."""
    return Fused(fused.ids.copy(), fused.scores.copy(), {k: list(v) for k, v in fused.paths.items()},
                 dict(fused.cosine))


__all__ = ["CompoundExpansion", "EncodeQuery", "ExpandQuery", "Feedback", "FineGrained", "Fuse", "Rerank",
           "ResidualHops", "TextSearch", "VisualSearch"]
