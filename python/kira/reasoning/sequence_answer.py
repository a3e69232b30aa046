"""A temporal subject answered in order: each member's own state, never one state outvoting another.

The documents of a temporal sequence (``provenance["sequence"]``, set by kira.grounding.evidence: a
design's revisions, one site's acquisitions, one garden through a year) are one subject at
different times. When their evidence states different things, those are not rival readings for a
consensus to choose between: each is what the subject was at its time, and an answer that states
the best-supported one alone ("The same lawn, the trees in leaf") hides that it changed, and from
what. So when the evidence about the subject holds two or more members of the sequence its first
item belongs to, the template generator answers each member from its own items, in sequence order,
each led by the member's id and place:

    "garden_may (garden-survey, 1 of 2): A lawn with young trees [Evidence 2, 3].
    garden_july (garden-survey, 2 of 2): The same lawn, the trees in leaf [Evidence 1, 4]."

Only a subject's evidence is read so (``EvidencePack.subject``: the question names it, or the query
image clearly shows one of its documents); evidence gathered for a question about a kind of thing
("find a lawn") is many subjects, answered by the consensus. Consecutive members that state the
same thing are said once ("garden_may and garden_june (garden-survey, 1 and 2 of 3): ..."). When
every member's main statement (its answer's first claim) is the same, the consensus answers as
before: one member stating more than another is often only what retrieval brought of it. A member
whose evidence states only bookkeeping says nothing, as in the consensus. A question that names one
member alone, asks what several views show together (kira.reasoning.view_agreement), or comes with
a query image that clearly shows one member is answered as before, and so is a subject that is
more than the sequence (a film's other view, a second series): its other documents would go unsaid. At most `max_members` members
are stated: the first ones and the last (the latest state is never left out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from kira.reasoning.citations import format_citation
from kira.reasoning.field_answer import spoken_list
from kira.reasoning.types import Answer, Claim, EvidenceItem


@dataclass(frozen=True)
class SequenceMember:
    """One member of a temporal sequence that has items in the evidence."""

    doc_id: str
    place: int  # 1-based place in the sequence
    items: tuple[EvidenceItem, ...]  # its items, in pack order


@dataclass(frozen=True)
class SequenceInEvidence:
    """The temporal sequence of an evidence pack's first item, with its members that have items."""

    sequence_id: str
    length: int  # members the sequence has, in the evidence or not
    members: tuple[SequenceMember, ...]  # in sequence order: those stated (at most `max_members`)
    present: int  # members with items in the evidence, stated or not

    def place(self, member: SequenceMember) -> str:
        """ "(garden-survey, 1 of 2)": a member's place, said after its id where its sentence names it."""
        return f"({self.sequence_id}, {member.place} of {self.length})"


def _place(item: EvidenceItem) -> tuple[str, int, int] | None:
    seq = item.provenance.get("sequence") if isinstance(item.provenance, Mapping) else None
    if not isinstance(seq, Mapping) or "id" not in seq:
        return None
    try:
        return str(seq["id"]), int(seq["place"]), int(seq["of"])
    except (KeyError, TypeError, ValueError):
        return None


def sequence_label(item: EvidenceItem) -> str:
    """ "garden-survey, 1 of 2": where an item's document sits in its temporal sequence, as cards show it beside
    its id; "" for a document in none."""
    place = _place(item)
    return f"{place[0]}, {place[1]} of {place[2]}" if place else ""


def sequence_in_evidence(items: Sequence[EvidenceItem], *, max_members: int = 5) -> SequenceInEvidence | None:
    """The sequence of ``items[0]`` when every item is of it, two or more of its members have items among
    `items`, and neither the question nor the query image singles out one document (`EvidenceItem.named_by_question`,
    `EvidenceItem.shown_by_query_image`: items of a single document); else None.
    Keeps at most `max_members` members (>= 2): the first ``max_members - 1`` and the last."""
    if not items:
        return None
    first = _place(items[0])
    if first is None:
        return None
    singled = {i.doc_id for i in items if i.named_by_question or i.shown_by_query_image}
    if len(singled) == 1:  # the question names one member, or the query image shows one: it is about that one
        return None
    gid, _, length = first
    by_doc: dict[str, list[EvidenceItem]] = {}
    places: dict[str, int] = {}
    for item in items:
        place = _place(item)
        if place is None or place[0] != gid:
            return None  # the subject is more than this sequence (another view, another series): the consensus
        by_doc.setdefault(item.doc_id, []).append(item)
        places[item.doc_id] = place[1]
    if len(by_doc) < 2:
        return None
    order = sorted(by_doc, key=lambda d: (places[d], d))
    keep = max(2, int(max_members))
    present = len(order)
    if len(order) > keep:
        order = order[: keep - 1] + order[-1:]
    return SequenceInEvidence(gid, length, tuple(SequenceMember(d, places[d], tuple(by_doc[d])) for d in order),
                              present)


@dataclass(frozen=True)
class MemberAnswer:
    """A member's own answer; `led`: its claims name nothing yet, so the first is led by the member's id and
    place (a captioned member's); an answer from its fields names it already."""

    member: SequenceMember
    answer: Answer
    led: bool


def _said(claim: Claim) -> str:
    return " ".join(claim.statement.lower().split())


def claims_in_order(sequence: SequenceInEvidence, answers: Sequence[MemberAnswer], *,
                    max_citations: int) -> list[Claim] | None:
    """The members' claims in sequence order, each run of consecutive members that state the same said once
    (its claims citing the run's evidence, at most `max_citations` numbers), the run's first claim led by its
    ids and places; None when every member's first claim states the same (the consensus answers: one member
    stating more than another is what a retrieval happened to bring, not a change) or fewer than two spoke."""
    if len({_said(a.answer.claims[0]) for a in answers if a.answer.claims}) <= 1:
        return None  # every member's main statement is the same: what else each states is the consensus's to weigh
    runs: list[list[MemberAnswer]] = []
    for each in answers:
        if not each.answer.claims:
            continue
        if (runs and each.led and runs[-1][0].led
                and [_said(c) for c in runs[-1][0].answer.claims] == [_said(c) for c in each.answer.claims]):
            runs[-1].append(each)
        else:
            runs.append([each])
    if len(runs) < 2:
        return None
    claims: list[Claim] = []
    for run in runs:
        first = run[0]
        for n, claim in enumerate(first.answer.claims):
            if len(run) > 1:
                cited = tuple(dict.fromkeys(c for r in run for c in r.answer.claims[n].citations))[:max_citations]
                claim = Claim(text=f"{claim.statement.rstrip('.')} {format_citation(cited)}.", citations=cited)
            if first.led and n == 0:
                places = spoken_list([str(r.member.place) for r in run])
                lead = f"{spoken_list([r.member.doc_id for r in run])} ({sequence.sequence_id}, {places} of {sequence.length})"
                claim = Claim(text=f"{lead}: {claim.text}", citations=claim.citations, lead=lead)
            claims.append(claim)
    return claims


def trace_line(sequence: SequenceInEvidence) -> str:
    """The reasoning step that says why the answer is in sequence order."""
    shown = ", ".join(f"{m.doc_id} ({m.place} of {sequence.length})" for m in sequence.members)
    left = sequence.present - len(sequence.members)
    return (f"The evidence holds {sequence.present} members of the temporal sequence {sequence.sequence_id}, which state "
            f"different things: each is the subject at its own time, not a rival reading, so the answer states "
            f"each one's own evidence in order ({shown}{f'; {left} more left out' if left else ''}) instead of choosing one.")


__all__ = ["MemberAnswer", "SequenceInEvidence", "SequenceMember", "claims_in_order", "sequence_in_evidence",
           "sequence_label", "trace_line"]
