"""Reading a view by its image: what a view whose record is only bookkeeping shows, and what a
view's report leaves unstated that the reports of images like it agree on.

Used by the pipeline for a question that asks what the views of one subject show together,
or whether they agree (kira.reasoning.view_agreement.asks_agreement). Two readings, both
votes of a view's `view_neighbours` nearest documents that state any content (cosine of the
encoder's unit features, kira.pipeline.measured_change's document space; the subject's own
documents -- its compound document and view set -- left out):

- A silent view. A view whose text states only bookkeeping ("PA chest radiograph, patient
  P040, study 1. Reported by Dr. Tanaka.") cannot be compared by its words, so the answer
  could not say the views agree. `read_view` reads its image instead: its neighbours vote
  for each statement another view of its set states (one vote per neighbour that states
  it, position words aside: "left pleural effusion" votes for "right pleural effusion").
  Every such statement with at least `view_min_votes` votes is read into the view. A view
  whose neighbours do not agree on what its set states stays silent, and the answer does
  not say the views agree.
- What the subject leaves unstated. A view that states findings but whose subject states no
  conclusion ("patchy consolidation in the left lower zone", and no view or study of the
  patient gives an impression) leaves the question half answered. `read_unstated` reads the
  conclusion by what reported images like it conclude: its neighbours are the nearest
  documents that state what the view states and something its subject does not (a
  neighbour that states nothing more is silent on it and abstains); a statement, by its
  exact shape, that at least `view_min_votes` of them state is read into the view. Only a
  view that states everything its subject states is read this way: where another view or
  study states more (an impression), the subject already speaks, and a neighbour's rival
  reading ("benign colon tissue" beside a stated "benign breast tissue") is not read. A
  position word the view's own statements do not use is cut from what is read ("left
  pleural effusion" read into a view of the right costophrenic angle is "pleural
  effusion"): a neighbour's side is not this image's.

A view read gets path "read" and ``provenance["read"]`` = {"statements", "votes",
"neighbours"}, and the generator reads the statements after its caption
(template_generator.text_of). Clauses holding a value are cut ("enlarged cardiac
silhouette", not "cardiothoracic ratio about 0.65": a neighbour's value is not this
image's). The text of a read view's own document is unchanged, so the grounding verifier
still scores a claim only on what the evidence states: a conclusion read from images is
cited to the view it was read into and scored on that view's own words.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.pipeline.measured_change import document_space, statement_documents
from kira.reasoning.template_generator import (POSITION_STEMS, READ_PATH, consensus_text, same_statement,
                                              sentences_of, statement_shape, subject_items, text_of, without_values)
from kira.reasoning.text_tokens import content_tokens, stem
from kira.reasoning.types import EvidenceItem


Shape = frozenset[str]  # a statement as the generator matches statements (template_generator.statement_shape)


@dataclass(frozen=True)
class ViewReading:
    """What one view's image was read as."""

    doc_id: str
    statements: tuple[str, ...]  # value clauses cut
    votes: tuple[int, ...]  # per statement, of len(neighbours)
    neighbours: tuple[str, ...]  # doc ids, nearest first
    silent: bool = True  # read for what its set states; else for what its subject leaves unstated

    @property
    def note(self) -> str:
        said = "; ".join(f"'{s}' ({v} of {len(self.neighbours)})" for s, v in zip(self.statements, self.votes))
        near = f"its {len(self.neighbours)} nearest images with a report ({', '.join(self.neighbours)})"
        if self.silent:
            return f"{self.doc_id} states only bookkeeping; {near} state what another view of its set states: {said}"
        return (f"{self.doc_id} states everything its subject states; {near}, which state it too, also state what "
                f"its subject leaves unstated: {said}")


def document_statements_by_doc(kb: Any) -> dict[str, frozenset[Shape]]:
    """{doc id: the statement shapes its caption states} for documents that state any (cached per commit)."""

    def build() -> dict[str, frozenset[Shape]]:
        out: dict[str, set[Shape]] = {}
        for shape, docs in statement_documents(kb).items():
            for doc in docs:
                out.setdefault(doc, set()).add(shape)
        return {doc: frozenset(shapes) for doc, shapes in out.items()}

    return kb.memo("document_statements_by_doc", build)


def documents_by_row(kb: Any) -> list[str]:
    """Doc ids in document-space row order (cached per commit)."""
    return kb.memo("documents_by_row", lambda: [d for d, _ in sorted(document_space(kb)[0].items(), key=lambda kv: kv[1])])


def tags_by_doc(kb: Any) -> dict[str, frozenset[str]]:
    """{doc id: its tags, lower-cased} for documents with any (cached per commit)."""

    def build() -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for doc, tag in kb.store.conn.execute("SELECT doc_id, tag FROM tags"):
            out.setdefault(doc, set()).add(str(tag).lower())
        return {doc: frozenset(tags) for doc, tags in out.items()}

    return kb.memo("tags_by_doc", build)


def members_by_group(kb: Any) -> dict[tuple[str, str], frozenset[str]]:
    """{("compound", its key) or ("views", view set id): its doc ids} (cached per commit): who a
    subject is, without a scan of every document per question."""

    def build() -> dict[tuple[str, str], frozenset[str]]:
        out: dict[tuple[str, str], set[str]] = {}
        for kind, groups in (("compound", kb.compound_of()), ("views", kb.view_set_of())):
            for doc, group in groups.items():
                out.setdefault((kind, group), set()).add(doc)
        return {group: frozenset(docs) for group, docs in out.items()}

    return kb.memo("members_by_group", build)


def _content(item: EvidenceItem) -> list[tuple[str, Shape]]:
    """(sentence, shape) of each content sentence of the item's text."""
    return [(s, statement_shape(s)) for s, is_meta, _ in sentences_of(text_of(item)) if not is_meta]


def _matches(shape: Shape, others: Iterable[Shape]) -> bool:
    return any(shape == o or same_statement(shape, o) for o in others)


def _nearest(kb: Any, doc_id: str, exclude: set[str], config: KiraConfig,
             admit: Callable[[str], bool] = lambda doc: True) -> list[str]:
    """doc_id's `view_neighbours` nearest documents that state content, are not in `exclude` and pass
    `admit`, nearest first; [] when doc_id has no image."""
    rows, matrix = document_space(kb)
    shapes = document_statements_by_doc(kb)
    if doc_id not in rows:
        return []
    by_row = documents_by_row(kb)
    sims = matrix @ matrix[rows[doc_id]]
    nearest: list[str] = []
    for row in np.argsort(-sims, kind="stable").tolist():
        doc = by_row[row]
        if doc != doc_id and doc not in exclude and doc in shapes and admit(doc):
            nearest.append(doc)
            if len(nearest) == config.hops.view_neighbours:
                break
    return nearest


def read_view(kb: Any, doc_id: str, stated: Sequence[tuple[str, Shape]], exclude: set[str],
              config: KiraConfig) -> ViewReading | None:
    """The statements of `stated` (sentence, shape) that doc_id's nearest documents with a report agree
    on (>= view_min_votes of view_neighbours), or None; `exclude`: doc ids that may not vote."""
    nearest = _nearest(kb, doc_id, exclude, config)
    if not nearest:
        return None
    shapes = document_statements_by_doc(kb)
    read, votes = [], []
    for sentence, shape in stated:
        n = sum(_matches(shape, shapes[d]) for d in nearest)
        wording = without_values(sentence)
        if n >= config.hops.view_min_votes and wording and wording not in read:
            read.append(wording)
            votes.append(n)
    return ViewReading(doc_id, tuple(read), tuple(votes), tuple(nearest)) if read else None


def _wording(kb: Any, doc_id: str, shape: Shape) -> str:
    """The sentence of doc_id's caption whose shape is `shape`, value clauses cut; "" if none."""
    row = kb.store.documents([doc_id]).get(doc_id)
    for sentence, is_meta, _ in sentences_of((row.caption or "") if row is not None else ""):
        if not is_meta and statement_shape(sentence) == shape:
            return without_values(sentence)
    return ""


def _placed_as(wording: str, own_stems: frozenset[str]) -> str:
    """`wording` without the position words (left, lower, ...) that `own_stems` do not hold."""
    kept = frozenset(stem(t) for t in content_tokens(wording))
    kept -= {s for s in kept if s in POSITION_STEMS and s not in own_stems}
    return consensus_text(wording, kept)


def read_unstated(kb: Any, doc_id: str, own: Sequence[tuple[str, Shape]], subject_states: Iterable[Shape],
                  exclude: set[str], config: KiraConfig) -> ViewReading | None:
    """What doc_id's nearest documents that state what it states (`own`: its (sentence, shape)s) and
    something more agree on (>= view_min_votes of view_neighbours, each statement by its exact
    shape) that nothing of `subject_states` states; None when they agree on nothing, or when the
    subject states something doc_id does not (module docstring). `exclude`: doc ids that may not vote."""
    own_shapes = [shape for _, shape in own]
    subject_states = list(subject_states)
    if not own_shapes or not all(_matches(t, own_shapes) for t in subject_states):
        return None
    shapes = document_statements_by_doc(kb)

    def unstated(shape: Shape) -> bool:
        return not _matches(shape, subject_states) and not _matches(shape, own_shapes)

    tags = tags_by_doc(kb)
    kind = tags.get(doc_id, frozenset())

    def speaks(doc: str) -> bool:  # an image of its kind whose report states what it states, and more
        return (kind <= tags.get(doc, frozenset()) and any(_matches(s, own_shapes) for s in shapes[doc])
                and any(unstated(s) for s in shapes[doc]))

    nearest = _nearest(kb, doc_id, exclude, config, speaks)
    votes: dict[Shape, list[str]] = {}
    for doc in nearest:
        for shape in shapes[doc]:
            if unstated(shape):
                votes.setdefault(shape, []).append(doc)
    own_stems = frozenset(stem(t) for sentence, _ in own for t in content_tokens(sentence))
    read, counts = [], []
    for shape, voters in sorted(votes.items(), key=lambda kv: (-len(kv[1]), sorted(kv[0]))):
        if len(voters) < config.hops.view_min_votes:
            break
        wording = _placed_as(_wording(kb, voters[0], shape), own_stems)
        if wording and wording not in read:
            read.append(wording)
            counts.append(len(voters))
    return ViewReading(doc_id, tuple(read), tuple(counts), tuple(nearest), silent=False) if read else None


def read_views(kb: Any, question: str, items: Sequence[EvidenceItem],
               config: KiraConfig) -> tuple[list[EvidenceItem], list[str]]:
    """`items` with every view of a multiview set read from its image where the module docstring says
    (a silent view for what another view of its set states; a view that states everything its subject
    states for what the subject leaves unstated), and a note per view read. When the question names
    its subject ("patient P001") and some items name it, only that subject's views are read (the
    answer is about it alone: template_generator.subject_items). Items are replaced in place, so the
    pack keeps its order and size."""
    about = {i.doc_id for i in subject_items(question, tuple(items))}
    sets: dict[str, list[EvidenceItem]] = {}
    for item in items:
        key = (item.provenance or {}).get("views")
        if key and (not about or item.doc_id in about):
            sets.setdefault(str(key), []).append(item)
    compound = kb.compound_of()
    view_set = kb.view_set_of()
    all_shapes = document_statements_by_doc(kb)
    group_members = members_by_group(kb)
    out, notes = list(items), []
    for key, members in sets.items():
        content = {i.doc_id: _content(i) for i in members}
        stated = list(dict.fromkeys(pair for pairs in content.values() for pair in pairs))
        if not stated:
            continue
        own = {("compound", compound[d]) for d in content if d in compound}
        own |= {("views", view_set[d]) for d in content if d in view_set}
        subject = set(content).union(*(group_members.get(g, ()) for g in own))
        subject_states = {shape for _, shape in stated} | {s for d in subject for s in all_shapes.get(d, ())}
        readings = [read_view(kb, d, stated, subject, config) for d in sorted(content) if not content[d]]
        readings += [read_unstated(kb, d, content[d], subject_states, subject, config) for d in sorted(content) if content[d]]
        for reading in readings:
            if reading is None:
                continue
            notes.append(reading.note)
            for n, item in enumerate(out):
                if item.doc_id == reading.doc_id and (item.provenance or {}).get("views") == key:
                    provenance = dict(item.provenance)
                    provenance["read"] = {"statements": list(reading.statements), "votes": list(reading.votes),
                                          "neighbours": list(reading.neighbours)}
                    out[n] = dataclasses.replace(item, paths=tuple(dict.fromkeys((*item.paths, READ_PATH))),
                                                 provenance=provenance)
    return out, notes
