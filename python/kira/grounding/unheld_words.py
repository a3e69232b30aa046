"""Words of a question that no record holds: a match by meaning alone, inside a domain.

The relevance judge (kira.reasoning.relevance) measures how far a question's match with what an item
shows stands above everyday phrases' matches with it. Between photos of cats, coffee and rockets
that scale works. Inside one domain it does not: in an archive of scans whose captions open "CT scan:
...", "MR scan: ...", "Ultrasound scan: ..." (benchmarks/suites/domain_archive.py), all-MiniLM-L6-v2
rates every scan far above everyday phrases for any question about scans, so "a scan of a fractured
wrist" was answered from a bone scan at confidence 0.94, "an MRI of the knee" from a liver MR at 0.86
and "a mammogram" from a CT slice at 0.96. Nothing in a sentence vector says that a liver is not a
knee. What the knowledge base can say for certain is which words its records hold. So, for a text
question whose answer the verdict found relevant by meaning (not every word of the question held by
the best item, `Relevance.lexical`), whose best item is known by what a person wrote or OCR read (a
label-only item has its own caveat):

* the question's **shared words** are those most of the records hold (more than half of the indexed
  documents and passages, with at least `MIN_RECORDS` of them): they say which domain the question
  is about ("scan"), not what it asks;
* its **distinctive words** are the rest, less the profile's question words;
* when the knowledge base's records share words (the question, or what a person wrote of the best item:
  caption, passage, tags, holds a shared word; metadata every record carries alike is no domain)
  and **no record holds any distinctive word**, the answer opens "No record in this knowledge base
  mentions 'fractured' or 'wrist'; what follows matches the question by meaning only." and its
  confidence is at most `MEANING_ONLY`, under the banner point (`Relevance.unheld`).

Inside such a knowledge base, when no record holds any word a question asks besides its subject's name, no
other record is a similar case of it: every scan matches "does scan_04 show a fracture?" by meaning, and none
records a fracture (`unheld_similar`).

A question one of whose distinctive words some record holds ("a scan with a liver lesion") and a
knowledge base whose records share no word (photos of different things: "a photographer with his
equipment" finding a man with a camera, where the judge's scale holds) are left as they are. Words
are compared as the lexical index keeps them (kira.knowledge_base.lexical.lexical_terms: stemmed, a
negated word apart, so "no fracture" does not hold 'fracture'). Each ask reads one document count per
word (a dictionary lookup, or one ``text_match`` count on Milvus).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from kira.grounding.answer_relevance import asked_besides_subject
from kira.grounding.opening import Opening
from kira.knowledge_base.lexical import lexical_terms
from kira.query_state import QueryState, StageContext
from kira.reasoning.field_answer import quoted_list
from kira.reasoning.relevance import MEANING_ONLY, Relevance, question_words
from kira.reasoning.shown import Shown, shown
from kira.reasoning.types import EvidencePack
from kira.text.tokens import stem

MIN_RECORDS = 4
"""Below this many indexed records no word is called shared: two photos that both say 'cup' are no domain."""


@dataclass(frozen=True)
class RecordCounts:
    """How many records (indexed documents and passages) the knowledge base holds, and how many hold each of
    the question's index terms (kira.knowledge_base.lexical.lexical_terms), less the profile's question words."""

    records: int
    counts: Mapping[str, int]

    def shared(self, term: str, count: int | None = None) -> bool:
        """Whether most records hold `term` (more than half, of at least `MIN_RECORDS`)."""
        n = self.counts.get(term, 0) if count is None else count
        return self.records >= MIN_RECORDS and 2 * n > self.records


def record_counts(ctx: StageContext, question: str) -> RecordCounts:
    """The knowledge base's record count and the document frequency of each of `question`'s content words' index
    terms (one lookup each; one ``text_match`` count each on Milvus); none counted under `MIN_RECORDS` records."""
    lexical = ctx.kb.lexical()
    records = len(lexical)
    if records < MIN_RECORDS:
        return RecordCounts(records, {})
    framing = {t for w in getattr(ctx.profile, "question_words", ()) for t in lexical_terms(w)}
    terms = [t for t in dict.fromkeys(lexical_terms(" ".join(question_words(question)))) if t not in framing]
    return RecordCounts(records, {t: int(lexical.document_frequency(t)) for t in terms})


def shared_stems(question: str, counts: RecordCounts) -> frozenset[str]:
    """The question's content words (as kira.text.tokens.stem stems them) whose index terms most records hold."""
    out = set()
    for word in question_words(question):
        terms = lexical_terms(word)
        if terms and all(t in counts.counts and counts.shared(t) for t in terms):
            out.add(stem(word))
    return frozenset(out)


def _as_written(question: str, terms: set[str]) -> list[str]:
    """The question's words, as it wrote them, whose index terms are all in `terms` ('MR-scan' for 'mr', 'scan')."""
    out = []
    for raw in question.split():
        word = raw.strip(".,;:!?\"'()[]{}")
        held = lexical_terms(word)
        if word and held and set(held) <= terms and word not in out:
            out.append(word)
    return out


def unheld_words(ctx: StageContext, state: QueryState, pack: EvidencePack, verdict: Relevance,
                 counts: RecordCounts) -> list[str]:
    """The question's distinctive words, as written, when no record of the knowledge base holds any of them
    and the records share words (module docstring); [] when the rule does not apply."""
    if (state.image_query or verdict.score is None or not verdict.relevant or verdict.lexical
            or verdict.basis != "text" or verdict.near or not verdict.asked or not counts.counts):
        return []
    best = next((i for i in pack.items if i.number == verdict.best), None)
    view = shown(best) if best is not None else None
    if view is None or not (view.human_text or view.tags or view.text_read or view.metadata):
        return []
    terms = [t for t in dict.fromkeys(lexical_terms(verdict.asked)) if t in counts.counts]
    distinctive = {t for t in terms if not counts.shared(t)}
    if not distinctive or any(counts.counts[t] for t in distinctive):
        return []
    if len(distinctive) == len(terms) and not _hold_shared(ctx, counts, _written(view)):
        return []  # the question holds no shared word, nor does the best item's text: no domain
    return _as_written(state.question, distinctive) or sorted(distinctive)


def _written(view: Shown) -> list[str]:
    """What a person wrote in words about an item (caption or passage, tags): where records share a domain.
    Classifier labels many scans share ('nematode') are a model's guess, and metadata every record carries alike
    ("source: archive A") says where they come from; neither says the records show one domain."""
    return [t for t in (view.human_text, *view.tags) if t]


def _hold_shared(ctx: StageContext, counts: RecordCounts, texts: list[str]) -> bool:
    """Whether any of `texts` holds a word most records hold (one document count per word until one does)."""
    lexical = ctx.kb.lexical()
    terms = dict.fromkeys(t for text in texts for t in lexical_terms(text) if not t.startswith("not:"))
    return any(counts.shared(t, int(lexical.document_frequency(t))) for t in terms)


def unheld_similar(ctx: StageContext, state: QueryState, pack: EvidencePack,
                   counts: RecordCounts) -> tuple[EvidencePack, list[str]]:
    """`pack` without its similar cases, and their doc ids, when no record of the knowledge base holds any word
    the question asks besides its subject's name (less the shared words) and the records share words: inside a
    domain every record matches "does scan_04 show a fracture?" by meaning, and none records a fracture, so no
    other scan is a similar case. `pack` unchanged and [] otherwise. (A similar case is not required to hold an
    asked word itself: "what do the two views together show?" asks about the subject's views, and other
    subjects' findings are still its similar cases.)"""
    if not pack.similar or state.image_query or not counts.counts:
        return pack, []
    asked = {t for t in lexical_terms(" ".join(asked_besides_subject(state, pack)))
             if t in counts.counts and not counts.shared(t)}
    if not asked or any(counts.counts[t] for t in asked):
        return pack, []
    if not _hold_shared(ctx, counts, [t for i in pack.similar for t in _written(shown(i))]):
        return pack, []
    off = list(dict.fromkeys(i.doc_id for i in pack.similar))
    return EvidencePack.from_items(pack.question, pack.items, pack.dropped, subject=pack.subject), off


def unheld_opening(ctx: StageContext, state: QueryState, pack: EvidencePack, verdict: Relevance,
                   counts: RecordCounts) -> tuple[Relevance, Opening | None]:
    """The verdict with `Relevance.unheld` set and the sentence the answer opens with, when the question's
    distinctive words are held by no record (module docstring); else the verdict unchanged and None."""
    words = unheld_words(ctx, state, pack, verdict, counts)
    if not words:
        return verdict, None
    said = quoted_list(words, conjunction="or")
    text = f"No record in this knowledge base mentions {said}; what follows matches the question by meaning only."
    step = (f"No record of the knowledge base holds {said}, the question's words beside those most records share, "
            f"so what it found matches by meaning alone, which inside one domain says little: confidence at most "
            f"{MEANING_ONLY:.2f}.")
    return dataclasses.replace(verdict, unheld=" ".join(words)), Opening(text, step)


__all__ = ["MIN_RECORDS", "RecordCounts", "record_counts", "shared_stems", "unheld_opening", "unheld_similar",
           "unheld_words"]
