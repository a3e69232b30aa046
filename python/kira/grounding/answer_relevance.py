"""The Generate and Verify stages' use of kira.reasoning.relevance: abstention, confidence, topic.

* `relevant_first`: when the nearest item does not match the question, the items that do go first.
* `judge`: the relevance verdict of the evidence for the question (None without a text encoder).
* `on_topic_similar`: a text question's similar cases are only those that match what it asks besides
  its subject's name: another subject's evidence retrieved for a passing word ("colour") is no similar case.
* `abstention`: the answer when nothing in the evidence is relevant: it says so plainly and names
  the closest items (kira.reasoning.field_answer), has no claims, ``abstained=True``.
* `asked_besides_subject`: the question's words less its subject's name (what it asks of the subject).
* `subject_shows`: what the subject's items show, by which a question about the subject alone judges its
  similar cases.
* `on_topic`: after verification, a claim that cites only items the verdict found irrelevant does
  not answer the question and is marked a hallucination risk, however well its words are supported.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from typing import Any, Sequence

from kira.grounding.pieces import built_with_this_text_encoder, stored_vectors
from kira.models.protocols import TextEncoder
from kira.models.stack import ModelStack
from kira.query_state import QueryState, StageContext
from kira.reasoning.field_answer import abstention_text
from kira.reasoning.question_form import asked_phrase, asks_yes_no
from kira.reasoning.relevance import MAX_ITEMS, Relevance, RelevanceJudge, question_words
from kira.reasoning.shown import shown, shows_text
from kira.reasoning.types import Answer, EvidenceItem, EvidencePack

log = logging.getLogger(__name__)

_JudgeKey = tuple[tuple[str, ...], tuple[str, ...]]  # (appearance words, label vocabulary)
_JUDGES: weakref.WeakKeyDictionary[TextEncoder, dict[_JudgeKey, RelevanceJudge]] = weakref.WeakKeyDictionary()


def relevance_judge(encoder: TextEncoder, appearance_words: tuple[str, ...] = (),
                    vocabulary: tuple[str, ...] = ()) -> RelevanceJudge:
    """One `RelevanceJudge` per text encoder, appearance words and label vocabulary (its probe and vocabulary
    vectors are encoded once)."""
    key = (tuple(appearance_words), tuple(vocabulary))
    try:
        judges = _JUDGES.setdefault(encoder, {})
    except TypeError:  # an encoder that cannot be weakly referenced
        return RelevanceJudge(encoder, appearance_words=appearance_words, vocabulary=vocabulary)
    if key not in judges:
        judges[key] = RelevanceJudge(encoder, appearance_words=appearance_words, vocabulary=vocabulary)
    return judges[key]


def label_vocabulary(models: ModelStack) -> tuple[str, ...]:
    """Every label name the stack's image classifier can give (its captioner's ``vocabulary``), () without one."""
    return tuple(getattr(getattr(models, "captioner", None), "vocabulary", ()) or ())


def judge(ctx: StageContext, state: QueryState, pack: EvidencePack, question: str | None = None, *,
          by_name: bool = True, vocabulary: bool = True, asked_of: Sequence[EvidenceItem] = ()) -> Relevance | None:
    """The verdict on `pack` for the state's question (or `question`); None when the stack has no text encoder.
    `by_name` as in `RelevanceJudge.judge`; `vocabulary` False judges without the classifier-vocabulary test;
    `asked_of`: items whose stored text vectors are read with the pack's, for a `question` made of what they show."""
    encoder = getattr(ctx.models, "text", None)
    if encoder is None or not callable(getattr(encoder, "encode", None)):
        return None
    words = tuple(getattr(ctx.profile, "appearance_words", ()) or ())
    extra: dict[str, Any] = {}
    vector = state.query.embeds_question(state.question) if state.query is not None and question is None else None
    if vector is not None:
        extra["question_vector"] = vector  # the question as the query encoding embedded it
    if pack.items and built_with_this_text_encoder(ctx.kb, ctx.models):
        extra["known"] = stored_vectors(ctx.kb, [*pack.items, *asked_of], getattr(encoder, "dim", 0))
    judge_ = relevance_judge(encoder, words, label_vocabulary(ctx.models) if vocabulary else ())
    return judge_.judge(state.question if question is None else question, pack, image_query=state.image_query,
                        by_name=by_name, **extra)


MAX_SUBJECT_TEXTS = 3
"""At most this many of a subject's distinct texts say what it shows when its similar cases are judged."""


def subject_shows(pack: EvidencePack) -> str:
    """What the subject's items show (kira.reasoning.shown.shows_text), each distinct text once, joined by ". ";
    "" when nothing recorded says (or the pack names no subject). One text is a stored piece: nothing is encoded."""
    if not pack.subject:
        return ""
    texts = dict.fromkeys(t for t in (shows_text(i) for i in pack.items) if t)
    return ". ".join(list(texts)[:MAX_SUBJECT_TEXTS])


def asked_besides_subject(state: QueryState, pack: EvidencePack) -> list[str]:
    """The question's content words less its subject's name: the identifier terms it named the subject by and
    every word of the subject's document ids ("is there a dog in IMG_1001?": 'dog', not 'img' or '1001')."""
    named = {t.lower() for t in state.facts.named_terms}
    named |= {t for item in pack.items for t in question_words(item.doc_id)}
    return [w for w in question_words(state.question) if w.lower() not in named]


def on_topic_similar(ctx: StageContext, state: QueryState, pack: EvidencePack) -> tuple[EvidencePack, list[str]]:
    """`pack` with only the similar cases that match the question less its subject's name ("what colour is the
    coffee cup?" naming the document 'coffee' asks other subjects about a cup; a photo whose caption says
    "colour" is no similar case; nor is one that nothing recorded says anything of), and the doc ids of those
    left out. A question with nothing left to judge by ("what does IMG_1001 show?") asks about its subject
    alone: its similar cases are those that show what the subject shows (`subject_shows`; a photo labelled
    'Egyptian cat' is no similar case to one labelled 'espresso'), judged without the classifier-vocabulary
    test (another cat's 'tabby cat' is like 'Egyptian cat', though the classifier had that name too); all stay
    when nothing recorded says what the subject shows. With a query image the similar cases are what the image
    looks like, and stay."""
    if not pack.similar or state.image_query:
        return pack, []
    rest = asked_besides_subject(state, pack)
    about = " ".join(rest) or subject_shows(pack)
    verdict = (judge(ctx, state, pack.similar_pack(), about, vocabulary=bool(rest), asked_of=() if rest else pack.items)
               if about else None)
    if verdict is None or verdict.score is None:
        return pack, []
    judged = dict(verdict.items)
    near = {n for n, _, _ in verdict.near}
    unjudged = {i.number for i in pack.similar[MAX_ITEMS:]}  # past the judge's first items

    def on_topic(item: EvidenceItem) -> bool:  # a match; or, of those never judged, one that shows something
        if item.number in judged or item.number in near:
            return verdict.matches(item.number)
        return item.number in unjudged and not shown(item).empty

    kept = [i for i in pack.similar if on_topic(i)]
    if len(kept) == len(pack.similar):
        return pack, []
    off = list(dict.fromkeys(i.doc_id for i in pack.similar if not on_topic(i)))
    return EvidencePack.from_items(pack.question, pack.items, pack.dropped, similar=kept, subject=pack.subject), off


def relevance_note(verdict: Relevance) -> dict[str, Any]:
    """The verdict as JSON-able data for ``Result.trace["relevance"]``."""
    return {"relevant": verdict.relevant, "score": verdict.score, "support": verdict.support,
            "confidence": verdict.confidence, "best": verdict.best, "standout": verdict.standout,
            "basis": verdict.basis, "items": [list(p) for p in verdict.items], "grade": verdict.grade,
            "near": [list(p) for p in verdict.near], "unmatched": verdict.unmatched,
            "unheld": verdict.unheld}


def relevance_step(verdict: Relevance) -> str:
    """One reasoning step saying how relevance and confidence were found."""
    if verdict.standout is None and verdict.score is not None:
        return ("Relevance: nothing recorded in the evidence says what it shows (no caption, tags, text or "
                "confident classifier label), so nothing in it can match the question; confidence 0.")
    if verdict.score is None:
        why = {"identifier": "the question names its subject, whose items are the evidence",
               "image": "the query image is what is asked about"}.get(verdict.basis, "nothing to measure")
        return f"Relevance: not measured ({why}); confidence is not given."
    if verdict.grade == "low":
        number, label, v = verdict.near[0]
        return (f"Relevance: nothing in the evidence matches the question well (relevance {verdict.score:.2f}), but "
                f"[Evidence {number}] is known only by its classifier labels and '{label}' is among the labels nearest "
                f"the question ({v:+.1f} robust standard deviations beyond the classifier's other labels), so the "
                f"answer says what the classifier saw, with low confidence ({verdict.confidence:.2f}).")
    text = (f"Relevance: what [Evidence {verdict.best}] shows matches the question "
            f"{verdict.standout:+.1f} robust standard deviations beyond everyday phrases' matches with it "
            f"(relevance {verdict.score:.2f}; below 0.50 the answer abstains)")
    if verdict.support < 1.0:
        text += f"; it is known only by its classifier labels, whose probability ({verdict.support:.2f}) bounds the confidence"
    if verdict.unheld:
        text += f"; no record holds the question's '{verdict.unheld}', so the match is by meaning alone"
    return text + f"; confidence {verdict.confidence:.2f}."


def relevant_first(pack: EvidencePack, verdict: Relevance) -> tuple[EvidencePack, Relevance]:
    """`pack` unchanged when its first item is the verdict's best (among the items that match, the one whose
    source is surest: kira.reasoning.relevance); else with the best first, then the other items that
    match (r >= 0.5, or for a low grade the items whose label is near the question, nearest first), then those
    that do not, each group in retrieval order, renumbered (the verdict's numbers follow). An answer is written
    from what matches the question, not from a nearer item that does not, and leads with the item its
    confidence was measured on ('espresso' p 0.99 before 'espresso maker' p 0.38 for "a cup of coffee")."""
    if not pack.items or verdict.score is None:
        return pack, verdict  # nothing measured: the subject or the query image leads, in retrieval order
    best = verdict.best if verdict.best is not None and verdict.matches(verdict.best) else None
    if verdict.matches(pack.items[0].number) and not verdict.near and best in (None, pack.items[0].number):
        return pack, verdict
    near = [n for n, _, _ in verdict.near]
    order = sorted(pack.items, key=lambda i: (i.number != best, not verdict.matches(i.number),
                                              near.index(i.number) if i.number in near else len(near)))
    if [i.number for i in order] == [i.number for i in pack.items]:
        return pack, verdict
    new = EvidencePack.from_items(pack.question, order, pack.dropped, similar=pack.similar, subject=pack.subject)
    number = {old.number: fresh.number for old, fresh in zip(order, new.items)}
    best = number.get(verdict.best, verdict.best) if verdict.best is not None else None
    verdict = dataclasses.replace(verdict, best=best,
                                  items=tuple((number.get(n, n), r) for n, r in verdict.items),
                                  near=tuple((number.get(n, n), lb, v) for n, lb, v in verdict.near))
    return new, verdict


def abstention(state: QueryState, pack: EvidencePack, verdict: Relevance) -> Answer:
    """The answer that says nothing in the knowledge base matches, naming the closest items."""
    closeness = dict(verdict.items)  # the closest in meaning first, then in retrieval order
    ordered = sorted(pack.items, key=lambda i: (-closeness.get(i.number, -1.0), i.number))
    asked = state.question  # a yes/no question quotes what it asks: "matches 'bicycle'", not 'is there a bicycle?'
    if asks_yes_no(state.question) and verdict.asked:
        asked = asked_phrase(state.question, verdict.asked)
    text = abstention_text(asked, ordered, image_query=state.image_query)
    reasoning = (f"Question: {state.question}" if state.question else "Question: (image query, no text)",
                 f"Considered {len(pack.items)} evidence item(s): "
                 + "; ".join(f"[Evidence {i.number}] {i.doc_id}" for i in pack.items) + ".",
                 relevance_step(verdict),
                 "No evidence item shows what the question asks about, so the answer says so instead of "
                 "describing the nearest items as if they matched.")
    log.info("abstained on %r: best relevance %s", state.question, verdict.score)
    return Answer(text=text, reasoning=reasoning, claims=(), generator="abstention",
                  confidence=verdict.confidence, abstained=True)


def on_topic(state: QueryState, answer: Answer) -> Answer:
    """`answer` with every claim that cites only items the state's relevance verdict found irrelevant marked a
    hallucination risk (module docstring)."""
    verdict = state.relevance
    if verdict is None or verdict.score is None or answer.abstained:
        return answer
    relevant = {int(n) for n, r in verdict.items if r >= 0.5} | {int(n[0]) for n in verdict.near}
    claims = []
    changed = 0
    for claim in answer.claims:
        if claim.citations and not relevant & set(claim.citations) and not claim.hallucination_risk:
            claim = dataclasses.replace(claim, hallucination_risk=True)
            changed += 1
        claims.append(claim)
    if not changed:
        return answer
    step = f"{changed} claim(s) cite only evidence that does not match the question: not shown as grounded."
    return dataclasses.replace(answer, claims=tuple(claims), reasoning=(*answer.reasoning, step))
