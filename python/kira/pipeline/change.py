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

Without an analogue, `kira.pipeline.measured_change` measures the step along the
sequence's own finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.reasoning.template_generator import (ANALOGY_PATH, is_comparison, sentences_of, states_change,
                                               states_class_change, subject_items, text_of)
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


def document_vectors(kb: Any, doc_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """{doc id: its document chunk's vector in the visual index} for the documents that have one."""
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
        vectors = document_vectors(kb, members)
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
    vectors = document_vectors(kb, [named[0], named[-1]])
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


def analogy_item(kb: Any, analogy: Analogy) -> EvidenceItem | None:
    """The analogue's later document as an evidence item on path "analogy" (numbered by the pack)."""
    from kira.pipeline.evidence import build_items

    items = build_items(kb, [analogy.change.later], [analogy.cosine], {analogy.change.later: [ANALOGY_PATH]}, {})
    return items[0] if items else None
