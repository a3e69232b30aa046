"""What the answer to a yes/no question about one subject opens with.

A person who asks "is this a dog?" with a photo, or "does IMG_1027 show a dog?", reads the answer
for a yes or a no. The answer itself says what the evidence shows ("the image classifier labels
it 'espresso'"); `yes_no_notice` gives the sentence that goes before it, from the relevance
judge's verdict on what the question asks of its subject (kira.reasoning.relevance):

* **The subject** is the stored document a query image clearly shows (a copy, crop or mirror) or the
  documents the question names (`EvidencePack.subject`). A question about a query image that shows no
  stored document is judged on the images found for it; only a missing match is said then, about those
  images by name, since whether *they* show a dog is no yes about the query image. A text question with
  no subject ("is there a cat?") asks about the knowledge base: a match is said, and when nothing matches
  the answer abstains (kira.grounding.answer_relevance.abstention), which is its no.
* **What is asked** is the question's words less the subject's name ("is there a dog in IMG_1004?" asks
  'dog': kira.grounding.answer_relevance.asked_besides_subject), judged against the subject's items alone.
* **Nothing recorded matches**: "Nothing recorded about IMG_1027 matches 'dog' (it has no caption: kira
  knows it only by an image classifier's labels, which may not name what it shows)."
* **An image classifier's labels match**: "Yes, by the image classifier's labels: what is recorded about
  IMG_1004 matches 'cat'." It opens "Possibly" instead when the match's confidence (its relevance times the
  label's probability) is under `LOW_CONFIDENCE`, the point below which cards show a low-confidence banner; a
  yes names only the images whose match reaches it.
* **What a person wrote (a caption, tags, metadata) or OCR read matches**: no opening sentence. kira does not
  read negation: "no fracture" matches 'fracture' as closely as "a hairline fracture" does, so only the
  person's words, which the answer quotes next, can say yes or no. But when they match by meaning alone, no
  record of the subject holding any word asked (not even negated), the answer opens "Nothing recorded about
  scan_04 mentions 'fracture'." before quoting them: inside a domain every record matches every question of
  it by meaning (kira.grounding.unheld_words).
* A label only near the question (kira.reasoning.relevance's graded decision: 'tripod' for "a man with a
  camera"), a question with nothing left to ask once the subject's name is out ("is this IMG_1004?"), or one
  that also asks what or which (kira.reasoning.question_form.asks_yes_no) gets no opening sentence.
"""

from __future__ import annotations

from kira.grounding.answer_relevance import asked_besides_subject, judge
from kira.grounding.opening import Opening
from kira.knowledge_base.lexical import lexical_terms
from kira.query_state import QueryState, StageContext
from kira.reasoning.field_answer import known_only_by_labels, labels_only_caveat, spoken_list
from kira.reasoning.question_form import asked_phrase, asks_yes_no
from kira.reasoning.relevance import LOW_CONFIDENCE, Relevance
from kira.reasoning.shown import asks_about_appearance, shown
from kira.reasoning.types import EvidenceItem, EvidencePack

MAX_NAMED_DOCUMENTS = 3
"""A notice names at most this many documents; more are counted ("the 5 documents found for ward 3")."""


def _docs(items: list[EvidenceItem]) -> list[str]:
    return list(dict.fromkeys(i.doc_id for i in items))


def _about(items: list[EvidenceItem], subject: str) -> str:
    docs = _docs(items)
    if len(docs) <= MAX_NAMED_DOCUMENTS or not subject:
        return spoken_list(docs)
    return f"the {len(docs)} documents found for {subject}"


def _nothing_matches(items: list[EvidenceItem], phrase: str, appearance_words: tuple[str, ...], subject: str,
                     about: str) -> Opening:
    """"Nothing recorded about IMG_1027 matches 'dog' (...)." and why; `about` names what was asked about."""
    text = f"Nothing recorded about {_about(items, subject)} matches '{phrase}'"
    if not asks_about_appearance(phrase, appearance_words):  # "is it dark?": measured, not guessed, no caveat
        caveat = labels_only_caveat(items)
        if not caveat and all(shown(i).empty for i in items):
            caveat = f"nothing recorded says what {'it shows' if len(_docs(items)) == 1 else 'they show'}"
        text += f" ({caveat})" if caveat else ""
    step = (f"The question asks yes or no about {about}, and nothing recorded of the evidence found for it matches "
            f"what it asks ('{phrase}'), so the answer says so first.")
    return Opening(text + ".", step, {"asked": phrase, "answer": "nothing recorded", "documents": _docs(items)})


def _matched(items: list[EvidenceItem], verdict: Relevance) -> list[EvidenceItem]:
    """The items the verdict judged a match for what was asked (r >= 0.5)."""
    scores = dict(verdict.items)
    return [i for i in items if scores.get(i.number, 0.0) >= 0.5]


def _labels_match(items: list[EvidenceItem], verdict: Relevance, step_about: str, question: str | None
                  ) -> Opening | None:
    """"Yes, by the image classifier's labels: ..." when the items that match are all known only by labels."""
    matched = _matched(items, verdict)
    if not matched or verdict.basis != "text" or not all(known_only_by_labels(i) for i in matched):
        return None
    scores = dict(verdict.items)
    sure = {i.number: scores[i.number] * shown(i).certainty for i in matched}
    confidence = max(sure.values())
    lead = "Yes" if confidence >= LOW_CONFIDENCE else "Possibly"
    if lead == "Yes":  # the yes names the images it rests on, not an unsure label beside them
        matched = [i for i in matched if sure[i.number] >= LOW_CONFIDENCE]
    about, phrase = _about(matched, ""), asked_phrase(question, verdict.asked)
    text = f"{lead}, by the image classifier's labels: what is recorded about {about} matches '{phrase}'."
    step = (f"The question asks yes or no about {step_about}; the image classifier's labels of {about} match what "
            f"it asks ('{phrase}', confidence {confidence:.2f}), so the answer opens with "
            f"'{lead.lower()}'. A caption or other text a person wrote would be quoted instead of read as a yes: "
            "kira does not read negation.")
    return Opening(text, step, {"asked": phrase, "answer": lead.lower(), "documents": _docs(matched),
                                "confidence": round(confidence, 3)})


def _not_mentioned(items: list[EvidenceItem], verdict: Relevance, subject: str, question: str | None
                   ) -> Opening | None:
    """"Nothing recorded about scan_04 mentions 'fracture'." when what matches the question by meaning is what a
    person wrote (or OCR read) and no record of the subject holds any word it asks, not even negated ("no
    fracture" holds 'fracture', and is quoted next); None otherwise."""
    matched = _matched(items, verdict)
    if not matched or verdict.basis != "text" or any(known_only_by_labels(i) for i in matched):
        return None
    asked = set(lexical_terms(verdict.asked))
    held = {t.removeprefix("not:") for i in items for t in lexical_terms(shown(i).content_text())}
    if not asked or asked & held:
        return None
    about, phrase = _about(items, subject), asked_phrase(question, verdict.asked)
    step = (f"The question asks yes or no about {about}; what is recorded about it matches what it asks ('{phrase}') "
            "by meaning alone: no record of it holds those words, so the answer says so before quoting the record.")
    return Opening(f"Nothing recorded about {about} mentions '{phrase}'.", step,
                   {"asked": phrase, "answer": "not mentioned", "documents": _docs(items)})


def yes_no_notice(ctx: StageContext, state: QueryState, pack: EvidencePack, verdict: Relevance | None,
                  appearance_words: tuple[str, ...] = ()) -> Opening | None:
    """The opening of the answer to a yes/no question about one subject (module docstring); None for none.
    `verdict` is the Generate stage's verdict on `pack` for the question."""
    if verdict is None or not pack.items or not asks_yes_no(state.question):
        return None
    items = list(pack.items)
    if state.image_query:
        if verdict.unmatched:
            return _nothing_matches(items, asked_phrase(state.question, verdict.unmatched), appearance_words,
                                    pack.subject, "the query image")
        if not pack.subject or verdict.score is None:  # no stored image it clearly shows: no yes about it
            return None
        return _labels_match(items, verdict, "the stored image the query image shows", state.question)
    if not pack.subject:  # "is there a cat?" asks whether the knowledge base holds one (none: it abstains)
        return None if verdict.score is None else _labels_match(items, verdict, "this knowledge base", state.question)
    if not any(i.named_by_question for i in items):
        return None
    asked = asked_besides_subject(state, pack)
    if not asked:
        return None
    mine = judge(ctx, state, pack, " ".join(asked), by_name=False)
    if mine is None or mine.score is None:
        return None
    if mine.relevant:  # a match, or a label only near the question (graded decision): no no
        if mine.near and mine.score < 0.5:
            return None
        return (_labels_match(items, mine, _about(items, pack.subject), state.question)
                or _not_mentioned(items, mine, pack.subject, state.question))
    return _nothing_matches(items, asked_phrase(state.question, mine.asked), appearance_words, pack.subject,
                            _about(items, pack.subject))


__all__ = ["MAX_NAMED_DOCUMENTS", "yes_no_notice"]
