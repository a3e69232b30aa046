"""The deterministic default generator: the score-weighted consensus of the evidence.

Evidence descriptions mix content ("patchy consolidation in the right lower zone")
with bookkeeping ("patient P001, study 1 (2020-01-13)", "Reported by Dr. X"). The
generator answers with the *content the top evidence agrees on*:

1. Each item's text (``provenance["caption"]``, else its summary, else its tags) is
   split into sentences; "Findings:" / "Impression:" style heads are cut off, and a
   head before a colon becomes its own sentence ("Urban land cover: ...") or, when it
   holds an identifier ("Schematic C001 rev A: ..."), bookkeeping. Sentences where
   >= 20% of the content tokens are identifiers (p001, t003, 2020: one or two letters
   then three or more digits, or plain integers; not values with units like 10k or 0.65,
   nor part designators like R1 or C12, which are content) and attributions
   ("Reported by Dr. X") are set aside as bookkeeping.
2. When the question names a subject by identifier ("patient P001", "tile T003": one or
   two letters then three or more digits, or a 4+ digit number) and
   some items name it too, only those items are reasoned over: evidence about other
   subjects says nothing about this one (the trace says what was set aside).
3. Each remaining sentence gets a support: the share of the score-weighted evidence that
   states it too (a sentence of that item with stem Jaccard >= 0.65 on words, values such
   as 10k or 0.65 compared as one placeholder, so "Rf = 22k" and "Rf = 47k" state the
   same thing; or one that differs only in position words, so "Left pleural effusion"
   and "Right pleural effusion" do), one vote per document at its best score, so many patches of one image don't
   outvote several images. Documents that state only bookkeeping abstain: they count
   neither for nor against. Plus half the share of the question's content words it
   contains; plus 1 when the question asks for a comparison ("changed", "differ",
   "compare") and the sentence (or its head, "Change since ...") reports a change
   ("changed from", "increased", "new", ...) that is new in some document, i.e. not
   stated by every content-bearing document (what all of them state is what stayed the
   same). For questions that ask for no comparison, statements of change are one
   instance's history, not what the evidence shows, and are not chosen.
4. A statement is worded as its sources agree: a content word that no more than 70% of
   the (score-weighted) witnesses stating it use is left out ("the left lower zone" and
   "the right lower zone" -> "the lower zone"), and a clause whose value the sources
   disagree on is left out whole ("Rin = 2.2k" / "Rin = 10k") unless the value is a
   unitless reading, which becomes its range over the cited documents ("about
   0.62-0.67"): the class-level statement, not one instance's detail. A witness is a
   document, or a whole compound document (``provenance["compound"]``: one patient's
   films, one place's acquisitions) that votes once for what all its documents state.
   Every word kept is a word of the evidence. The wording starts from the best-weighted
   witness's sentence, or, where that sentence places the finding elsewhere than more than
   70% of the witnesses do, from the best-weighted one that places it where they agree.
   A position word (left/right, upper/lower, ...) is then kept in a chosen claim only when
   the witnesses of all the chosen claims agree on it (kira.reasoning.position_agreement):
   findings and impression place a finding on one side.
5. Near-duplicate sentences form one candidate; the best-supported is the first claim,
   and others follow while their score is >= `min_support_ratio` of the best (at
   most `max_claims`) if some document that states the first also states them (they
   complement it: findings and impression of one report, a circuit's type and its
   function, not a rival reading) -- for a comparison question, some document of the
   same compound document (the other state of what is compared: revision A next to
   revision B) -- and do not restate a chosen claim (all of its words, or all of theirs,
   in the other: "RC low-pass filter" then "RC low-pass filter, R1 = 4.7k").
   Every claim cites the items that state it (best first).

An item on path "analogy" (a recorded change of another sequence, lent by
kira.pipeline.change to a comparison question whose subject states none) counts as
evidence about the subject, is read only for its change statement, and its claim is
worded "By analogy: ..."; what the subject's own documents state complements it. An
item on path "measured" (the change kira.pipeline.measured_change measured in the subject's own
images along its finding) is read the same way, its claim as written.
An item on path "read" (a view kira.pipeline.view_reading read from its image: one whose own text
is only bookkeeping, or one whose subject states no conclusion) is read as its text followed by
the statements read.

Before the answer it writes the reasoning trace: the evidence considered, what was set
aside as metadata, each candidate's support and sources, what agrees and which
evidence states none of the chosen content (conflict). It cites only numbers present
in the pack; with an empty pack it says it found no evidence and makes no claims.
Output is a pure function of (question, pack).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kira.reasoning.citations import format_citation
from kira.reasoning.position_agreement import disputed_positions
from kira.reasoning.text_tokens import content_tokens, stem, words
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack
from kira.reasoning.view_agreement import agreeing_views, asks_agreement

log = logging.getLogger(__name__)

NO_EVIDENCE_TEXT = "I found no evidence in the knowledge base that answers this question."

QUESTION_WORDS = frozenset(
    "find show list which what whats describe identify classify tell give kind type does do is are there any "
    "please most likely images image tiles tile fields field schematics schematic radiographs radiograph "
    "photos photo pictures picture".split()
)
"""Words of a question that say how to ask rather than what about (ignored for question relevance)."""

CHANGE_QUESTION_STEMS = frozenset({"chang", "differ", "compar", "between", "evolv", "progress", "revis"})
"""Stems that make a question a comparison ("how has it changed?", "how does B differ from A?", "how was it revised?")."""


def is_comparison(question: str) -> bool:
    """Whether `question` asks for a comparison (one of CHANGE_QUESTION_STEMS among its words)."""
    return bool({stem(t) for t in content_tokens(question)} & CHANGE_QUESTION_STEMS)
CHANGE_STATEMENT_STEMS = frozenset(
    {"chang", "increas", "decreas", "rais", "grew", "grown", "new", "built", "remov", "replac",
     "wors", "improv", "resolv", "progress", "unchang", "stabl", "harvest", "shrank", "expand"}
)
"""Stems of statements that report a change; preferred answers to comparison questions."""

ANALOGY_PATH = "analogy"
"""Path of an item lent by change-by-analogy (kira.pipeline.change): another sequence's recorded
change, read only for its change statement and worded "By analogy: ..."."""
MEASURED_PATH = "measured"
"""Path of an item that states a change kira measured in the subject's own images along its
finding (kira.pipeline.measured_change); read only for that change statement."""
LENT_PATHS = (ANALOGY_PATH, MEASURED_PATH)
"""Paths of items that speak about the subject's change, not about what their own document shows."""
READ_PATH = "read"
"""Path of a view whose image kira read (kira.pipeline.view_reading: a view whose record is only bookkeeping,
or one whose subject leaves a conclusion unstated): its text is followed by the statements read,
``provenance["read"]["statements"]``."""


def is_lent(item: EvidenceItem) -> bool:
    """Whether `item` was added to the pack to state the subject's change (a LENT_PATHS path)."""
    return any(p in LENT_PATHS for p in item.paths)

_ATTRIBUTION = re.compile(
    r"^(?:reported|drawn|signed|dictated|read|prepared|acquired|scanned|captured|taken|photographed|uploaded)\b.*\bby\b",
    re.I,
)
_ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:Dr|Mr|Mrs|Ms|Prof|St|vs|approx|e\.g|i\.e|Fig|No))\.$")
_HEAD = re.compile(r"^(?:findings?|impressions?|diagnosis|conclusion|summary|description|caption|notes?|tags?|keywords)\s*:\s*", re.I)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=\S)|\n+")
METADATA_ID_SHARE = 0.2  # sentences with at least this share of identifier tokens are bookkeeping
SAME_SENTENCE_JACCARD = 0.65  # stem-set Jaccard at or above which two sentences state the same thing
CONSENSUS_SHARE = 0.7  # a word of a statement is kept when more than this share of its sources state it


def text_of(item: EvidenceItem) -> str:
    """The text the generator reads for an item: its caption, else its summary, else its tags, else its
    doc id; followed by the statements kira read in its image, if any (`READ_PATH`)."""
    text = _own_text(item)
    statements = [s[:1].upper() + s[1:] for s in read_statements(item)]
    if statements:
        text = f"{text.rstrip('.')}. " + " ".join(f"{s.rstrip('.')}." for s in statements)
    return text


def read_statements(item: EvidenceItem) -> list[str]:
    """The statements kira read in the item's image (``provenance["read"]["statements"]``), else []."""
    read = (item.provenance or {}).get("read")
    found = read.get("statements") if isinstance(read, Mapping) else None
    return [str(s).strip() for s in found if str(s).strip()] if isinstance(found, (list, tuple)) else []


def _own_text(item: EvidenceItem) -> str:
    prov = item.provenance or {}
    for key in ("caption", "label"):
        value = prov.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    if item.summary.strip():
        return item.summary.strip()
    tags = prov.get("tags")
    if isinstance(tags, (list, tuple)) and any(str(t).strip() for t in tags):
        return ", ".join(str(t).strip() for t in tags if str(t).strip())
    return item.doc_id


# p001, t003, 2020, 13 -- not values with units (10k, 0.65, 40x) nor part designators (r1, c12)
_IDENTIFIER = re.compile(r"^(?:[a-z]{1,2}\d{3,}|\d+)$")


def _is_metadata(tokens: list[str]) -> bool:
    return not tokens or sum(bool(_IDENTIFIER.match(t)) for t in tokens) / len(tokens) >= METADATA_ID_SHARE


def _split(text: str) -> list[str]:
    pieces: list[str] = []
    for piece in _SENTENCE.split(text):
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"  # "Dr. Osei", "A. Park": not a sentence end
        else:
            pieces.append(piece)
    return pieces


def sentences_of(text: str) -> list[tuple[str, bool, str]]:
    """`text` split into (sentence, is_metadata, context) triples, trailing punctuation removed.

    ``context`` is the head a sentence was split from ("Change since the previous
    acquisition: <sentence>"), used with the sentence for question relevance; "" for
    heads themselves and sentences without one. Metadata: mostly
    identifiers, or an attribution ("Reported by Dr. X", "drawn by ...").
    """
    out: list[tuple[str, bool, str]] = []
    for raw in _split(text):
        sentence = raw.strip().rstrip(".;!? ")
        context = ""
        sentence = _HEAD.sub("", sentence)
        if ":" in sentence:
            head, rest = sentence.split(":", 1)
            if rest.strip():
                # "Schematic C001 rev A: ..." -> bookkeeping head; "Urban land cover: ..." -> its own statement
                head_tokens = content_tokens(head)
                # identifiers ("Schematic C001 rev A") and change lead-ins ("Change since the previous
                # acquisition") head a statement without being one
                head_meta = (not head_tokens or any(_IDENTIFIER.match(t) for t in head_tokens)
                             or bool({stem(t) for t in head_tokens} & CHANGE_QUESTION_STEMS))
                out.append((head.strip(), head_meta, ""))  # a head has no context beyond itself
                sentence = _HEAD.sub("", rest.strip())
                context = head.strip()
        sentence = sentence.strip(" ,")
        if sentence:
            meta = _is_metadata(content_tokens(sentence)) or bool(_ATTRIBUTION.match(sentence))
            out.append((sentence, meta, context))
    return out


def _stems(text: str) -> frozenset[str]:
    return frozenset(stem(t) for t in content_tokens(text))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Stem Jaccard of two shapes, on their words: the value placeholder counts only when
    neither has a word, so "RC low-pass filter, R1 = #" and "RC high-pass filter, R1 = #"
    differ in one word of four, not one of five."""
    wa, wb = a - {"#"}, b - {"#"}
    if wa or wb:
        a, b = wa, wb
    return len(a & b) / len(a | b) if a and b else 0.0


POSITION_STEMS = frozenset({"left", "right", "upper", "lower", "anterior", "posterior", "north", "south", "east", "west"})
"""Where a finding sits: two statements that differ only in these words are one statement at two places."""


def same_statement(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two sentence shapes state the same thing: stem Jaccard >= SAME_SENTENCE_JACCARD, or they
    differ only in position words ("left lower lobe pneumonia" / "right lower lobe pneumonia") and share
    at least two other words."""
    if _jaccard(a, b) >= SAME_SENTENCE_JACCARD:
        return True
    differ = a ^ b
    return bool(differ) and differ <= POSITION_STEMS and len(a & b) >= 2


# p001, t003, s004, c011, 2019: names of a subject. Like _IDENTIFIER, a name has 3+ digits: R1, C12, U3 are parts.
_SUBJECT_ID = re.compile(r"^(?:[a-z]{1,2}\d{3,}|\d{4,})$")
_NAMED_ID = re.compile(r"^[a-z]{1,2}\d{3,}$")  # p001, t003: a name, more specific than a year


def subject_ids(text: str) -> frozenset[str]:
    """Identifier tokens of `text` that name a subject: 1-2 letters then 3+ digits (P001, T003) or 4+ digit numbers.

    Part designators (R1, C12) are content, not subjects."""
    return frozenset(w for w in words(text) if _SUBJECT_ID.match(w))


def subject_items(question: str, items: tuple[EvidenceItem, ...]) -> tuple[EvidenceItem, ...]:
    """The items about the subject the question names by identifier ("patient P001", "tile T003").

    Named identifiers (letters then digits) define the subject when the question has any,
    else 4+ digit numbers do. Returns () when the question names none or no item names it.
    """
    asked = subject_ids(question)
    named = frozenset(a for a in asked if _NAMED_ID.match(a))
    asked = named or asked
    if not asked:
        return ()
    named = tuple(i for i in items if asked & subject_ids(f"{text_of(i)} {i.summary} {i.doc_id}"))
    # an item lent by analogy (or a measurement) speaks about the subject's change, not its own subject
    return named + tuple(i for i in items if is_lent(i) and i not in named) if named else ()


def states_change(sentence: str, context: str) -> bool:
    """Whether a sentence (with its head) states a change: a change word ("changed from 47k to 22k" too)."""
    return bool(_stems(f"{context} {sentence}") & CHANGE_STATEMENT_STEMS)


def states_class_change(sentence: str, context: str) -> bool:
    """Whether a sentence (with its head) states a change in class-level words: a change word, no value."""
    return not any(ch.isdigit() for ch in sentence) and states_change(sentence, context)


def _lent(cand: _Candidate) -> bool:
    return bool(cand.sources) and all(is_lent(i) for i in cand.sources)


def _by_analogy(cand: _Candidate) -> bool:
    return bool(cand.sources) and all(ANALOGY_PATH in i.paths for i in cand.sources)


def statement_shape(sentence: str) -> frozenset[str]:
    """What a sentence states, as the generator matches statements: its content stems, values as one placeholder."""
    return _shape(_stems(sentence))


_VALUE_CLAUSE_SPLIT = re.compile(r"\s*[,;]\s*")
_LEAD_VERB = re.compile(r"^(?:shows?|showing|depicts?|depicting)\s+", re.I)  # "Shows open water" -> "open water"


def without_values(sentence: str) -> str:
    """The sentence with its clauses that hold a value cut, and a leading "Shows" ("Enlarged cardiac
    silhouette, cardiothoracic ratio about 0.65" -> "Enlarged cardiac silhouette"); "" if nothing is left."""
    clauses = (c for c in _VALUE_CLAUSE_SPLIT.split(sentence) if c and not any(ch.isdigit() for ch in c))
    return _LEAD_VERB.sub("", ", ".join(clauses))


def _restates(cand: _Candidate, chosen: list[_Candidate]) -> bool:
    """Whether `cand`'s wording holds every content word of a chosen claim, or a chosen claim holds all of
    its words but those of its value clauses ("enlarged cardiac silhouette, cardiothoracic ratio about
    0.65" restates "... enlarged cardiac silhouette has remained unchanged")."""
    words = _stems(cand.text)
    plain = _stems(without_values(cand.text)) or words
    return any(plain <= _stems(c.text) or _stems(c.text) <= words for c in chosen)


def _weights(items: tuple[EvidenceItem, ...]) -> dict[int, float]:
    """Per-item vote weight: the score if any score is positive (negatives count 0), else 1/rank."""
    if any(item.score > 0 for item in items):
        return {item.number: max(item.score, 0.0) for item in items}
    return {item.number: 1.0 / rank for rank, item in enumerate(items, start=1)}


def _witness(item: EvidenceItem) -> str:
    """Who an item testifies as: its compound document (one patient's films, one place's
    acquisitions: ``provenance["compound"]``) when it belongs to one, else its document."""
    compound = item.provenance.get("compound") if item.provenance else None
    return str(compound) if compound else item.doc_id


def _has_value(token: str) -> bool:
    return any(ch.isdigit() for ch in token)


def _shape(stems: frozenset[str]) -> frozenset[str]:
    """Stems with every value (a token holding a digit: 10k, 0.65) replaced by one placeholder."""
    return frozenset("#" if _has_value(s) else s for s in stems)


@dataclass
class _Candidate:
    text: str  # as first written by the best-weighted item stating it
    stems: frozenset[str]  # its shape (values replaced by "#"), what near-duplicates are matched on
    sources: list[EvidenceItem]  # items that state it, best first
    context: frozenset[str] = frozenset()  # stems of the sentence and its head, for relevance
    support: float = 0.0  # score-weighted share of content-bearing documents stating it
    relevance: float = 0.0  # share of the question's content stems it (or its head) contains
    reports_change: bool = False  # a comparison question and a statement of change new in some document
    history: bool = False  # a statement of change, and the question asks for no comparison
    lent: bool = False  # stated by items lent to state the subject's change (LENT_PATHS)
    # (witness, doc id, stems) per wording
    variants: list[tuple[str, str, frozenset[str]]] = field(default_factory=list)
    wordings: dict[str, str] = field(default_factory=dict)  # doc id: its sentence stating it, best-weighted first

    @property
    def score(self) -> float:
        return self.support + 0.5 * self.relevance + (1.0 if self.reports_change else 0.0)


_PIECE = re.compile(r"(?:non-(?=[a-z]))?[a-z0-9]+(?:\.[0-9]+)?", re.I)  # "non-inverting" is one word (text_tokens.words)
_CLAUSE = re.compile(r"(?<=[,;])\s+")


_PLAIN_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")
_UNITLESS_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]|\.\d)")  # 0.65, not 2.2k or C1


def _value_ranges(text: str, readers: Iterable[frozenset[str]], agreed: frozenset[str]) -> dict[str, str]:
    """{the one unitless number of `text` not agreed: "lo-hi" over `readers`' numbers} when each
    of them states at most one such number besides those `text` keeps (so they are readings of one
    quantity), else {}. A reading most witnesses agree on is a reading too: "0.67" written by the
    best-weighted witness, "0.65" by the rest, spans "0.65-0.67"."""
    numbers = _UNITLESS_NUMBER.findall(text)
    own = {w for w in numbers if w not in agreed}
    if len(own) != 1:
        return {}
    kept = {w for w in numbers if w in agreed}
    readings: list[str] = []
    for stems in readers:
        values = [s for s in stems if _PLAIN_NUMBER.match(s) and s not in kept]
        if len(values) > 1:
            return {}
        readings += values
    if not readings:
        return {}
    lo, hi = min(readings, key=float), max(readings, key=float)
    return {next(iter(own)): f"{lo}-{hi}"} if float(lo) < float(hi) else {}


def consensus_text(text: str, agreed: frozenset[str], ranges: dict[str, str] | None = None) -> str:
    """`text` with the content words whose stem is not in `agreed` left out.

    A clause (comma-separated) that loses a value (10k, 0.65) is left out whole: a name
    without its value states nothing, unless `ranges` maps that value to the range its
    sources span ("0.65" -> "0.62-0.67"), which takes its place. Every word kept is a
    word of `text` or an end of such a range.
    """
    ranges = ranges or {}
    kept_clauses: list[str] = []
    for clause in _CLAUSE.split(text):
        out: list[str] = []
        last = 0
        dropped_value = False
        for m in _PIECE.finditer(clause):
            word = m.group(0).lower().replace("-", "")
            drop = word in content_tokens(word) and stem(word) not in agreed
            if drop and word in ranges:
                out.append(clause[last:m.start()] + ranges[word])
                last = m.end()
                continue
            if drop:
                dropped_value = dropped_value or _has_value(word)
                out.append(clause[last:m.start()])
                last = m.end()
                if last < len(clause) and clause[last] in "- ":
                    last += 1  # the word's trailing space or hyphen goes with it
        out.append(clause[last:])
        if dropped_value:
            continue
        piece = re.sub(r"\s{2,}", " ", "".join(out)).strip()
        if content_tokens(piece.rstrip(",;")):
            kept_clauses.append(piece)
    joined = " ".join(kept_clauses).strip().rstrip(",;").strip()
    return re.sub(r"\s+([,;])", r"\1", joined)


def _without_words(text: str, dropped: Iterable[str]) -> str:
    """`text` with the content words whose stem is in `dropped` left out (see `consensus_text`)."""
    dropped = frozenset(dropped)
    kept = frozenset(stem(m.group(0).lower().replace("-", "")) for m in _PIECE.finditer(text)) - dropped
    return consensus_text(text, kept) or text


def _sentence(text: str, citation: str) -> str:
    text = text[:1].upper() + text[1:]
    return f"{text} {citation}." if citation else f"{text}."


def _numbers(items: list[EvidenceItem] | tuple[EvidenceItem, ...]) -> tuple[int, ...]:
    return tuple(sorted(item.number for item in items))


def _bookkeeping(item: EvidenceItem) -> str:
    """The item's bookkeeping sentences ("PA chest radiograph, patient P001, study 1"), joined."""
    return " ".join(sentence for sentence, is_meta, _ in sentences_of(text_of(item)) if is_meta)


class TemplateGenerator:
    """Deterministic `Generator`: the score-weighted consensus of the evidence (module docstring).

    Parameters
    ----------
    max_claims: at most this many sentences in the answer.
    min_support_ratio: a further sentence is added only while its score is at least this
        share of the best sentence's.
    max_citations: at most this many evidence numbers per claim (its best-scored sources).
    """

    name = "template"

    def __init__(self, *, max_claims: int = 2, min_support_ratio: float = 0.1, max_citations: int = 5) -> None:
        if max_claims < 1 or max_citations < 1:
            raise ValueError(f"max_claims and max_citations must be >= 1; got {max_claims}, {max_citations}")
        if not 0.0 <= min_support_ratio <= 1.0:
            raise ValueError(f"min_support_ratio must be in [0, 1]; got {min_support_ratio}")
        self.max_claims = max_claims
        self.min_support_ratio = min_support_ratio
        self.max_citations = max_citations

    def _candidates(self, question: str, items: tuple[EvidenceItem, ...]) -> tuple[list[_Candidate], list[str]]:
        weights = _weights(items)
        order = sorted(items, key=lambda i: (-weights[i.number], i.number))
        candidates: list[_Candidate] = []
        metadata: list[str] = []
        per_item: dict[int, list[frozenset[str]]] = {}
        for item in order:
            lent = is_lent(item)
            for sentence, is_meta, context in sentences_of(text_of(item)):
                if lent and (is_meta or not states_class_change(sentence, context)):
                    continue  # what an analogue shows of itself says nothing about the subject
                if is_meta:
                    metadata.append(f"'{sentence}' ([Evidence {item.number}])")
                    continue
                stems = _stems(sentence)
                if not stems:
                    continue
                shape = _shape(stems)
                per_item.setdefault(item.number, []).append(shape)
                # a lent change statement is its own candidate, never a source of what the subject's documents state
                match = next((c for c in candidates if c.lent == lent and same_statement(c.stems, shape)), None)
                if match is None:
                    match = _Candidate(sentence, shape, [item], context=stems | _stems(context), lent=lent)
                    candidates.append(match)
                elif item not in match.sources:
                    match.sources.append(item)
                match.variants.append((_witness(item), item.doc_id, stems))
                match.wordings.setdefault(item.doc_id, sentence)
                if context and not match.context & _stems(context):
                    match.context = match.context | _stems(context)
        # documents that state no content (only bookkeeping) abstain: they vote for nothing and against nothing
        content_docs: dict[str, float] = {}
        for item in items:
            if per_item.get(item.number):
                content_docs[item.doc_id] = max(content_docs.get(item.doc_id, 0.0), weights[item.number])
        total = sum(content_docs.values()) or 1.0
        q_stems = frozenset(stem(t) for t in content_tokens(question) if t not in QUESTION_WORDS)
        comparison = is_comparison(question)
        for cand in candidates:
            docs: dict[str, float] = {}
            witnesses: dict[str, float] = {}
            for item in items:
                if is_lent(item) == cand.lent and any(same_statement(cand.stems, s) for s in per_item.get(item.number, [])):
                    docs[item.doc_id] = max(docs.get(item.doc_id, 0.0), weights[item.number])
                    who = _witness(item)
                    witnesses[who] = max(witnesses.get(who, 0.0), weights[item.number])
                    if item not in cand.sources:
                        cand.sources.append(item)
            cand.sources.sort(key=lambda i: (-weights[i.number], i.number))
            cand.support = sum(docs.values()) / total
            cand.relevance = len(q_stems & cand.context) / len(q_stems) if q_stems else 0.0
            # a change is new in some document: what every document states is the unchanged part
            new_somewhere = len(content_docs) == 1 or len(docs) < len(content_docs)
            states_change = bool(cand.context & CHANGE_STATEMENT_STEMS)
            cand.reports_change = comparison and new_somewhere and states_change
            cand.history = states_change and not comparison
            cand.text = self._agreed_wording(cand, weights_by_witness=witnesses,
                                             cited={i.doc_id for i in cand.sources[: self.max_citations]})
        # one instance's history ("C1 changed from 10u to 470u") does not say what the evidence shows
        candidates.sort(key=lambda c: (c.history, -c.score, min(i.number for i in c.sources)))
        return candidates, metadata

    @staticmethod
    def _agreed_wording(cand: _Candidate, *, weights_by_witness: dict[str, float], cited: set[str]) -> str:
        """The candidate's sentence keeping only the content words most of its (weighted) witnesses state.

        Sources that word one statement differently ("the left lower zone", "the right
        lower zone"; "Rf = 22k", "Rf = 47k") agree on the class-level part; the rest is
        one instance's detail and is left out (see `consensus_text`). A compound document
        is one witness, stating what all its documents state (three films of one patient
        attest that patient's side once; two revisions that disagree on Rf attest none); when
        every source belongs to one compound document, its documents vote (a design's two
        revisions that disagree on C1 agree on no value of it). A unitless number the
        witnesses disagree on, one per document, becomes its range over the `cited`
        documents ("about 0.62-0.67"), so the claim's citations state both ends.
        """
        by_doc: dict[str, frozenset[str]] = {}
        witness_of: dict[str, str] = {}
        for witness, doc, stems in cand.variants:
            by_doc[doc] = by_doc.get(doc, frozenset()) | stems
            witness_of[doc] = witness
        by_witness: dict[str, frozenset[str]] = {}  # what every document of the witness states
        for doc, stems in by_doc.items():
            w = witness_of[doc]
            by_witness[w] = by_witness[w] & stems if w in by_witness else stems
        if len(by_witness) >= 2:
            voters, weight = by_witness, {w: weights_by_witness.get(w, 0.0) for w in by_witness}
        elif len(by_doc) >= 2:
            voters, weight = by_doc, dict.fromkeys(by_doc, 1.0)
        else:
            return cand.text
        if not any(weight.values()):
            weight = dict.fromkeys(voters, 1.0)
        total = sum(weight.values())
        agreed = frozenset(
            s for s in frozenset().union(*voters.values())
            if sum(w for d, w in weight.items() if s in voters[d]) > CONSENSUS_SHARE * total
        )
        # a place most witnesses agree on is said even when the best-weighted wording puts it elsewhere
        placed = agreed & POSITION_STEMS
        base = next((t for t in (cand.text, *cand.wordings.values()) if placed <= _stems(t)), cand.text)
        ranges = _value_ranges(base, [stems for d, stems in by_doc.items() if d in cited], agreed)
        text = consensus_text(base, agreed, ranges=ranges)
        return text or cand.text

    @staticmethod
    def _agree_on_positions(chosen: list[_Candidate], items: tuple[EvidenceItem, ...], trace: list[str]) -> None:
        """Leave out of every chosen claim the position words its witnesses, taken over all the
        chosen claims, do not agree on (kira.reasoning.position_agreement): the findings and the
        impression of one answer place the finding on one side, or on none. Claims lent by
        analogy speak of another subject and neither vote nor change."""
        weights = _weights(items)
        weight_of: dict[str, float] = {}
        for item in items:
            w = _witness(item)
            weight_of[w] = max(weight_of.get(w, 0.0), weights[item.number])
        own = [c for c in chosen if not c.lent]
        disputed = disputed_positions(
            ((witness, stems) for c in own for witness, _doc, stems in c.variants), weight_of, CONSENSUS_SHARE)
        if not disputed:
            return
        changed = []
        for cand in own:
            if _stems(cand.text) & disputed.keys():
                trimmed = _without_words(cand.text, disputed)
                if trimmed != cand.text:
                    changed.append(f"'{cand.text}' -> '{trimmed}'")
                    cand.text = trimmed
        if changed:
            trace.append(
                "Where the finding sits, over every chosen claim's sources: "
                + ", ".join(f"'{w}' has {using / total:.0%} of the weight placing it" for w, (using, total) in disputed.items())
                + f", so it is left out: {'; '.join(changed)}.")

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

        trace.append(
            f"Considered {len(pack.items)} evidence item(s): "
            + "; ".join(
                f"[Evidence {i.number}] {i.doc_id} ({i.level}, score {i.score:.3f}, via {'+'.join(i.paths) or '-'})"
                for i in pack.items
            )
            + "."
        )
        subject = subject_items(question, pack.items)
        pool = subject if subject else pack.items
        if subject and len(subject) < len(pack.items):
            trace.append(
                f"The question names {', '.join(sorted(subject_ids(question))).upper()}: answering from "
                f"{format_citation(_numbers(subject))}, the evidence that names it; the rest is about other subjects."
            )
        measured = [i for i in pool if MEASURED_PATH in i.paths]
        if measured:
            trace.append(
                f"{format_citation(_numbers(measured))} state(s) the change kira measured in the subject's own images "
                "along its finding (its documents state no change and no recorded change resembles it)."
            )
        read = [i for i in pool if READ_PATH in i.paths]
        if read:
            trace.append(
                f"{format_citation(_numbers(read))} state(s) only bookkeeping; what kira read in its image follows "
                "its text (its nearest documents with a report agree that it shows what another view of its set "
                "states): " + "; ".join(f"[Evidence {i.number}] '{'; '.join(read_statements(i))}'" for i in read) + "."
            )
        lent = [i for i in pool if ANALOGY_PATH in i.paths]
        if lent:
            trace.append(
                f"{format_citation(_numbers(lent))} belong(s) to another sequence whose recorded change the subject's "
                "images resemble (lent by analogy: the subject's own documents state no change); only its change "
                "statement is used."
            )
        candidates, metadata = self._candidates(question, pool)
        if metadata:
            trace.append("Set aside as bookkeeping (identifiers, dates, sizes): " + "; ".join(metadata[:6]) + ".")
        if not candidates:
            # Only metadata: fall back to the best item's text as written.
            best = max(pool, key=lambda i: (i.score, -i.number))
            candidates = [_Candidate(text_of(best).rstrip("."), _stems(text_of(best)), [best], 1.0)]
        trace.append(
            "What the evidence states, by score-weighted support: "
            + "; ".join(
                f"'{c.text}' from {format_citation(_numbers(c.sources))} (support {c.support:.0%}"
                + (f", matches {c.relevance:.0%} of the question's terms" if c.relevance else "")
                + (", states a change the question asks about" if c.reports_change else "")
                + ")"
                for c in candidates[:6]
            )
            + "."
        )
        top = candidates[0]
        chosen = [top]
        comparison = is_comparison(question) and not _lent(top)
        top_docs = {i.doc_id for i in top.sources}
        if _lent(top):  # a lent change is complemented by what the subject's own documents state
            top_docs = {i.doc_id for i in pool if not is_lent(i)}
        for cand in candidates[1:]:
            if len(chosen) >= self.max_claims or cand.history or cand.score < self.min_support_ratio * top.score:
                break
            if _restates(cand, chosen):  # "RC low-pass filter" then "RC low-pass filter, R1 = 4.7k": one claim twice
                continue
            if comparison and {_witness(i) for i in top.sources} & {_witness(i) for i in cand.sources}:
                chosen.append(cand)  # a comparison: another state of the same compound document complements it
            elif top_docs & {i.doc_id for i in cand.sources}:  # complements the top claim, not a rival of it
                chosen.append(cand)
        self._agree_on_positions(chosen, pool, trace)
        agreeing = sorted({i.number for c in chosen for i in c.sources})
        if len(agreeing) > 1:
            trace.append(f"Agreement: {format_citation(agreeing)} state the chosen content.")
        silent = [i for i in pack.items if i.number not in agreeing]
        if silent:
            trace.append(
                f"Conflict or silence: {format_citation(_numbers(silent))} state(s) none of it"
                + (f" (e.g. '{candidates[len(chosen)].text}')" if len(candidates) > len(chosen) else "")
                + "; outweighed."
            )
        agreement = None
        if asks_agreement(question) and not _lent(top):
            stating = list(dict.fromkeys(i for c in candidates for i in c.sources))
            agreement = agreeing_views(question, top.sources, stating, pool, _bookkeeping)
            if agreement is None:
                trace.append("The question asks what views show together, but the evidence holds no two views of "
                             "one multiview set to compare.")
            elif agreement.agrees:
                trace.append(
                    f"The question asks what views show together: {format_citation(_numbers(agreement.items))}, "
                    f"views of one multiview set ({agreement.view_set}), each state '{top.text}'."
                )
            else:
                trace.append(
                    f"The question asks what views show together: of {format_citation(_numbers(agreement.items))}, "
                    f"views of one multiview set ({agreement.view_set}), {format_citation(_numbers(agreement.missing))} "
                    f"do(es) not state '{top.text}' (a view whose text is only bookkeeping cannot be compared), "
                    "so the answer does not say they agree."
                )
                agreement = None
        trace.append(
            f"Chose {len(chosen)} statement(s) with the most support"
            + (f"; the next had {candidates[len(chosen)].score / top.score:.0%} of the best score" if len(candidates) > len(chosen) else "")
            + "."
        )
        claims = []
        for cand in chosen:
            cited = _numbers(cand.sources[: self.max_citations])
            text = f"By analogy: {cand.text[:1].lower()}{cand.text[1:]}" if _by_analogy(cand) else cand.text
            if agreement is not None and cand is top:  # the claim cites every view that states it
                views = list(agreement.items)
                rest = [i for i in cand.sources if i not in views]
                cited = _numbers((views + rest)[: max(self.max_citations, len(views))])
                text = agreement.word(text)
            claims.append(Claim(text=_sentence(text, format_citation(cited)), citations=cited))
        trace.append(f"Answer written as {len(claims)} claim(s), each citing the evidence that states it.")
        text = " ".join(claim.text for claim in claims)
        return Answer(text=text, reasoning=tuple(trace), claims=tuple(claims), generator=self.name)

    def describe(self) -> dict[str, Any]:
        """Settings for the rationale card's config summary."""
        return {
            "generator": self.name,
            "max_claims": self.max_claims,
            "min_support_ratio": self.min_support_ratio,
            "max_citations": self.max_citations,
        }
