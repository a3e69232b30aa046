"""Change by analogy: what changed in a sequence whose own documents do not say.

A comparison question ("what changed?", "how has it changed?") about a temporal
sequence is answered from the documents' words, and a report often records a change
("Change since the previous acquisition: the water level fell ...") but not always. When
the question's sequence states no change itself, its images still do: the step between
its earliest and latest member in the visual space, d = v(latest) - v(earliest).

A *recorded change* is a consecutive pair (earlier, later) of any temporal sequence in
the knowledge base whose later document states a change in class-level words: a
sentence with a change word ("fell", "built", "harvested", ...; the generator's
CHANGE_STATEMENT_STEMS) and no value, so "Rf changed from 47k to 22k" (one design's
history) is never lent to another design. The sequence changed when |d| is at least
`HopConfig.change_min_share` of the recorded changes' median step length (a sequence
that did not change moves by noise: far less); its analogue is the recorded change
whose step points the same way (cosine >= `analogy_min_cosine`) and, among those, with
the highest cosine of steps plus cosine of the earlier images (a like place changing the
like way). The analogue's later document joins the evidence on path "analogy"; the
template generator reads only its change statement and words the claim "By analogy: ...".
No recorded change, a small step or no analogue: nothing is added.

*Change along the finding* (`change_along_finding`): with no analogue, the sequence's
step is read against its own finding. The finding is the content statement most of the
sequence's documents make (clauses holding a value cut: "enlarged cardiac silhouette",
not "cardiothoracic ratio about 0.65"); its direction is a = mean(v of the other
documents that state it word for word, position words included) - mean(v of every
document), from the average image towards the images that show it (v: the encoder's
unit features, not the domain adapter's projection, which pulls one class together). The step's share
of that way, s = d . a / |a|^2, says whether the latest image shows more of the finding
(s >= `HopConfig.finding_min_share`) or less (s <= -finding_min_share). The statement ("Compared
with the baseline, <finding> has decreased") joins the evidence as an item of the
latest document on path "measured", its text the measurement, not the document's
caption; the trace records s, |a| and how many documents defined a. A smaller |s| adds
nothing: an image that does not move along its finding may still have changed where
the pixels barely show it (a component value in a drawing), so "unchanged" is never
claimed. Where the knowledge base records changes, a step shorter than the analogy's
step test allows (`change_min_share` of their median) is no change either. Any change
statement in the sequence's own documents (with values too: "R1 changed from 4.7k to
22k"), or fewer than `finding_min_documents` other documents stating the finding:
nothing is added.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.reasoning.template_generator import (ANALOGY_PATH, MEASURED_PATH, is_comparison, sentences_of,
                                               statement_shape, states_change, states_class_change, subject_items,
                                               text_of)
from kira.reasoning.types import EvidenceItem


@dataclass(frozen=True)
class RecordedChange:
    """A consecutive temporal pair whose later document states a class-level change."""

    earlier: int  # document chunk id
    later: int
    statement: str
    step: np.ndarray  # unit vector of v(later) - v(earlier)
    length: float  # |v(later) - v(earlier)|
    start: np.ndarray  # unit v(earlier)


@dataclass(frozen=True)
class Analogy:
    """The recorded change lent to the question's sequence."""

    change: RecordedChange
    earliest: str  # the question's sequence: doc ids of the compared members
    latest: str
    step_length: float
    cosine: float  # of the two steps
    note: str


def change_statement(text: str, *, with_values: bool = False) -> str | None:
    """The first sentence of `text` that states a change in class-level words (no value; with
    `with_values` also "R1 changed from 4.7k to 22k"), or None."""
    states = states_change if with_values else states_class_change
    return next((sentence for sentence, is_meta, context in sentences_of(text)
                 if not is_meta and states(sentence, context)), None)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


def _doc_vectors(kb: Any, doc_ids: Sequence[str]) -> dict[str, np.ndarray]:
    index = kb.index("visual")
    if index is None:
        return {}
    chunk = kb.store.document_chunk_ids(doc_ids)
    present = [d for d in doc_ids if d in chunk and index.contains(int(chunk[d]))]  # a document without an image has none
    if not present:
        return {}
    vecs = np.asarray(index.get_vectors(np.array([chunk[d] for d in present], dtype=np.int64)), dtype=np.float32)
    return dict(zip(present, vecs))


def temporal_sequences(kb: Any) -> list[list[str]]:
    """Every temporal group of `kb` with two or more members, as doc ids in order; cached per commit."""
    return kb.memo("temporal_sequences",
                   lambda: [docs for kind, _gid, docs in kb.store.groups() if kind == "temporal" and len(docs) >= 2])


def recorded_changes(kb: Any) -> list[RecordedChange]:
    """Every recorded change in `kb` (module docstring); cached per commit."""

    def build() -> list[RecordedChange]:
        sequences = temporal_sequences(kb)
        members = sorted({d for docs in sequences for d in docs})
        if not members:
            return []
        rows = kb.store.documents(members)
        vectors = _doc_vectors(kb, members)
        chunk = kb.store.document_chunk_ids(members)
        out = []
        for docs in sequences:
            for earlier, later in zip(docs, docs[1:]):
                row = rows.get(later)
                if row is None or earlier not in vectors or later not in vectors:
                    continue
                statement = change_statement(row.caption or "")
                if statement is None:
                    continue
                step = vectors[later] - vectors[earlier]
                out.append(RecordedChange(chunk[earlier], chunk[later], statement, _unit(step),
                                          float(np.linalg.norm(step)), _unit(vectors[earlier])))
        return out

    return kb.memo("recorded_changes", build)


def compared_sequence(kb: Any, question: str, items: Sequence[EvidenceItem], *,
                      with_values: bool = False) -> list[str] | None:
    """The temporal sequence (doc ids in order, members in `items`) a comparison question asks about
    whose own documents state no change; None when the question compares nothing, no sequence is in
    the evidence, or its documents already say what changed in class-level words (with
    `with_values`, in any words: "R1 changed from 4.7k to 22k" is one design's change too)."""
    if not question or not is_comparison(question):
        return None
    subject = subject_items(question, tuple(items))
    rank = {}
    for n, item in enumerate(subject or items):
        rank.setdefault(item.doc_id, n)
    sequences = [[d for d in docs if d in rank] for docs in temporal_sequences(kb)]
    sequences = [s for s in sequences if len(s) >= 2]
    if not sequences:
        return None
    # the sequence the question names (else the best-ranked one with the most members in the evidence)
    named = min(sequences, key=lambda s: (-len(s), min(rank[d] for d in s)))
    texts = {i.doc_id: text_of(i) for i in items}
    if any(change_statement(texts[d], with_values=with_values) for d in named[1:]):
        return None  # its own documents say what changed
    return named


def change_by_analogy(kb: Any, question: str, items: Sequence[EvidenceItem], config: KiraConfig) -> Analogy | None:
    """The analogue of the change of the temporal sequence `items` compare (module docstring), or None."""
    named = compared_sequence(kb, question, items)
    if named is None:
        return None
    changes = recorded_changes(kb)
    if not changes:
        return None
    vectors = _doc_vectors(kb, [named[0], named[-1]])
    if len(vectors) < 2:
        return None
    step = vectors[named[-1]] - vectors[named[0]]
    length = float(np.linalg.norm(step))
    typical = float(np.median([c.length for c in changes]))
    if length < config.hops.change_min_share * typical:
        return None
    step_u, start_u = _unit(step), _unit(vectors[named[0]])
    own = set(kb.store.document_chunk_ids(named).values())
    scored = [(float(step_u @ c.step), float(start_u @ c.start), c) for c in changes
              if c.later not in own and c.earlier not in own]
    scored = [s for s in scored if s[0] >= config.hops.analogy_min_cosine]
    if not scored:
        return None
    cos_step, _cos_start, best = max(scored, key=lambda s: (s[0] + s[1], -s[2].later))
    note = (f"{named[0]} -> {named[-1]} moved {length:.2f} in the visual space ({length / typical:.1f}x the median "
            f"recorded change) and states no change; the recorded change it resembles most (step cosine "
            f"{cos_step:.2f}) says: '{best.statement}'")
    return Analogy(best, named[0], named[-1], length, cos_step, note)


@dataclass(frozen=True)
class MeasuredChange:
    """The change of a sequence measured along its finding (module docstring)."""

    earliest: str  # doc ids of the compared members
    latest: str
    finding: str
    share: float  # d . a / |a|^2
    statement: str  # "Compared with the baseline, <finding> has decreased"
    note: str


_CLAUSE_SPLIT = re.compile(r"\s*[,;]\s*")
_LEAD_VERB = re.compile(r"^(?:shows?|showing|depicts?|depicting)\s+", re.I)  # "Shows open water" -> "open water"


def finding_of(texts: Sequence[str]) -> tuple[str, frozenset[str]] | None:
    """(The content statement most of `texts` make, its shape), or None when they state none.

    Statements of change are left out; clauses holding a value are cut from the wording
    (the shape keeps a placeholder, so other documents match whatever their value)."""
    counts: dict[frozenset[str], list] = {}
    for text in texts:
        seen = set()
        for sentence, is_meta, context in sentences_of(text):
            if is_meta or states_change(sentence, context):
                continue
            shape = statement_shape(sentence)
            if not shape or shape in seen:
                continue
            seen.add(shape)
            counts.setdefault(shape, [0, sentence])[0] += 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1][0])  # stable: ties keep the first stated
    for shape, (_n, sentence) in ranked:
        wording = ", ".join(c for c in _CLAUSE_SPLIT.split(sentence) if c and not any(ch.isdigit() for ch in c))
        wording = _LEAD_VERB.sub("", wording)
        if wording:
            return wording, shape
    return None


def statement_documents(kb: Any) -> dict[frozenset[str], frozenset[str]]:
    """{statement shape: doc ids whose caption states it}, over every document; cached per commit."""

    def build() -> dict[frozenset[str], frozenset[str]]:
        out: dict[frozenset[str], set[str]] = {}
        for doc_id, row in kb.store.documents().items():
            for sentence, is_meta, _context in sentences_of(row.caption or ""):
                if not is_meta:
                    out.setdefault(statement_shape(sentence), set()).add(doc_id)
        return {shape: frozenset(docs) for shape, docs in out.items()}

    return kb.memo("statement_documents", build)


def _document_space(kb: Any) -> tuple[dict[str, int], np.ndarray]:
    """({doc id: row}, unit raw visual vectors of every document with an image), cached per commit.

    Raw: the encoder's features, not the domain adapter's projection, which is trained to
    pull one class's images together and so flattens how much of a finding an image shows."""

    def build() -> tuple[dict[str, int], np.ndarray]:
        docs = sorted(kb.store.documents())
        chunk = kb.store.document_chunk_ids(docs)
        present = [d for d in docs if d in chunk]
        if not present or kb.vectors is None:
            return {}, np.zeros((0, 0), np.float32)
        raw = kb.store.vectors("visual", [chunk[d] for d in present], kb.vectors.dims["visual"])
        norms = np.linalg.norm(raw, axis=1)
        keep = np.flatnonzero(norms > 0)  # a document without an image has no visual vector
        rows = {present[i]: n for n, i in enumerate(keep)}
        return rows, (raw[keep] / norms[keep, None]).astype(np.float32)

    return kb.memo("document_space", build)


def change_along_finding(kb: Any, question: str, items: Sequence[EvidenceItem],
                         config: KiraConfig) -> MeasuredChange | None:
    """The change of the compared sequence measured along its finding (module docstring), or None."""
    named = compared_sequence(kb, question, items, with_values=True)
    if named is None:
        return None
    texts = {i.doc_id: text_of(i) for i in items}
    found = finding_of([texts[d] for d in named])
    if found is None:
        return None
    wording, shape = found
    rows, matrix = _document_space(kb)
    if named[0] not in rows or named[-1] not in rows or len(rows) < 2:
        return None
    changes = recorded_changes(kb)
    if changes:  # where the knowledge base records changes, a step too short for the analogy's step test is no change
        ends = _doc_vectors(kb, [named[0], named[-1]])  # in the visual index's space, like the recorded steps
        if len(ends) < 2 or float(np.linalg.norm(ends[named[-1]] - ends[named[0]])) < (
                config.hops.change_min_share * float(np.median([c.length for c in changes]))):
            return None
    step = matrix[rows[named[-1]]] - matrix[rows[named[0]]]
    compound = kb.compound_of()
    own = {compound.get(d, d) for d in named}
    showing = [rows[d] for d in statement_documents(kb).get(shape, ()) if d in rows and compound.get(d, d) not in own]
    if len(showing) < config.hops.finding_min_documents:
        return None
    axis = matrix[showing].mean(axis=0) - matrix.mean(axis=0)
    reach = float(axis @ axis)
    if reach <= 1e-12:
        return None
    share = float(step @ axis / reach)
    limit = config.hops.finding_min_share
    if abs(share) < limit:
        return None  # not moving along the finding is no proof of no change (a value in a drawing)
    verb = "increased" if share > 0 else "decreased"
    lowered = wording[:1].lower() + wording[1:] if wording[1:2].islower() else wording  # "Clear lungs", not "RC"
    statement = f"Compared with the baseline, {lowered} has {verb}"
    note = (f"{named[0]} -> {named[-1]} states no change and resembles no recorded change; measured along its finding "
            f"'{wording}' (from the mean of all {len(rows)} documents towards the {len(showing)} other documents that "
            f"state it, length {np.sqrt(reach):.3f}) the step covers {share:+.2f} of that way "
            f"(|share| >= {limit:.2f} counts as a change): {verb}")
    return MeasuredChange(named[0], named[-1], wording, share, statement, note)


def measured_item(kb: Any, measured: MeasuredChange) -> EvidenceItem | None:
    """The measurement as an evidence item of the latest document on path "measured": its text is the
    statement (provenance "label"), not the document's caption; provenance "measured" holds the figures."""
    from kira.pipeline.evidence import build_items

    chunk = kb.store.document_chunk_ids([measured.latest]).get(measured.latest)
    if chunk is None:
        return None
    items = build_items(kb, [chunk], [1.0], {chunk: [MEASURED_PATH]}, {})
    if not items:
        return None
    item = items[0]
    provenance = {k: v for k, v in item.provenance.items() if k != "caption"}
    provenance.update(label=measured.statement, measured={"from": measured.earliest, "to": measured.latest,
                                                        "share": round(measured.share, 4), "finding": measured.finding})
    return dataclasses.replace(item, summary=measured.statement, provenance=provenance)


def analogy_item(kb: Any, analogy: Analogy) -> EvidenceItem | None:
    """The analogue's later document as an evidence item on path "analogy" (numbered by the pack)."""
    from kira.pipeline.evidence import build_items

    items = build_items(kb, [analogy.change.later], [analogy.cosine], {analogy.change.later: [ANALOGY_PATH]}, {})
    return items[0] if items else None
