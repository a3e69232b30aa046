"""The deterministic default generator: a score-weighted vote over the evidence.

It reads what each evidence item describes (its label), groups the items that describe
the same thing, weighs each group by retrieval score (one vote per document, at that
document's best score, so many patches of one image don't outvote several images),
and answers with the dominant group's description, citing every item in the group.
Before the answer it writes the reasoning trace: the evidence considered, the groups
and their weights, what agrees and what conflicts, and why the winner was chosen.

It cites only numbers present in the pack, and with an empty pack it says it found no
evidence and makes no claims. Output is a pure function of (question, pack).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

from kira.reasoning.citations import format_citation
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack

log = logging.getLogger(__name__)

NO_EVIDENCE_TEXT = "I found no evidence in the knowledge base that answers this question."


@dataclass(frozen=True)
class _Group:
    key: str  # normalised label
    label: str  # the label as first written
    items: tuple[EvidenceItem, ...]
    weight: float  # sum over documents of the document's best item weight


def label_of(item: EvidenceItem) -> str:
    """What an evidence item describes, for voting.

    The first non-empty of ``provenance["label"]``, ``provenance["caption"]``, the
    item's ``summary`` (up to its first ";" or line break, where the default describer's
    measurable attributes begin), ``provenance["tags"]`` joined by ", ", else its doc id.
    """
    prov = item.provenance or {}
    for key in ("label", "caption"):
        value = prov.get(key)
        if isinstance(value, str) and value.strip():
            return _tidy(value)
    summary = item.summary.strip()
    if summary:
        head = re.split(r"[;\n]", summary, maxsplit=1)[0]
        if head.strip(" .,:"):
            return _tidy(head)
    tags = prov.get("tags")
    if isinstance(tags, (list, tuple)) and any(str(t).strip() for t in tags):
        return ", ".join(str(t).strip() for t in tags if str(t).strip())
    return item.doc_id


def _tidy(text: str) -> str:
    return " ".join(text.split()).strip(" .;:,")


def _key(label: str) -> str:
    return re.sub(r"[^a-z0-9 ]+", "", label.lower()).strip()


def _weights(items: tuple[EvidenceItem, ...]) -> dict[int, float]:
    """Per-item vote weight: the score if any score is positive (negatives count 0), else 1/rank."""
    if any(item.score > 0 for item in items):
        return {item.number: max(item.score, 0.0) for item in items}
    return {item.number: 1.0 / rank for rank, item in enumerate(items, start=1)}


def _groups(items: tuple[EvidenceItem, ...]) -> list[_Group]:
    weights = _weights(items)
    members: dict[str, list[EvidenceItem]] = {}
    labels: dict[str, str] = {}
    for item in items:
        label = label_of(item)
        key = _key(label) or label
        members.setdefault(key, []).append(item)
        labels.setdefault(key, label)
    groups = []
    for key, group_items in members.items():
        best_per_doc: dict[str, float] = {}
        for item in group_items:
            best_per_doc[item.doc_id] = max(best_per_doc.get(item.doc_id, 0.0), weights[item.number])
        groups.append(_Group(key, labels[key], tuple(group_items), sum(best_per_doc.values())))
    # Heaviest first; ties go to the group whose best item comes first in the pack.
    groups.sort(key=lambda g: (-g.weight, min(i.number for i in g.items)))
    return groups


def _sentence(label: str, citation: str) -> str:
    text = label[:1].upper() + label[1:]
    return f"{text} {citation}." if citation else f"{text}."


def _numbers(items: tuple[EvidenceItem, ...]) -> tuple[int, ...]:
    return tuple(sorted(item.number for item in items))


class TemplateGenerator:
    """Deterministic `Generator`: score-weighted vote over evidence labels, with a reasoning trace.

    Parameters
    ----------
    detail: "brief" (default) answers with one claim, the dominant description; "full"
        adds a claim per distinct supporting summary (attributes the label leaves out)
        and one per conflicting group, each citing its own evidence.
    max_citations: at most this many evidence numbers on the main claim (the group's
        highest-scoring items).
    """

    name = "template"

    def __init__(self, *, detail: Literal["brief", "full"] = "brief", max_citations: int = 5) -> None:
        if detail not in ("brief", "full"):
            raise ValueError(f"detail must be 'brief' or 'full'; got {detail!r}")
        if max_citations < 1:
            raise ValueError(f"max_citations must be >= 1; got {max_citations}")
        self.detail = detail
        self.max_citations = max_citations

    def generate(self, question: str, pack: EvidencePack) -> Answer:
        """Answer `question` from `pack` (see the class docstring). Cites only `pack`'s numbers."""
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
        groups = _groups(pack.items)
        total = sum(g.weight for g in groups) or 1.0
        trace.append(
            "Grouped by what they describe: "
            + "; ".join(
                f"'{g.label}' from {format_citation(_numbers(g.items))} "
                f"({len({i.doc_id for i in g.items})} document(s), {g.weight / total:.0%} of the score-weighted support)"
                for g in groups
            )
            + "."
        )
        top = groups[0]
        if len(top.items) > 1:
            trace.append(f"Agreement: {format_citation(_numbers(top.items))} all describe '{top.label}'.")
        if len(groups) > 1:
            trace.append(
                "Conflict: "
                + "; ".join(f"{format_citation(_numbers(g.items))} describe(s) '{g.label}' instead" for g in groups[1:])
                + "."
            )
            margin = (top.weight - groups[1].weight) / total
            trace.append(
                f"Chose '{top.label}': it carries {top.weight / total:.0%} of the support, "
                f"{margin:.0%} more than the runner-up."
            )
        else:
            trace.append(f"Chose '{top.label}': all evidence agrees.")

        best = sorted(top.items, key=lambda i: (-i.score, i.number))[: self.max_citations]
        claims = [Claim(text=_sentence(top.label, format_citation(_numbers(tuple(best)))), citations=_numbers(tuple(best)))]
        if self.detail == "full":
            seen = {_key(top.label)}
            for item in top.items:
                summary = _tidy(item.summary)
                if summary and _key(summary) not in seen:
                    seen.add(_key(summary))
                    cite = format_citation((item.number,))
                    claims.append(Claim(text=_sentence(summary, cite), citations=(item.number,)))
            for group in groups[1:]:
                nums = _numbers(group.items)[: self.max_citations]
                claims.append(
                    Claim(text=_sentence(f"alternatively, {group.label}", format_citation(nums)), citations=nums)
                )
        trace.append(f"Answer written as {len(claims)} claim(s), each citing the evidence it restates.")
        text = " ".join(claim.text for claim in claims)
        return Answer(text=text, reasoning=tuple(trace), claims=tuple(claims), generator=self.name)

    def describe(self) -> dict[str, Any]:
        """Settings for the rationale card's config summary."""
        return {"generator": self.name, "detail": self.detail, "max_citations": self.max_citations}
