"""Sentences about an image nobody described in words: from its fields, as a person would write them.

When the closest evidence has no caption (nor passage), the template generator does not
stitch fragments of the machine description together ("Labels [Evidence 1]."); it says what
is known about that image and where it comes from:

    "The closest match, IMG_1005, has no caption; the image classifier labels it
    'space shuttle' (p 0.62)."

Tags, text read by OCR and metadata are named as such; the measured appearance is said only
when the question asks about appearance (kira.reasoning.shown), in words without figures.
The abstention sentence of kira.reasoning.relevance's verdict is written here too.
"""

from __future__ import annotations

from typing import Sequence

from kira.reasoning.shown import Shown, shown
from kira.reasoning.types import EvidenceItem

MAX_LABELS = 2  # classifier labels named per image
MAX_QUOTE = 80  # characters of OCR text quoted
MAX_METADATA = 3  # metadata entries named


def spoken_list(values: Sequence[str], conjunction: str = "and") -> str:
    """"a", "a and b", "a, b and c" ("a or b" with `conjunction` "or"): `values` as a sentence lists them."""
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + f" {conjunction} {values[-1]}"


def quoted_list(values: Sequence[str], conjunction: str = "and") -> str:
    """"'a'", "'a' and 'b'", "'a', 'b' or 'c'" (with `conjunction` "or"): `values` quoted as a sentence lists them."""
    return spoken_list([f"'{v}'" for v in values], conjunction)


def label_phrase(view: Shown) -> str:
    """"the image classifier labels it 'space shuttle' (p 0.62)" ("" without labels)."""
    if not view.labels:
        return ""
    named = [f"'{name}' (p {p:.2f})" for name, p in view.labels[:MAX_LABELS]]
    return "the image classifier labels it " + " or ".join(named)


def fact_phrases(view: Shown, *, appearance: bool) -> list[str]:
    """What is known about an image, one phrase per field (tags, OCR text, labels, metadata, looks)."""
    out: list[str] = []
    if view.tags:
        out.append(f"it is tagged {quoted_list(list(view.tags)[:6])}")
    if view.text_read:
        words = " ".join(view.text_read)
        words = words if len(words) <= MAX_QUOTE else words[:MAX_QUOTE].rsplit(" ", 1)[0] + " ..."
        out.append(f"the text read in it is '{words}'")
    if view.labels:
        out.append(label_phrase(view))
    if view.metadata:
        entries = [f"{k} {v}" for k, v in list(view.metadata.items())[:MAX_METADATA]]
        out.append("its metadata gives " + ", ".join(entries))
    if appearance and view.looks:
        out.append("measured, it is " + ", ".join(view.looks))
    return out


CLOSEST = "The closest match, {doc},"
QUERY_SHOWS = "The query image shows {doc}, which"
ANOTHER = "Another image, {doc},"
ANOTHER_MATCH = "Another match, {doc},"
NAMED = "{doc}"
"""`item_sentence` leads: the closest item; the document a query image clearly shows (a copy, crop or mirror of
it); a similar case, another subject's image; after the closest, another image that clearly matches the question
too; a document the question names ("what does IMG_1005 show?": it is no "closest match", it is what was asked
about)."""


def item_sentence(item: EvidenceItem, *, appearance: bool, lead: str = CLOSEST) -> str:
    """One sentence about an image without a caption, e.g. "The closest match, IMG_1005, has no caption;
    the image classifier labels it 'space shuttle' (p 0.62)" (no final full stop, no citation). lead: how the
    sentence names the image, with ``{doc}`` for its id (`CLOSEST`, `QUERY_SHOWS`, `ANOTHER`, `NAMED`)."""
    view = shown(item)
    name = lead.format(doc=item.doc_id)
    if view.human_text:
        return f"{name} reads: {view.human_text.rstrip('.')}"
    facts = fact_phrases(view, appearance=appearance)
    if facts:
        return f"{name} has no caption; " + "; ".join(facts)
    if appearance and not view.looks:
        return f"{name} has no caption, and its appearance was not measured"
    return (f"{name} has no caption, tags or text, and the image classifier gives it no confident label, "
            "so nothing recorded says what it shows")


def closest_summary(item: EvidenceItem) -> str:
    """A short "IMG_1002 (labelled 'tabby cat', p 0.55)" naming an item and what it shows."""
    view = shown(item)
    if view.human_text:
        text = view.human_text.strip().rstrip(".")
        text = text if len(text) <= 60 else text[:60].rsplit(" ", 1)[0] + " ..."
        return f"{item.doc_id} ('{text}')"
    if view.tags:
        return f"{item.doc_id} (tagged {quoted_list(list(view.tags)[:3])})"
    if view.labels:
        name, p = view.labels[0]
        return f"{item.doc_id} (labelled '{name}', p {p:.2f})"
    if view.text_read:
        return f"{item.doc_id} (text '{' '.join(view.text_read)[:40]}')"
    return f"{item.doc_id} (no caption or label)"


def abstention_text(question: str, items: Sequence[EvidenceItem], *, image_query: bool = False,
                    max_items: int = 3) -> str:
    """"Nothing in this knowledge base matches 'a brick wall'; the closest items are IMG_1002 (labelled
    'tabby cat', p 0.55) [Evidence 2] and IMG_1001 (no caption or label) [Evidence 1]." Each closest item
    cites its evidence number, since they are named closest in meaning first, not in the card's order."""
    asked = f"'{question.strip()}'" if question and question.strip() else "the query image"
    if image_query and question and question.strip():
        asked = f"'{question.strip()}' about the query image"
    docs: list[EvidenceItem] = []
    for item in items:
        if item.doc_id not in {d.doc_id for d in docs}:
            docs.append(item)
    named = [closest_summary(i) + (f" [Evidence {i.number}]" if i.number > 0 else "") for i in docs[:max_items]]
    if not named:
        return f"Nothing in this knowledge base matches {asked}."
    closest = spoken_list(named)
    noun = "the closest item is" if len(named) == 1 else "the closest items are"
    text = f"Nothing in this knowledge base matches {asked}; {noun} {closest}."
    caveat = labels_only_caveat(docs[:max_items])  # say how little "nothing matches" rests on
    return f"{text} {caveat[:1].upper()}{caveat[1:]}." if caveat else text


def labels_only_caveat(items: Sequence[EvidenceItem]) -> str:
    """"it has no caption: kira knows it only by an image classifier's labels, which may not name what it shows"
    (plural for several documents) when every one of `items`' documents is known only by classifier labels;
    "" otherwise. What a statement that nothing matches rests on."""
    docs = {item.doc_id: item for item in items}
    if not docs or not all(known_only_by_labels(i) for i in docs.values()):
        return ""
    if len(docs) == 1:
        return "it has no caption: kira knows it only by an image classifier's labels, which may not name what it shows"
    return ("they have no captions: kira knows them only by an image classifier's labels, which may not name what "
            "they show")


def known_only_by_labels(item: EvidenceItem) -> bool:
    """Whether all that is recorded of what `item` shows is an image classifier's labels."""
    view = shown(item)
    return bool(view.labels) and not (view.human_text or view.tags or view.text_read or view.metadata)


__all__ = ["ANOTHER", "ANOTHER_MATCH", "CLOSEST", "NAMED", "QUERY_SHOWS", "abstention_text", "closest_summary",
           "fact_phrases", "item_sentence", "known_only_by_labels", "label_phrase", "labels_only_caveat", "spoken_list"]
