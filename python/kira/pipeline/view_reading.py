"""Reading a silent view: what a view whose record is only bookkeeping shows, by its image.

Used by the pipeline for a question that asks what the views of one subject show together,
or whether they agree (kira.reasoning.view_agreement.asks_agreement). A view whose text
states only bookkeeping ("PA chest radiograph, patient P040, study 1. Reported by Dr.
Tanaka.") cannot be compared by its words, so the answer could not say the views agree.
`read_silent_views` reads its image instead: its `view_neighbours` nearest documents that
state any content (cosine of the encoder's unit features, kira.pipeline.measured_change's
document space; the subject's own compound document and view set left out) vote for each
statement another view of its set states (one vote per neighbour that states it, position
words aside: "left pleural effusion" votes for "right pleural effusion"). Every such
statement with at least `view_min_votes` votes is read into the view: the item gets path
"read" and ``provenance["read"]`` = {"statements", "votes", "neighbours"}, and the
generator reads the statements after its caption (template_generator.text_of). Clauses
holding a value are cut ("enlarged cardiac silhouette", not "cardiothoracic ratio about
0.65": a neighbour's value is not this image's). A view whose neighbours do not agree on
what its set states stays silent, and the answer does not say the views agree; what
neighbours agree on that the set does not state is not read (too weak a reading to claim
the views disagree).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.pipeline.measured_change import document_space, statement_documents
from kira.reasoning.template_generator import (READ_PATH, same_statement, sentences_of, statement_shape, text_of,
                                              without_values)
from kira.reasoning.types import EvidenceItem


@dataclass(frozen=True)
class ViewReading:
    """What one silent view's image was read as."""

    doc_id: str
    statements: tuple[str, ...]  # value clauses cut, in the stating view's order
    votes: tuple[int, ...]  # per statement, of len(neighbours)
    neighbours: tuple[str, ...]  # doc ids, nearest first

    @property
    def note(self) -> str:
        said = "; ".join(f"'{s}' ({v} of {len(self.neighbours)})" for s, v in zip(self.statements, self.votes))
        return (f"{self.doc_id} states only bookkeeping; its {len(self.neighbours)} nearest images with a report "
                f"({', '.join(self.neighbours)}) state what another view of its set states: {said}")


def document_statements_by_doc(kb: Any) -> dict[str, frozenset[frozenset[str]]]:
    """{doc id: the statement shapes its caption states} for documents that state any (cached per commit)."""

    def build() -> dict[str, frozenset[frozenset[str]]]:
        out: dict[str, set[frozenset[str]]] = {}
        for shape, docs in statement_documents(kb).items():
            for doc in docs:
                out.setdefault(doc, set()).add(shape)
        return {doc: frozenset(shapes) for doc, shapes in out.items()}

    return kb.memo("document_statements_by_doc", build)


def documents_by_row(kb: Any) -> list[str]:
    """Doc ids in document-space row order (cached per commit)."""
    return kb.memo("documents_by_row", lambda: [d for d, _ in sorted(document_space(kb)[0].items(), key=lambda kv: kv[1])])


def _content(item: EvidenceItem) -> list[tuple[str, frozenset[str]]]:
    """(sentence, shape) of each content sentence of the item's text."""
    return [(s, statement_shape(s)) for s, is_meta, _ in sentences_of(text_of(item)) if not is_meta]


def read_view(kb: Any, doc_id: str, stated: Sequence[tuple[str, frozenset[str]]], exclude: set[str],
              config: KiraConfig) -> ViewReading | None:
    """The statements of `stated` (sentence, shape) that doc_id's nearest documents with a report agree
    on (>= view_min_votes of view_neighbours), or None; `exclude`: doc ids that may not vote."""
    rows, matrix = document_space(kb)
    shapes = document_statements_by_doc(kb)
    if doc_id not in rows:
        return None
    by_row = documents_by_row(kb)
    sims = matrix @ matrix[rows[doc_id]]
    nearest = []
    for row in np.argsort(-sims, kind="stable").tolist():
        doc = by_row[row]
        if doc != doc_id and doc not in exclude and doc in shapes:
            nearest.append(doc)
            if len(nearest) == config.hops.view_neighbours:
                break
    if not nearest:
        return None
    read, votes = [], []
    for sentence, shape in stated:
        n = sum(any(s == shape or same_statement(s, shape) for s in shapes[d]) for d in nearest)
        wording = without_values(sentence)
        if n >= config.hops.view_min_votes and wording and wording not in read:
            read.append(wording)
            votes.append(n)
    return ViewReading(doc_id, tuple(read), tuple(votes), tuple(nearest)) if read else None


def read_silent_views(kb: Any, items: Sequence[EvidenceItem], config: KiraConfig) -> tuple[list[EvidenceItem],
                                                                                               list[str]]:
    """`items` with every silent view of a multiview set some other view of which states content read
    from its image (module docstring), and a note per view read. Items are replaced in place, so the
    pack keeps its order and size."""
    sets: dict[str, list[EvidenceItem]] = {}
    for item in items:
        key = (item.provenance or {}).get("views")
        if key:
            sets.setdefault(str(key), []).append(item)
    compound = kb.compound_of()
    view_set = kb.view_set_of()
    out, notes = list(items), []
    for key, members in sets.items():
        content = {i.doc_id: _content(i) for i in members}
        stated = list(dict.fromkeys(pair for pairs in content.values() for pair in pairs))
        silent = {i.doc_id for i in members if not content[i.doc_id]}
        if not stated or not silent:
            continue
        own = {compound.get(d, d) for d in content} | {view_set[d] for d in content if d in view_set}
        exclude = {d for d, c in compound.items() if c in own} | {d for d, v in view_set.items() if v in own} | set(content)
        for doc_id in sorted(silent):
            reading = read_view(kb, doc_id, stated, exclude, config)
            if reading is None:
                continue
            notes.append(reading.note)
            for n, item in enumerate(out):
                if item.doc_id == doc_id and (item.provenance or {}).get("views") == key:
                    provenance = dict(item.provenance)
                    provenance["read"] = {"statements": list(reading.statements), "votes": list(reading.votes),
                                          "neighbours": list(reading.neighbours)}
                    out[n] = dataclasses.replace(item, paths=tuple(dict.fromkeys((*item.paths, READ_PATH))),
                                                 provenance=provenance)
    return out, notes
