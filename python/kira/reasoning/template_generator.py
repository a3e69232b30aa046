"""The deterministic default generator: the score-weighted consensus of the evidence.

Evidence texts mix content with bookkeeping; what counts as bookkeeping, which heads a
report uses, which words ask for a comparison or report a change, and which words place a
finding are the user's domain profile (`kira.DomainProfile`; kira.reasoning.sentences).
With the empty profile every sentence is content and no comparison or position rule
applies. The generator answers with the *content the top evidence agrees on*:

1. Each item's text is split into statements (kira.reasoning.sentences); bookkeeping is
   set aside (documents that state only bookkeeping abstain).
2. Each statement gets a support: the share of the weighted evidence that states it
   too (same shape: stem Jaccard >= 0.65 with values as one placeholder, or differing
   only in the profile's position words), one vote per document at its best weight (its
   retrieval score times, where the relevance verdict judged it, how far it matches the
   question: `EvidencePack.matches`); plus half the share of the question's content words
   it contains; plus 1 when the question
   asks for a comparison (a profile comparison word) and the statement reports a change
   (a profile change word) that is new in some document. For a question asking no
   comparison, statements of change are one instance's history and are not chosen.
3. A statement is worded as its witnesses agree (kira.reasoning.consensus); a witness is
   a document, or a whole compound document (``provenance["compound"]``: one subject's
   images) that votes once. Position words are kept only where the witnesses of all the
   chosen claims agree on them (kira.reasoning.position_agreement).
4. The best-supported statement is the first claim (unless only items that do not clearly
   match the question state it while one that does states another: `kira.reasoning.statement_votes.clear_match_first`);
   others follow while their score is >= `min_support_ratio` of the best (at most
   `max_claims`) if a document that states
   the first states them too (they complement it, not a rival reading) or, for a
   comparison, another document of the same compound document does, or, for evidence about
   a kind of thing (no subject: each witness is its own subject), an item of another witness
   that clearly matches the question states them and they hold the question's words the first
   holds, and more than none (another answer, said after the others, at most `max_claims` - 1:
   `kira.reasoning.statement_votes.answers_apart`); and they do not restate a chosen claim.
   Every claim cites the items that state it (best first). A claim split from a head ("a breakfast
   table: two cups and a teapot") is joined to it again when both are chosen, head first, citing the
   items that state its body. A head that holds none of the question's words, less those most records
   of the knowledge base hold (`EvidencePack.shared`), is no candidate of its own: its body carries it
   and is written with it when every item it cites states it ("CT scan" of "CT scan: a marked lesion"
   answers nothing of "which scans show a lesion?" and, voted on, would outvote every finding;
   `kira.reasoning.statement_votes.with_heads`).
5. When the question asks what several views show together (kira.reasoning.view_agreement),
   the claim says the views agree only when each view states it.
6. When a subject's evidence holds two or more members of one temporal sequence (the first
   item's) whose main statements differ, each member is answered from its own items, in sequence
   order (kira.reasoning.sequence_answer): a revision is the subject at its time, not a rival reading.

The generator answers from the pack it is given: which items are about the subject asked
about, and which are similar cases, is decided before it (kira.pipeline's subject stage and
`kira.reasoning.subject`). Before the answer it writes the reasoning trace. It cites only
numbers present in the pack; with an empty pack it says it found no evidence.
Output is a pure function of (question, pack, profile).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from kira.profile import DomainProfile
from kira.reasoning.citations import format_citation
from kira.reasoning.field_answer import ANOTHER, ANOTHER_MATCH, CLOSEST, NAMED, QUERY_SHOWS, item_sentence
from kira.reasoning.shown import asks_about_appearance, shown
from kira.reasoning.sequence_answer import (MemberAnswer, SequenceInEvidence, claims_in_order, sequence_in_evidence,
                                            trace_line)
from kira.reasoning.statement_votes import (Statement, answers_apart, clear_match_first, items_apart, with_heads,
                                            numbers_of, restates, vote_weights)
from kira.reasoning.statement_wording import agree_on_positions, agreed_wording
from kira.reasoning.sentences import (Vocabulary, same_statement, sentences_of, shape_of, stems_of, text_of,
                                      vocabulary, witness)
from kira.text.tokens import content_tokens, stem
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack
from kira.reasoning.view_agreement import agreeing_views, asks_agreement

log = logging.getLogger(__name__)

NO_EVIDENCE_TEXT = "I found no evidence in the knowledge base that answers this question."


def is_comparison(question: str, vocab: Vocabulary) -> bool:
    """Whether `question` asks for a comparison (a comparison word of the profile among its words)."""
    return bool({stem(t) for t in content_tokens(question)} & vocab.comparison_stems)


def _sentence(text: str, citation: str) -> str:
    text = text[:1].upper() + text[1:]
    return f"{text} {citation}." if citation else f"{text}."


class TemplateGenerator:
    """Deterministic `Generator`: the score-weighted consensus of the evidence (module docstring).

    Parameters
    ----------
    profile: the user's `kira.DomainProfile` (bookkeeping, heads, comparison, change and
        position words); the empty profile when None.
    max_claims: at most this many sentences of the consensus, and, for evidence about many subjects, at most
        this many less one of other subjects' answers.
    min_support_ratio: a further sentence is added only while its score is at least this
        share of the best sentence's.
    max_citations: at most this many evidence numbers per claim (its best-scored sources).
    """

    name = "template"

    def __init__(self, *, profile: DomainProfile | None = None, max_claims: int = 2, min_support_ratio: float = 0.1,
                 max_citations: int = 5) -> None:
        if max_claims < 1 or max_citations < 1:
            raise ValueError(f"max_claims and max_citations must be >= 1; got {max_claims}, {max_citations}")
        if not 0.0 <= min_support_ratio <= 1.0:
            raise ValueError(f"min_support_ratio must be in [0, 1]; got {min_support_ratio}")
        self.profile = profile or DomainProfile()
        self.vocab = vocabulary(self.profile)
        self.max_claims = max_claims
        self.min_support_ratio = min_support_ratio
        self.max_citations = max_citations

    def _bookkeeping(self, item: EvidenceItem) -> str:
        """The item's bookkeeping sentences, joined (what tells views of one set apart)."""
        return " ".join(s for s, is_meta, _ in sentences_of(text_of(item), self.vocab) if is_meta)

    def _content(self, item: EvidenceItem, appearance: bool) -> str:
        """What the generator reads of `item`: what a person wrote about it (kira.reasoning.shown), and its
        measured looks only when the question asks about appearance; "" when it states neither."""
        view = shown(item)
        if view.human_text:
            return text_of(item) if not view.written else view.written
        return view.looks_text() if appearance else ""

    def _states_content(self, question: str, items: tuple[EvidenceItem, ...]) -> bool:
        """Whether any of `items` states content, not only bookkeeping (what `_candidates` would vote on)."""
        appearance = asks_about_appearance(question, getattr(self.profile, "appearance_words", ()))
        return any(not is_meta and stems_of(sentence) for item in items
                   for sentence, is_meta, _ in sentences_of(self._content(item, appearance), self.vocab))

    def _candidates(self, question: str, items: tuple[EvidenceItem, ...], matches: Mapping[int, float],
                    shared: frozenset[str] = frozenset()) -> tuple[list[Statement], list[str]]:
        vocab = self.vocab
        q_stems = frozenset(stem(t) for t in content_tokens(question)) - vocab.question_stems
        asked = q_stems - shared  # the words a head must hold to be a claim of its own
        appearance = asks_about_appearance(question, getattr(self.profile, "appearance_words", ()))
        weights = vote_weights(items, matches)
        order = sorted(items, key=lambda i: (-weights[i.number], i.number))
        candidates: list[Statement] = []
        metadata: list[str] = []
        per_item: dict[int, list[frozenset[str]]] = {}
        for item in order:
            sentences = sentences_of(self._content(item, appearance), vocab)
            # a head that asks nothing the question asks, whose body states content, is carried by that body (its
            # context), not voted on apart
            heads = {context for _, is_meta, context in sentences if context and not is_meta}
            carried = {s for s, is_meta, context in sentences
                       if not context and not is_meta and s in heads and not stems_of(s) & asked}
            for sentence, is_meta, context in sentences:
                if sentence in carried and not context:
                    continue
                if is_meta:
                    metadata.append(f"'{sentence}' ([Evidence {item.number}])")
                    continue
                stems = stems_of(sentence)
                if not stems:
                    continue
                shape = shape_of(stems)
                per_item.setdefault(item.number, []).append(shape)
                match = next((c for c in candidates if same_statement(c.stems, shape, vocab)), None)
                if match is None:
                    match = Statement(sentence, shape, [item], context=stems | stems_of(context), head=context,
                                      carries_head=context in carried)
                    candidates.append(match)
                elif item not in match.sources:
                    match.sources.append(item)
                match.variants.append((witness(item), item.doc_id, stems))
                match.wordings.setdefault(item.doc_id, sentence)
                if context and not match.context & stems_of(context):
                    match.context = match.context | stems_of(context)
        # documents that state no content (only bookkeeping) abstain: they vote for nothing and against nothing
        content_docs: dict[str, float] = {}
        for item in items:
            if per_item.get(item.number):
                content_docs[item.doc_id] = max(content_docs.get(item.doc_id, 0.0), weights[item.number])
        total = sum(content_docs.values()) or 1.0
        comparison = is_comparison(question, vocab)
        for cand in candidates:
            docs: dict[str, float] = {}
            witnesses: dict[str, float] = {}
            for item in items:
                if any(same_statement(cand.stems, s, vocab) for s in per_item.get(item.number, [])):
                    docs[item.doc_id] = max(docs.get(item.doc_id, 0.0), weights[item.number])
                    who = witness(item)
                    witnesses[who] = max(witnesses.get(who, 0.0), weights[item.number])
                    if item not in cand.sources:
                        cand.sources.append(item)
            cand.sources.sort(key=lambda i: (-weights[i.number], i.number))
            cand.support = sum(docs.values()) / total
            cand.held = q_stems & cand.context
            cand.relevance = len(cand.held) / len(q_stems) if q_stems else 0.0
            # a change is new in some document: what every document states is the unchanged part
            new_somewhere = len(content_docs) == 1 or len(docs) < len(content_docs)
            states_change = bool(cand.context & vocab.change_stems)
            cand.reports_change = comparison and new_somewhere and states_change
            cand.history = states_change and not comparison
            cand.text, wording_docs = agreed_wording(
                cand, self.vocab, weights_by_witness=witnesses,
                cited={i.doc_id for i in cand.sources[: self.max_citations]})
            if wording_docs is not None:  # no wording its witnesses agree on: one witness's words, cited for those
                cand.sources = [i for i in cand.sources if i.doc_id in wording_docs]  # who word it so
                cand.support = sum(w for d, w in docs.items() if d in wording_docs) / total
        # one instance's history ("C1 changed from 10u to 470u") does not say what the evidence shows
        candidates.sort(key=lambda c: (c.history, -c.score, min(i.number for i in c.sources)))
        return candidates, metadata

    def generate(self, question: str, pack: EvidencePack) -> Answer:
        """Answer `question` from `pack` (see the module docstring). Cites only `pack`'s numbers."""
        question = (question or pack.question or "").strip()
        trace: list[str] = [f"Question: {question}" if question else "Question: (image query, no text)"]
        if pack.dropped:
            trace.append(
                f"The critic set aside {len(pack.dropped)} item(s) as irrelevant before reasoning: "
                + ", ".join(f"{d.doc_id} ({d.level})" for d in pack.dropped)
                + "."
            )
        if not pack.items:
            trace.append("No evidence remained to reason over, so no claim can be grounded.")
            return Answer(text=NO_EVIDENCE_TEXT, reasoning=tuple(trace), claims=(), generator=self.name)

        pool = pack.items
        trace.append(
            f"Considered {len(pool)} evidence item(s): "
            + "; ".join(
                f"[Evidence {i.number}] {i.doc_id} ({i.level}, score {i.score:.3f}"
                + (f", matches the question {pack.matches[i.number]:.2f}" if i.number in pack.matches else "")
                + f", via {'+'.join(i.paths) or '-'})"
                for i in pool
            )
            + "."
        )
        if pack.subject and not pack.of_similar_cases and not asks_agreement(question):
            sequence = sequence_in_evidence(pool, max_members=self.max_citations)
            if sequence is not None:
                in_order = self._in_sequence_order(question, pack, sequence, trace)
                if in_order is not None:
                    return in_order
        first = pool[0]  # the pack's order is the order to read it in (best first)
        if not shown(first).human_text:  # nobody described the closest image in words: say what is known of it
            if first.named_by_question and not pack.of_similar_cases:  # each document the question names, in pack order
                named: dict[str, EvidenceItem] = {}
                for item in pool:
                    if item.named_by_question:
                        named.setdefault(item.doc_id, item)
                return self._from_fields(question, list(named.values())[: self.max_citations], trace, NAMED)
            lead = ANOTHER if pack.of_similar_cases else QUERY_SHOWS if first.shown_by_query_image else CLOSEST
            apart = bool(pack.matches) and not pack.subject and not pack.of_similar_cases
            more = items_apart(pool, pack.matches, self.max_claims - 1) if apart else []
            return self._from_fields(question, [first, *more], trace, lead, then=ANOTHER_MATCH)
        candidates, metadata = self._candidates(question, pool, pack.matches, pack.shared)
        if metadata:
            trace.append("Set aside as bookkeeping: " + "; ".join(metadata[:6]) + ".")
        if not candidates:
            # Only bookkeeping: fall back to the best item's text as written.
            best = max(pool, key=lambda i: (i.score * pack.matches.get(i.number, 1.0), -i.number))
            candidates = [Statement(text_of(best).rstrip("."), stems_of(text_of(best)), [best], support=1.0)]
        trace.append(
            ("What the evidence states, by support weighted by score and match: " if pack.matches else
             "What the evidence states, by score-weighted support: ")
            + "; ".join(
                f"'{c.text}' from {format_citation(numbers_of(c.sources))} (support {c.support:.0%}"
                + (f", matches {c.relevance:.0%} of the question's terms" if c.relevance else "")
                + (", states a change the question asks about" if c.reports_change else "")
                + ")"
                for c in candidates[:6]
            )
            + "."
        )
        candidates = clear_match_first(candidates, pack.matches, trace)
        top = candidates[0]
        chosen = [top]
        comparison = is_comparison(question, self.vocab)
        # evidence about a kind of thing is many subjects: another one that answers the question is said apart
        apart = bool(pack.matches) and not pack.subject and not comparison and not asks_agreement(question)
        others: list[Statement] = []
        # a head several subjects state ("CT scan" of two studies) is joined to its best body; another subject's body
        # of it is that subject's answer (said apart), not a complement of the first
        bodies = [c for c in candidates if c.head and stems_of(c.head) == stems_of(top.text)]
        top_docs = {i.doc_id for i in (bodies[0] if bodies else top).sources}
        room_apart = self.max_claims - 1 if apart else 0  # other subjects said besides the consensus's claims
        for cand in candidates[1:]:
            full = len(chosen) >= self.max_claims
            if (full and len(others) >= room_apart) or cand.history or cand.score < self.min_support_ratio * top.score:
                break
            if restates(cand, chosen + others):  # "low-pass filter" then "low-pass filter, R1 = 4.7k": one claim twice
                continue
            # a comparison: another state of the same compound document complements it; else one of its documents'
            if ((comparison and {witness(i) for i in top.sources} & {witness(i) for i in cand.sources})
                    or top_docs & {i.doc_id for i in cand.sources}):  # complements the top claim, not a rival of it
                chosen += [] if full else [cand]
            elif len(others) < room_apart and answers_apart(cand, [*chosen, *others], pack.matches, pack.shared,
                                                            heads=[top] if bodies else []):
                others.append(cand)
        agree_on_positions(chosen, pool, trace, pack.matches, self.vocab)
        for other in others:  # where another subject's finding sits is its own witnesses' to say
            agree_on_positions([other], pool, trace, pack.matches, self.vocab)
        if others:
            trace.append("Another subject answers the question too, said apart, not outvoted: "
                         + "; ".join(f"'{c.text}' from {format_citation(numbers_of(c.sources))}" for c in others) + ".")
        joined: set[frozenset[str]] = set()
        chosen = with_heads(chosen, trace, joined)
        others = with_heads(others, trace, joined)
        top = chosen[0]
        agreeing = sorted({i.number for c in chosen for i in c.sources})
        if len(agreeing) > 1:
            trace.append(f"Agreement: {format_citation(agreeing)} state the chosen content.")
        chosen += others
        stated = {source.number for c in chosen for source in c.sources}
        silent = [i for i in pool if i.number not in stated]
        if silent:
            trace.append(
                f"Conflict or silence: {format_citation(numbers_of(silent))} state(s) none of it"
                + (f" (e.g. '{candidates[len(chosen)].text}')" if len(candidates) > len(chosen) else "")
                + "; outweighed."
            )
        agreement = None
        if asks_agreement(question):
            stating = list(dict.fromkeys(i for c in candidates for i in c.sources))
            agreement = agreeing_views(question, top.sources, stating, pool, self._bookkeeping)
            if agreement is None:
                trace.append("The question asks what views show together, but the evidence holds no two views of "
                             "one multiview set to compare.")
            elif agreement.agrees:
                trace.append(
                    f"The question asks what views show together: {format_citation(numbers_of(agreement.items))}, "
                    f"views of one multiview set ({agreement.view_set}), each state '{top.text}'."
                )
            else:
                trace.append(
                    f"The question asks what views show together: of {format_citation(numbers_of(agreement.items))}, "
                    f"views of one multiview set ({agreement.view_set}), {format_citation(numbers_of(agreement.missing))} "
                    f"do(es) not state '{top.text}' (a view whose text is only bookkeeping cannot be compared), "
                    "so the answer does not say they agree."
                )
                agreement = None
        trace.append(
            f"Chose {len(chosen)} statement(s) with the most support"
            + (f"; the next had {candidates[len(chosen)].score / top.score:.0%} of the best score" if len(candidates) > len(chosen) and top.score > 0 else "")
            + "."
        )
        claims = []
        for cand in chosen:
            cited = numbers_of(cand.sources[: self.max_citations])
            text = cand.text
            if agreement is not None and cand is top:  # the claim cites every view that states it
                views = list(agreement.items)
                rest = [i for i in cand.sources if i not in views]
                cited = numbers_of((views + rest)[: max(self.max_citations, len(views))])
                text = agreement.word(text)
            claims.append(Claim(text=_sentence(text, format_citation(cited)), citations=cited))
        trace.append(f"Answer written as {len(claims)} claim(s), each citing the evidence that states it.")
        text = " ".join(claim.text for claim in claims)
        return Answer(text=text, reasoning=tuple(trace), claims=tuple(claims), generator=self.name)

    def _in_sequence_order(self, question: str, pack: EvidencePack, sequence: SequenceInEvidence,
                           trace: list[str]) -> Answer | None:
        """Each member of `sequence` answered from its own items, in order, led by its id and place
        (kira.reasoning.sequence_answer); None when the members' main statements are the same."""
        answers: list[MemberAnswer] = []
        for member in sequence.members:
            numbers = {i.number for i in member.items}
            own = EvidencePack(pack.question, items=member.items, subject=pack.subject,
                               matches={n: r for n, r in pack.matches.items() if n in numbers})
            if shown(member.items[0]).human_text:
                if self._states_content(question, member.items):  # else only bookkeeping: it abstains
                    answers.append(MemberAnswer(member, self.generate(question, own), led=True))
            else:  # "garden_may (garden-survey, 1 of 2) has no caption; ..."
                lead = NAMED + " " + sequence.place(member).replace("{", "{{").replace("}", "}}")
                answers.append(MemberAnswer(member, self._from_fields(question, [member.items[0]], [], lead), led=False))
        claims = claims_in_order(sequence, answers, max_citations=self.max_citations)
        if claims is None:
            return None
        trace.append(trace_line(sequence))
        trace.append(f"Answer written as {len(claims)} claim(s), in sequence order, each citing the evidence of the "
                     "member(s) it is about.")
        return Answer(text=" ".join(c.text for c in claims), reasoning=tuple(trace), claims=tuple(claims),
                      generator=self.name)

    def _from_fields(self, question: str, items: list[EvidenceItem], trace: list[str], lead: str, *,
                     then: str | None = None) -> Answer:
        """One claim per item from its fields (kira.reasoning.field_answer), each opening with `lead`
        (`item_sentence`): the closest item, or each document the question names; with `then`, the items after
        the first open with it ("Another match, IMG_1010, ...")."""
        appearance = asks_about_appearance(question, getattr(self.profile, "appearance_words", ()))
        best = items[0]
        trace.append(
            f"The first item, [Evidence {best.number}] {best.doc_id}, has no caption: the answer says what "
            + ("each named document's" if len(items) > 1 else "its")
            + " fields record (tags, text read, classifier labels, metadata)"
            + (", and measured looks, since the question asks about appearance" if appearance else
               "; measured looks are not a finding, since the question does not ask about appearance") + ".")
        if all(shown(i).empty for i in items) and not (appearance and any(shown(i).looks for i in items)):
            trace.append("Nothing recorded says what it shows.")

        def sentence(item: EvidenceItem, lead: str) -> str:  # a document id opening it keeps its case ("img_1005 ...")
            text = item_sentence(item, appearance=appearance, lead=lead)
            citation = format_citation((item.number,))
            return f"{text} {citation}." if lead.startswith("{doc}") else _sentence(text, citation)

        claims = tuple(Claim(text=sentence(i, lead if n == 0 or then is None else then), citations=(i.number,))
                       for n, i in enumerate(items))
        if then is not None and len(items) > 1:
            trace.append(f"{format_citation(numbers_of(items[1:]))} clearly match(es) the question too: other images, "
                         "each said apart.")
        trace.append(f"Answer written as {len(claims)} claim(s), each citing the item it describes.")
        return Answer(text=" ".join(c.text for c in claims), reasoning=tuple(trace), claims=claims,
                      generator=self.name)

    def describe(self) -> dict[str, Any]:
        """Settings for the rationale card's config summary."""
        return {
            "generator": self.name,
            "profile": self.profile.name or "(empty)",
            "max_claims": self.max_claims,
            "min_support_ratio": self.min_support_ratio,
            "max_citations": self.max_citations,
        }
