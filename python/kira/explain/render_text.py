"""Rationale card -> plain text for terminals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kira.reasoning.types import EvidenceItem

if TYPE_CHECKING:
    from kira.explain.card import RationaleCard

_RULE = "-" * 72


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _count(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"{len(value)}" + (f" ({', '.join(str(v) for v in value)})" if value else "")
    return str(value)


def _evidence_line(item: EvidenceItem) -> str:
    box = f" box={item.box}" if item.box is not None else ""
    return f"  {item.render()}{box}"


def to_text(card: RationaleCard) -> str:
    """The card as readable text: query, answer, claims with grounding, evidence, retrieval trail, timings."""
    lines: list[str] = ["KIRA RATIONALE CARD", _RULE]
    question = (card.question or "").strip()
    lines.append(f"Question: {question or '(none)'}")
    if card.query_image is not None:
        h, w = card.query_image.shape[:2]
        lines.append(f"Query image: {w}x{h} thumbnail")
    lines.append(f"Variant: {card.variant}")
    lines += [_RULE, "Answer:", f"  {card.answer.text}"]
    if card.answer.grounding is not None:
        lines.append(f"  overall grounding: {card.answer.grounding:.3f}")
    lines.append("Reasoning:")
    lines += [f"  {n}. {step}" for n, step in enumerate(card.answer.reasoning, start=1)] or ["  (none)"]
    lines.append("Claims:")
    if not card.answer.claims:
        lines.append("  (none)")
    for n, claim in enumerate(card.answer.claims, start=1):
        flag = "  !! HALLUCINATION RISK" if claim.hallucination_risk else ""
        cites = ", ".join(str(c) for c in claim.citations) or "nothing"
        bad = f"; invalid citations {list(claim.invalid_citations)}" if claim.invalid_citations else ""
        lines.append(
            f"  {n}. {claim.text}\n     cites {cites}{bad}; s_sim={_fmt(claim.s_sim)} "
            f"s_attn={_fmt(claim.s_attn)} grounding={_fmt(claim.grounding)}{flag}"
        )
    lines += [_RULE, f"Evidence ({len(card.pack.items)}):"]
    lines += [_evidence_line(i) for i in card.pack.items] or ["  (none)"]
    if card.pack.similar:
        lines.append(f"Similar cases: other subjects than {card.pack.subject or 'the one asked about'}, "
                     f"for comparison only ({len(card.pack.similar)}):")
        lines += [_evidence_line(i) for i in card.pack.similar]
    if card.pack.dropped:
        lines.append(f"Dropped by the critic ({len(card.pack.dropped)}):")
        lines += [_evidence_line(i) for i in card.pack.dropped]
    lines.append(_RULE)
    if card.expansions:
        lines.append("Query expansions: " + "; ".join(card.expansions))
    if card.hops:
        lines.append("Hops:")
        for n, hop in enumerate(card.hops, start=1):
            conf = hop.get("confidence")
            lines.append(
                f"  hop {hop.get('hop', n)}: ids {list(hop.get('ids', []))} "
                f"confidence {_fmt(None if conf is None else float(conf))}"
            )
    if card.stop_reason:
        lines.append(f"Stopped because: {card.stop_reason}")
    if card.critic is not None:
        lines.append(
            f"Critic: kept {_count(card.critic.get('kept', []))}, dropped {_count(card.critic.get('dropped', []))}, "
            f"threshold {card.critic.get('threshold', 'n/a')}"
        )
        if card.critic.get("note"):
            lines.append(f"  note: {card.critic['note']}")
    if card.timings:
        lines.append("Timings (ms): " + ", ".join(f"{k} {float(v):.2f}" for k, v in card.timings.items()))
    missing = card.missing_fields()
    lines.append(f"Completeness: {card.completeness():.2f}" + (f" (missing: {', '.join(missing)})" if missing else ""))
    return "\n".join(lines)
