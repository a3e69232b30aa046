"""Change along the finding: the step of a compared sequence read against what it shows.

Used by the pipeline when change by analogy (`kira.pipeline.change`) finds no recorded
change to lend: the question compares a temporal sequence whose own documents state no
change.

`change_along_finding` reads the sequence's step against its own finding. The finding is
the content statement most of the sequence's documents make (clauses holding a value
cut: "enlarged cardiac silhouette", not "cardiothoracic ratio about 0.65"); its
direction is a = mean(v of the other documents that state it word for word, position
words included) - mean(v of every document), from the average image towards the images
that show it (v: the encoder's unit features, not the domain adapter's projection, which
pulls one class together). The step's share of that way, s = d . a / |a|^2, says whether
the latest image shows more of the finding (s >= `HopConfig.finding_min_share`) or less
(s <= -finding_min_share), provided every member between them lies on the same side of the
first (a change seen at each study; a middle study that moved the other way makes the end's
share noise as likely as change, and nothing is added). The statement ("Compared with the
baseline, <finding> has decreased") joins the evidence as an item of the latest document on
path "measured", its text the measurement, not the document's caption; the trace records s,
|a| and how many documents defined a. A step with |s| < `finding_stable_share` reads as no change ("Compared
with the baseline, <finding> has remained unchanged"; for a list of findings, "Both studies show
<findings>, with no interval change": `change_wording`) unless the knowledge base shows its
encoder can miss a change: a temporal sequence whose own documents state a change (with values
too) that moves less than that along its finding (`documented_change_shares`; a component value
redrawn in a schematic: the pixels barely show it). There a short step is no proof of no
change and nothing is added; between the two thresholds neither a change nor its absence is
measured. Where the knowledge base records changes, a step shorter than the analogy's step
test allows (`change_min_share` of their median) adds nothing either. Any change statement
in the sequence's own documents (with values too: "R1 changed from 4.7k to 22k"), or fewer
than `finding_min_documents` other documents stating the finding: nothing is added.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.pipeline.change import (change_statement, compared_sequence, document_vectors, recorded_changes,
                                  temporal_sequences)
from kira.reasoning.template_generator import (MEASURED_PATH, sentences_of, statement_shape, states_change, text_of,
                                              without_values)
from kira.reasoning.types import EvidenceItem


@dataclass(frozen=True)
class MeasuredChange:
    """The change of a sequence measured along its finding (module docstring)."""

    earliest: str  # doc ids of the compared members
    latest: str
    finding: str
    share: float  # d . a / |a|^2
    statement: str  # "Compared with the baseline, <finding> has decreased"
    note: str


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
        wording = without_values(sentence)
        if wording:
            return wording, shape
    return None


def statement_documents(kb: Any) -> dict[frozenset[str], frozenset[str]]:
    """{statement shape: doc ids whose caption states it}, over every document with a document
    chunk; cached per commit, and kept across commits (`KnowledgeBase.kept_view`): only new
    captions are parsed."""

    def read(after: int, upto: int) -> dict[int, tuple[str, frozenset[frozenset[str]]]]:
        rows = kb.store.conn.execute(
            "SELECT c.id, d.doc_id, d.caption FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
            "WHERE c.level = 'document' AND c.id > ? AND c.id <= ? ORDER BY c.id", (int(after), int(upto)))
        return {int(cid): (doc_id, frozenset(statement_shape(sentence) for sentence, is_meta, _ in
                                             sentences_of(caption or "") if not is_meta))
                for cid, doc_id, caption in rows}

    def update(previous: dict, new: dict, gone: np.ndarray) -> dict:
        removed = set(gone.tolist())
        return {**{c: v for c, v in previous.items() if c not in removed}, **new}

    def build() -> dict[frozenset[str], frozenset[str]]:
        by_chunk = kb.kept_view("statement_documents", read=read, build=lambda rows: rows, update=update)
        out: dict[frozenset[str], set[str]] = {}
        for doc_id, shapes in by_chunk.values():
            for shape in shapes:
                out.setdefault(shape, set()).add(doc_id)
        return {shape: frozenset(docs) for shape, docs in out.items()}

    return kb.memo("statement_documents", build)


def document_space(kb: Any) -> tuple[dict[str, int], np.ndarray]:
    """({doc id: row}, unit raw visual vectors of every document with an image), rows in
    document-chunk order; cached per commit, and kept across commits (`KnowledgeBase.kept_view`).

    Raw: the encoder's features, not the domain adapter's projection, which is trained to
    pull one class's images together and so flattens how much of a finding an image shows."""

    def read(after: int, upto: int) -> tuple[list[str], np.ndarray, np.ndarray]:
        found = kb.store.conn.execute(
            "SELECT id, doc_id FROM chunks WHERE level = 'document' AND visual IS NOT NULL AND id > ? AND id <= ? "
            "ORDER BY id", (int(after), int(upto))).fetchall()
        chunks = np.array([r[0] for r in found], dtype=np.int64)
        raw = kb.store.vectors("visual", chunks, kb.vectors.dims["visual"])  # (0, dim) when none
        norms = np.linalg.norm(raw, axis=1)
        keep = np.flatnonzero(norms > 0)  # an all-zero vector: no image
        return [found[i][1] for i in keep], chunks[keep], (raw[keep] / norms[keep, None]).astype(np.float32)

    def update(previous, new, gone: np.ndarray):
        docs, chunks, matrix = previous
        keep = ~np.isin(chunks, gone)
        return ([d for d, k in zip(docs, keep.tolist()) if k] + new[0], np.concatenate([chunks[keep], new[1]]),
                np.concatenate([matrix[keep], new[2]]))

    def build() -> tuple[dict[str, int], np.ndarray]:
        if kb.vectors is None:
            return {}, np.zeros((0, 0), np.float32)
        docs, _chunks, matrix = kb.kept_view("document_space", read=read, build=lambda rows: rows, update=update)
        if not docs:
            return {}, np.zeros((0, 0), np.float32)
        return {d: n for n, d in enumerate(docs)}, matrix

    return kb.memo("document_space", build)


@dataclass(frozen=True)
class _Reading:
    """A sequence's step read along its finding."""

    wording: str  # the finding, value clauses cut
    share: float  # d . a / |a|^2
    length: float  # |a|
    showing: int  # other documents that state the finding (define a)
    documents: int  # documents in the space
    between: tuple[float, ...] = ()  # the share of each member between the first and the last


def _read_along_finding(kb: Any, named: Sequence[str], texts: Sequence[str], config: KiraConfig) -> _Reading | None:
    """The step named[0] -> named[-1] read along the finding `texts` (the sequence's documents) state, or None
    when they state none, a member has no image, or fewer than `finding_min_documents` others state it."""
    found = finding_of(texts)
    if found is None:
        return None
    wording, shape = found
    rows, matrix = document_space(kb)
    if named[0] not in rows or named[-1] not in rows or len(rows) < 2:
        return None
    compound = kb.compound_of()
    own = {compound.get(d, d) for d in named}
    showing = [rows[d] for d in statement_documents(kb).get(shape, ()) if d in rows and compound.get(d, d) not in own]
    if len(showing) < config.hops.finding_min_documents:
        return None
    axis = matrix[showing].mean(axis=0) - matrix.mean(axis=0)
    reach = float(axis @ axis)
    if reach <= 1e-12:
        return None
    first = matrix[rows[named[0]]]
    step = matrix[rows[named[-1]]] - first
    between = tuple(float((matrix[rows[d]] - first) @ axis / reach) for d in named[1:-1] if d in rows)
    return _Reading(wording, float(step @ axis / reach), float(np.sqrt(reach)), len(showing), len(rows), between)


def documented_change_shares(kb: Any, config: KiraConfig) -> tuple[float, ...]:
    """The share along its finding of every temporal sequence whose own documents state a change (in
    any words: "R1 changed from 4.7k to 22k" too), from its first to its last member; cached per commit.

    What these shares look like says whether a short step along the finding can be read as no change:
    a documented change that hardly moves along its finding (a component value redrawn in a schematic)
    shows the encoder misses this knowledge base's changes."""

    def build() -> tuple[float, ...]:
        sequences = temporal_sequences(kb)
        rows = kb.store.documents(sorted({d for docs in sequences for d in docs}))
        out = []
        for docs in sequences:
            texts = [rows[d].caption or "" if d in rows else "" for d in docs]
            if not any(change_statement(t, with_values=True) for t in texts[1:]):
                continue
            reading = _read_along_finding(kb, docs, texts, config)
            if reading is not None:
                out.append(reading.share)
        return tuple(out)

    return kb.memo(f"documented_change_shares:{config.hops.finding_min_documents}", build)


def change_along_finding(kb: Any, question: str, items: Sequence[EvidenceItem],
                         config: KiraConfig) -> MeasuredChange | None:
    """The change of the compared sequence measured along its finding (module docstring), or None."""
    named = compared_sequence(kb, question, items, with_values=True)
    if named is None:
        return None
    texts = {i.doc_id: text_of(i) for i in items}
    changes = recorded_changes(kb)
    if changes:  # where the knowledge base records changes, a step too short for the analogy's step test is no change
        ends = document_vectors(kb, [named[0], named[-1]])  # in the visual index's space, like the recorded steps
        if len(ends) < 2 or float(np.linalg.norm(ends[named[-1]] - ends[named[0]])) < (
                config.hops.change_min_share * float(np.median([c.length for c in changes]))):
            return None
    reading = _read_along_finding(kb, named, [texts[d] for d in named], config)
    if reading is None:
        return None
    share, hops = reading.share, config.hops
    measured = (f"{named[0]} -> {named[-1]} states no change and resembles no recorded change; measured along its "
                f"finding '{reading.wording}' (from the mean of all {reading.documents} documents towards the "
                f"{reading.showing} other documents that state it, length {reading.length:.3f}) the step covers "
                f"{share:+.2f} of that way")
    if abs(share) >= hops.finding_min_share:
        if any(s * share < 0 for s in reading.between):
            return None  # a study between moved the other way: noise, not a change seen at each study
        verb = "increased" if share > 0 else "decreased"
        note = f"{measured} (|share| >= {hops.finding_min_share:.2f} counts as a change): {verb}"
    elif abs(share) < hops.finding_stable_share:
        documented = documented_change_shares(kb, config)
        if any(abs(s) < hops.finding_stable_share for s in documented):
            return None  # a documented change that moved as little: a short step is no proof of no change
        verb = "remained unchanged"
        basis = (f"all {len(documented)} documented changes in the knowledge base move further along their findings, "
                 f"the least {min(map(abs, documented)):.2f}" if documented else
                 "no sequence in the knowledge base documents a change that moved less")
        note = f"{measured} (|share| < {hops.finding_stable_share:.2f} reads as no change: {basis}): {verb}"
    else:
        return None  # between the two: neither a change nor its absence is measured
    return MeasuredChange(named[0], named[-1], reading.wording, share, change_wording(reading.wording, verb), note)


def change_wording(finding: str, verb: str) -> str:
    """The measured statement: "Compared with the baseline, <finding> has <verb>". A list of findings
    that has remained unchanged ("clear lungs, normal cardiomediastinal silhouette, no effusion": a
    comma between clauses) is no subject for "has", and reads "Both studies show <findings>, with no
    interval change"."""
    lowered = finding[:1].lower() + finding[1:] if finding[1:2].islower() else finding  # "Clear lungs", not "RC"
    if verb == "remained unchanged" and "," in finding:
        return f"Both studies show {lowered}, with no interval change"
    return f"Compared with the baseline, {lowered} has {verb}"


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
