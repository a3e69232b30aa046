"""Stage 2 as stage objects: encode, search both paths, expand, fine crops, fuse, feed back, re-rank.

Each stage wraps one function of kira.retrieval (encode, search, expansion, fine, fusion,
anchoring) and returns a new `QueryState`; what it found goes into the typed field of its
path (`QueryState.rankings`, kira.query_state.Rankings). Which stages run, and in which order,
is the variant's stage list (kira.pipeline.variants); a stage's options are its own switches,
and the config only holds its numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from kira.grounding.feedback_seeds import judged_seeds  # stage 4's relevance judge picks feedback's seeds
from kira.query_state import QueryState, QueryVectors, RetrievalPath, StageContext
from kira.retrieval.anchoring import anchor_to_image, clear_visual_match, feedback_ranking, lead_with_named
from kira.retrieval.concepts import ConceptBank
from kira.retrieval.encode import encode_query
from kira.retrieval.expansion import expand_query
from kira.retrieval.fine import choose_region, fine_ranking
from kira.retrieval.fusion import fuse, rerank
from kira.retrieval.search import lexical_rankings, text_rankings, visual_search


@dataclass(frozen=True)
class EncodeQuery:
    """The question and image into the indexes' spaces (`QueryVectors`), and the question analysis.

    describe_image: an image asked about without a question is described by the captioner, and path B
    searches with that description at text_weight x `caption_query_weight_scale` (off by default: a
    description kira's own captioner writes restates the image through a lossier channel).
    """

    describe_image: bool = False
    name: str = "encode"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        q = encode_query(ctx.kb, ctx.models, state.question, state.pixels, prompt=ctx.profile.captioner_prompt or None,
                         describe_image=self.describe_image)
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
        image, question = visual_search(ctx.kb, _encoded(state), ctx.config.retrieval, state.allow)
        if self.image_only and state.image_query:
            question = None
        return state.evolve(rankings=dataclasses.replace(state.rankings, image=image, question_in_image=question))


class ExpandQuery:
    """Query expansion: the captioner's hypotheses and the profile's concept bank, scored against the question."""

    name = "expansion"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        banks = [ConceptBank(ctx.profile.name or "profile", ctx.profile.concepts)] if ctx.profile.concepts else []
        expansions = expand_query(ctx.models, _encoded(state), state.pixels, banks, ctx.config.retrieval)
        return state.evolve(expansions=tuple(expansions),
                            trace={"expansions": [(t, round(s, 4)) for t, _, s in expansions]})


@dataclass(frozen=True)
class TextSearch:
    """Path B: the question and expansions against the description index, and BM25 over document texts.

    With a query image the question's rankings (its image-space one included) re-rank inside the image's
    nearest documents (kira.retrieval.anchoring.anchor_to_image), with anchor_by_specificity at their
    weight x the question's max-idf specificity in this knowledge base.
    """

    anchor_by_specificity: bool = True
    name: str = "text_search"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        kb, cfg, q = ctx.kb, ctx.config.retrieval, _encoded(state)
        found = state.rankings
        text = text_rankings(kb, q, state.expansions, cfg, state.allow)
        lexical = lexical_rankings(kb, q, cfg, state.allow)
        image = found.image if state.image_query else None
        if image is None:
            return state.evolve(rankings=dataclasses.replace(found, text=tuple(text),
                                                             lexical=lexical[0] if lexical else None))
        words = state.question or q.text_query
        specificity = kb.lexical().specificity(words) if words else 1.0  # a raw text vector has no words to weigh
        scale = specificity if self.anchor_by_specificity else 1.0
        in_image = [found.question_in_image] if found.question_in_image is not None else []
        anchored = anchor_to_image(kb, image, [*in_image, *text, *lexical], scale, cfg)
        in_image, anchored = anchored[: len(in_image)], anchored[len(in_image):]
        text, lexical = anchored[: len(text)], anchored[len(text):]
        rankings = dataclasses.replace(found, question_in_image=in_image[0] if in_image else None, text=tuple(text),
                                       lexical=lexical[0] if lexical else None)
        return state.evolve(rankings=rankings, trace={"question_specificity": round(specificity, 4)})


class FineGrained:
    """ReAG coarse + fine: the query crop matching the question re-ranks the regions of the image's
    nearest documents (kira.retrieval.fine). Needs a query image; otherwise passes. The variant decides
    whether it runs: there is no config switch."""

    name = "fine"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        image = state.rankings.image
        if state.pixels is None or image is None:
            return state
        crop = choose_region(ctx.kb, ctx.models, state.pixels, _encoded(state), ctx.config)
        if crop is None:
            return state
        ranking = fine_ranking(ctx.kb, crop, ctx.config, state.allow)
        (anchored,) = anchor_to_image(ctx.kb, image, [ranking], 1.0, ctx.config.retrieval)
        return state.evolve(rankings=dataclasses.replace(state.rankings, fine=anchored), trace={"fine_box": crop.box})


@dataclass(frozen=True)
class Fuse:
    """Weighted RRF over every ranking so far, each document counted once per ranking (kira.retrieval.fusion).
    The document a query image clearly shows leads
    (kira.retrieval.anchoring.clear_visual_match); with lead_named, documents the question names lead."""

    lead_named: bool = True
    name: str = "fusion"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        fused = fuse(state.rankings.in_fusion_order(), ctx.config.retrieval, ctx.kb.document_chunk_of)
        image = state.rankings.image
        if state.image_query and image is not None:
            shown = clear_visual_match(ctx.kb, image, ctx.config.retrieval)
            fused = lead_with_named(fused, shown, RetrievalPath.CLEAR_MATCH)
        if self.lead_named:
            fused = lead_with_named(fused, state.facts.named_chunks, RetrievalPath.IDENTIFIER)
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
        lexical = state.rankings.lexical
        named = len(state.fused.led_by(RetrievalPath.IDENTIFIER)) > 0
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
        return state.evolve(rankings=dataclasses.replace(state.rankings, feedback=ranking))


class Rerank:
    """The cross-encoder re-rank (0.4 x fused + 0.6 x cross-encoder) when the stack has one."""

    name = "rerank"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        if getattr(ctx.models, "reranker", None) is None or not state.question or state.empty:
            return state
        n = ctx.config.retrieval.rerank_candidates_per_result * state.top_k
        fused = state.fused.copy()
        head = fused.ids[:n]
        desc = {cid: row.description for cid, row in ctx.kb.chunks(head).items()}
        ran = rerank(ctx.models, state.question, fused, desc, ctx.config.retrieval, len(head))
        return state.evolve(fused=fused, trace={"reranked": ran})


def _encoded(state: QueryState) -> QueryVectors:
    """The state's query encoding; a ValueError naming the missing stage when none ran before."""
    if state.query is None:
        raise ValueError("this stage needs the query encoding: put EncodeQuery() first in the stage list")
    return state.query


__all__ = ["EncodeQuery", "ExpandQuery", "FEEDBACK_SHARE", "Feedback", "FineGrained", "Fuse", "Rerank",
           "TextSearch", "VisualSearch"]
