"""The subject invariant: an answer never states about one subject what only another's evidence states.

A subject is what a compound document groups (one person's visits, one design's
revisions, one site's acquisitions) or a single document. When a question names one, the
evidence pack holds that subject's items in ``items`` and everything else in ``similar``
(`EvidencePack`). `enforce_subject` is applied where claims are made, whatever generator
wrote them:

* a claim about the subject keeps only citations of the subject's own items;
* a claim that cited only other subjects' items is not a claim about the subject: it moves
  to the similar-case section;
* similar-case claims cite only similar items, and `Answer.text` shows them apart, under
  `SIMILAR_HEADING`, never merged into the subject's sentences.

A query image that is no stored image is a subject the knowledge base holds nothing about: what
the evidence found for it states is about other images. `attributed_to_stored` opens such an
answer by saying so ("Stored images found for the query image show: Black and white photo of a man
with a camera [Evidence 1, 5]."; the citations and the card name them), so a photo of an astronaut
is not answered "An orange cat lying on a rug" as if it showed one.
"""

from __future__ import annotations

import dataclasses

from kira.reasoning.citations import format_citation
from kira.reasoning.shown import shown
from kira.reasoning.types import Answer, Claim, EvidencePack, strip_citation_marks

SIMILAR_HEADING = "Similar cases (other subjects, for comparison only):"
"""The label that opens the similar-case section of an answer's text."""


def _cite(claim: Claim, numbers: tuple[int, ...]) -> Claim:
    """`claim` citing `numbers` only, its text's citation marks rewritten to match."""
    plain = strip_citation_marks(claim.text).rstrip(". ")
    text = f"{plain} {format_citation(numbers)}." if numbers else f"{plain}."
    return dataclasses.replace(claim, text=text, citations=numbers)


def enforce_subject(answer: Answer, pack: EvidencePack, similar: Answer | None = None) -> Answer:
    """`answer` (about ``pack.items``) and `similar` (about ``pack.similar``) as one answer that keeps the
    subject invariant (module docstring). With no similar items, `answer` is returned with any citation of a
    number outside ``pack.items`` removed."""
    own = set(pack.numbers)
    others = {item.number for item in pack.similar}
    subject_claims: list[Claim] = []
    similar_claims: list[Claim] = []
    for claim in answer.claims:
        mine = tuple(n for n in claim.citations if n in own)
        theirs = tuple(n for n in claim.citations if n in others)
        if mine:
            subject_claims.append(claim if mine == claim.citations else _cite(claim, mine))
        elif theirs:
            similar_claims.append(_cite(claim, theirs))
        else:
            subject_claims.append(claim)  # cites nothing (or only invalid numbers): the verifier flags it
    for claim in (similar.claims if similar is not None else ()):
        theirs = tuple(n for n in claim.citations if n in others)
        if theirs:
            similar_claims.append(claim if theirs == claim.citations else _cite(claim, theirs))
    if len(subject_claims) == len(answer.claims) and not similar_claims and all(
            a is b for a, b in zip(subject_claims, answer.claims)):
        return answer
    text = " ".join(c.text for c in subject_claims) if subject_claims else answer.text
    if not subject_claims and answer.claims:
        text = "The evidence about the subject asked about states nothing the answer could cite."
    if similar_claims:
        text = f"{text}\n\n{SIMILAR_HEADING} " + " ".join(c.text for c in similar_claims)
    reasoning = answer.reasoning
    if similar_claims:
        reasoning = (*reasoning, f"{len(similar_claims)} statement(s) from other subjects' evidence "
                                 f"({format_citation(tuple(sorted(others)))}) are shown apart as similar cases.")
    return dataclasses.replace(answer, text=text, claims=tuple(subject_claims), similar=tuple(similar_claims),
                               reasoning=tuple(reasoning))


def attributed_to_stored(answer: Answer, pack: EvidencePack, *, image_query: bool) -> Answer:
    """`answer` opened by the words that say its claims come from stored images found for it, when the query image
    is no stored image (no item is `EvidenceItem.shown_by_query_image`) and the first item has a person's words
    (module docstring); an answer that already names its item (no caption: kira.reasoning.field_answer's leads),
    abstains or makes no claim is returned unchanged."""
    if (not image_query or answer.abstained or not answer.claims or not pack.items
            or any(item.shown_by_query_image for item in pack.items) or not shown(pack.items[0]).human_text):
        return answer
    by_number = {item.number: item for item in pack.items}
    docs = {by_number[n].doc_id for c in answer.claims for n in c.citations if n in by_number}
    if not docs:
        return answer
    lead = ("A stored image found for the query image shows:" if len(docs) == 1
            else "Stored images found for the query image show:")
    step = ("The query image is no stored image: what the answer states is what the stored images found for it "
            f"({', '.join(sorted(docs))}) show, and the answer says so.")
    return dataclasses.replace(answer, text=f"{lead} {answer.text}", reasoning=(*answer.reasoning, step))
