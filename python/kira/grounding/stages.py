"""Stage 4 as stage objects: select evidence, critic, subject, generate, verify.

* `SelectEvidence`: the fused list -> evidence items (at most `max_per_document` chunks of
  one document), `per_result` x top_k candidates when a critic follows.
* `Critic`: ReAG's critic keeps P(relevant) > 0.1 of what each item shows; documents the
  question names and the document a query image clearly shows (a copy, crop or mirror) are
  kept whatever it says; an uncalibrated critic never drops the top fused result.
* `Subject`: when the question names a subject (its documents and their compound
  partners), or names none and its query image clearly shows a stored document (a copy, crop
  or mirror: that document and its partners), the pack holds that subject's items, and every
  other item only as a similar case (kira.reasoning.subject).
* `Generate`: the generator over the subject's items, and apart over the similar cases that
  match a text question besides its subject's name; the subject invariant is enforced on what it wrote.
* `Verify`: the grounding verifier scores every claim against the evidence it may cite.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from kira.grounding.answer_relevance import (abstention, judge, on_topic, on_topic_similar, relevance_note,
                                             relevance_step, relevant_first)
from kira.grounding.evidence import build_items, diverse, hops_with_documents
from kira.grounding.pieces import built_with_this_text_encoder, shown_rows, stored_piece_vectors, stored_shown_vectors
from kira.grounding.opening import with_opening
from kira.grounding.unheld_words import record_counts, shared_stems, unheld_opening, unheld_similar
from kira.grounding.yes_no import yes_no_notice
from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.query_state import QueryState, RetrievalPath, StageContext
from kira.reasoning.subject import attributed_to_stored, enforce_subject
from kira.reasoning.types import Answer, EvidencePack


@dataclass(frozen=True)
class SelectEvidence:
    """The best fused chunks as evidence items: top_k, or per_result x top_k when a critic follows."""

    per_result: int = 1
    name: str = "evidence"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        n = self.per_result * state.top_k
        chosen, rows = diverse(ctx.kb, state.fused, ctx.max_per_document, n)
        items = build_items(ctx.kb, [c for c, _ in chosen], [s for _, s in chosen], state.fused.paths,
                            state.fused.cosine, rows=rows, thumbnails=ctx.thumbnails)
        return state.evolve(candidates=tuple(items), kept=tuple(items[: state.top_k]),
                            hops=hops_with_documents(ctx.kb, state.hops, rows))


class Critic:
    """ReAG's critic over the candidates (module docstring); the card gets its decision."""

    name = "critic"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        critic = _needed(ctx.critic, "Critic")
        items = state.candidates
        query = critic_query(ctx, state.question, state.pixels)
        extra = {}
        if items and ctx.critic_shares_query_encoder and state.query is not None:
            # the critic judges what an item shows (kira.reasoning.critic.shown_text): ingest stores that text's
            # vector as a piece; what is not stored the critic encodes (and caches) itself
            vector = state.query.embeds_question(query)
            if vector is not None:
                extra["question_vector"] = vector  # the question as the query encoding embedded it
            if built_with_this_text_encoder(ctx.kb, ctx.models):  # what each item shows, stored at ingest
                dim = int(getattr(ctx.models.text, "dim", 0))
                extra["item_vectors"] = shown_rows(items, stored_shown_vectors(ctx.kb, items, dim), dim)
        decision = critic.filter(query, items, ctx.config.grounding.critic_threshold, **extra)
        named = set(state.fused.led_by(RetrievalPath.IDENTIFIER).tolist())
        protected = {i.chunk_id for i in decision.dropped if i.chunk_id in named}
        notes = []
        if protected:
            notes.append(f"{len(protected)} items of the documents the question names by identifier kept")
        clear = set(state.fused.led_by(RetrievalPath.CLEAR_MATCH).tolist())
        shown = {i.chunk_id for i in decision.dropped if i.chunk_id in clear}
        if shown:
            protected |= shown
            notes.append(f"{len(shown)} items of the document the query image shows kept")
        if items and not getattr(critic, "calibrated", False) and items[0] in decision.dropped:
            protected.add(items[0].chunk_id)
            notes.append("the critic is not calibrated for this model stack: the top fused result is kept")
        if protected:
            kept_ids = {i.chunk_id for i in decision.kept} | protected
            note = "; ".join(([decision.note] if decision.note else []) + notes)
            decision = dataclasses.replace(decision, kept=tuple(i for i in items if i.chunk_id in kept_ids),
                                           dropped=tuple(i for i in items if i.chunk_id not in kept_ids), note=note)
        from kira.explain.card import critic_summary

        summary = critic_summary(decision)
        kept = decision.kept[: state.top_k]
        summary["kept"] = [item.chunk_id for item in kept]
        summary["beyond_top_k"] = len(decision.kept) - len(kept)
        summary["candidates"] = len(items)
        return state.evolve(kept=tuple(kept), dropped=tuple(decision.dropped), critic=summary)


class Subject:
    """Splits the kept evidence into the named subject's items and similar cases (module docstring)."""

    name = "subject"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        heads = subject_heads(ctx.kb, state.facts.named_chunks)
        label = ", ".join(sorted(state.facts.named_terms))
        if not heads and state.image_query:  # the document a query image clearly shows is what it asks about
            shown = [i for i in state.kept if i.shown_by_query_image]
            heads = subject_heads(ctx.kb, np.asarray([i.chunk_id for i in shown], dtype=np.int64))
            label = ", ".join(sorted({i.doc_id for i in shown}))
        if not heads:
            pack = EvidencePack.from_items(state.question, state.kept, state.dropped)
            return state.evolve(pack=pack)
        # which kept items are the subject's, by document chunk id: no row of the subject's documents is read (a
        # subject named by a shared metadata value spans hundreds of them)
        kept_heads = ctx.kb.document_chunk_of(np.asarray([i.chunk_id for i in state.kept], dtype=np.int64)).tolist()
        mine = [(h if h >= 0 else i.chunk_id) in heads for i, h in zip(state.kept, kept_heads)]
        own = [i for i, m in zip(state.kept, mine) if m]
        others = [i for i, m in zip(state.kept, mine) if not m]
        if not own:  # nothing of the subject reached the evidence: the rest is not about it either
            own, others = [], list(state.kept)
        pack = EvidencePack.from_items(state.question, own, state.dropped, similar=others, subject=label)
        shown_docs = sorted(row.doc_id for row in ctx.kb.chunks(sorted(heads)[:TRACED_DOCUMENTS]).values())
        return state.evolve(pack=pack, trace={"subject": {"named": label, "documents": shown_docs,
                                                          "document_count": len(heads), "similar_cases": len(others)}})


TRACED_DOCUMENTS = 20
"""The trace names at most this many of the subject's documents (``document_count`` says how many)."""


def subject_heads(kb: KnowledgeBaseLike, named_chunks: np.ndarray) -> frozenset[int]:
    """The document chunk ids of the subject(s) `named_chunks` name: their documents' and every document's of their
    compound documents (kira.knowledge_base: what temporal sequences and multiview sets group, followed from group
    to group). A named chunk outside any document stands for itself."""
    if not len(named_chunks):
        return frozenset()
    named = np.asarray(named_chunks, dtype=np.int64)
    heads = {int(h) if h >= 0 else int(c) for c, h in zip(named.tolist(), kb.document_chunk_of(named).tolist())}
    frontier = set(heads)
    while frontier:  # a film's multiview partner's own sequence belongs to the subject too
        partners = kb.compounds_for(chunk_ids=frontier).partners  # these documents' groups (per hit on Milvus)
        frontier = set().union(*(partners.get(h, ()) for h in frontier)) - heads
        heads |= frontier
    return frozenset(heads)


class Generate:
    """The relevance verdict, then the generator over the subject's evidence, and apart over the similar
    cases; the subject invariant is enforced on the result (kira.reasoning.subject). When nothing in the
    evidence is relevant (kira.reasoning.relevance), the answer abstains: it says so and names the closest
    items, whatever the generator. For a text question the generator is handed how far each item matches it
    (`EvidencePack.matches`) and weighs each item's vote by it."""

    name = "generate"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        pack = state.pack if state.pack is not None else EvidencePack.from_items(state.question, state.kept)
        pack, off_topic = on_topic_similar(ctx, state, pack)
        counts = record_counts(ctx, state.question) if state.question and not state.image_query else None
        if counts is not None:
            pack, unheld_off = unheld_similar(ctx, state, pack, counts)
            off_topic = [*off_topic, *unheld_off]
        verdict = judge(ctx, state, pack)
        if verdict is not None and verdict.relevant:
            pack, verdict = relevant_first(pack, verdict)
        if verdict is not None and verdict.items and not state.image_query:
            # each vote weighs how far it answers the question; with a query image the evidence is what the image
            # matches, and a question's words ("what does this film show?") do not rank it
            pack = dataclasses.replace(pack, matches=dict(verdict.items),
                                       shared=shared_stems(state.question, counts) if counts else frozenset())
        note: dict[str, Any] = {"relevance": relevance_note(verdict)} if verdict is not None else {}
        if off_topic:
            note["similar_cases_off_topic"] = off_topic
        if verdict is not None and not verdict.relevant and pack.items:
            return state.evolve(pack=pack, relevance=verdict, answer=abstention(state, pack, verdict), trace=note)
        answer = ctx.generator.generate(state.question, pack)
        similar = ctx.generator.generate(state.question, pack.similar_pack()) if pack.similar else None
        answer = attributed_to_stored(enforce_subject(answer, pack, similar), pack, image_query=state.image_query)
        if verdict is not None:
            verdict, unheld = unheld_opening(ctx, state, pack, verdict, counts) if counts else (verdict, None)
            if unheld is not None:
                note["relevance"] = relevance_note(verdict)
            answer = dataclasses.replace(answer, confidence=verdict.confidence,
                                         reasoning=(*answer.reasoning, relevance_step(verdict)))
            words = tuple(getattr(ctx.profile, "appearance_words", ()) or ())
            notice = yes_no_notice(ctx, state, pack, verdict, words)
            answer = with_opening(answer, notice or unheld)
            if notice is not None:
                note["yes_no"] = notice.trace
        return state.evolve(pack=pack, relevance=verdict, answer=answer, trace=note)


class Verify:
    """The grounding verifier over every claim: the subject's against its items, similar cases against theirs."""

    name = "verify"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        answer, pack = state.answer, state.pack
        if answer is None or pack is None:
            return state
        verifier = _needed(ctx.verifier, "Verify")
        extra: dict[str, Any] = {"question": state.question or "",  # looks are verified only where asked or claimed
                                 "appearance_words": tuple(getattr(ctx.profile, "appearance_words", ()) or ())}
        if ctx.verifier_shares_query_encoder and built_with_this_text_encoder(ctx.kb, ctx.models):
            extra["known"] = stored_piece_vectors(ctx.kb, (*pack.items, *pack.similar), verifier.encoder.dim)
        verified = verifier.verify(dataclasses.replace(answer, similar=()), pack, **extra)
        if answer.similar:
            others = verifier.verify(Answer(text="", claims=answer.similar), pack.similar_pack(), **extra)
            verified = dataclasses.replace(verified, similar=others.claims, text=answer.text)
        verified = on_topic(state, verified)
        if verified.confidence is not None and verified.claims:  # only as sure as the share of grounded claims
            grounded = sum(not c.hallucination_risk for c in verified.claims) / len(verified.claims)
            verified = dataclasses.replace(verified, confidence=round(verified.confidence * grounded, 3))
        return state.evolve(answer=verified)


def critic_query(ctx: StageContext, question: str, pixels: np.ndarray | None) -> str:
    """What the critic judges relevance against: the question, plus the query image's description
    (ReAG's critic sees the image and the question; a text critic sees the image through the captioner)."""
    captioner = getattr(ctx.models, "captioner", None)
    if pixels is None or not question or captioner is None:
        return question
    prompt = ctx.profile.captioner_prompt
    description = captioner.caption(pixels, prompt) if prompt else captioner.caption(pixels)
    return f"{question} {description}".strip() if description else question


Part = TypeVar("Part")


def _needed(part: Part | None, stage: str) -> Part:
    """`part` of the context, or a ValueError saying that `stage` needs `Kira.ask`'s context."""
    if part is None:
        raise ValueError(f"the {stage} stage needs a critic and a verifier in its context: run it through Kira.ask")
    return part


__all__ = ["Critic", "Generate", "SelectEvidence", "Subject", "Verify", "critic_query", "subject_heads"]
