"""Rationale card -> plain text for terminals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kira.reasoning.types import EvidenceItem

if TYPE_CHECKING:
    from kira.explain.card import RationaleCard

_RULE = "-" * 72


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _count(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return f"{len(value)}" + (f" ({', '.join(str(v) for v in value)})" if value else "")
    return str(value)


MAX_SUMMARY_CHARS = 600
"""A card shows at most this much of one evidence summary (a stored caption may be megabytes)."""


def bounded(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    """`text` on one line, cut at `limit` characters with a note of how much was left out."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def _evidence_plain(item: EvidenceItem, match: str = "") -> str:
    """One evidence line: whether it matches the question (`match`, kira.explain.card.match_label), what the
    item shows, then how it looks (kira.reasoning.shown); a hand-built item's summary as written."""
    from kira.reasoning.field_answer import fact_phrases
    from kira.reasoning.shown import shown

    from kira.reasoning.sequence_answer import sequence_label

    place = sequence_label(item)
    head = (f"  [Evidence {item.number}] {item.doc_id}" + (f" ({place})" if place else "")
            + (f" ({match})" if match else ""))
    if "described_by" not in (item.provenance or {}):
        return f"{head}: {bounded(item.summary) or '(no description)'}"
    view = shown(item)
    shows = "; ".join(([view.human_text] if view.human_text else []) + fact_phrases(view, appearance=False))
    shows = bounded(shows) if shows else "nothing recorded says what it shows"
    line = f"{head}: {shows}"
    return line + (f"\n      looks: {bounded(', '.join(view.looks))}" if view.looks else "")


def _evidence_detail(item: EvidenceItem, label: str) -> str:
    box = f" box={item.box}" if item.box is not None else ""
    paths = "+".join(item.paths) if item.paths else "-"
    return f"  {label} doc={item.doc_id} level={item.level} fused={item.score:.3f} paths={paths}{box}"


def _chunks(n: int) -> str:
    return f"{n} chunk{'' if n == 1 else 's'}"


def to_text(card: RationaleCard) -> str:
    """The card as readable text: the question, the answer and its evidence first; then the
    diagnostics (grounding scores, reasoning, claims, scores and paths of each item, what the
    critic dropped, numbered apart as [Dropped N], the retrieval trail, timings)."""
    from kira.explain.card import notice

    lines: list[str] = ["KIRA RATIONALE CARD", _RULE]
    kind, text = notice(card)
    if kind:
        lines += [("NO MATCH: " if kind == "nomatch" else "LOW CONFIDENCE: ") + text, _RULE]
    question = (card.question or "").strip()
    lines.append(f"Question: {question or '(none)'}")
    if card.query_image is not None:
        h, w = card.query_image.shape[:2]
        lines.append(f"Query image: {w}x{h} thumbnail")
    lines += [_RULE, "Answer:", f"  {card.answer.text}"]
    from kira.explain.card import confidence_line

    if confidence_line(card):
        lines.append(f"  ({confidence_line(card)})")
    lines += ["", f"Evidence ({len(card.pack.items)}):"]
    from kira.explain.card import match_label

    lines += [_evidence_plain(i, match_label(card, i)) for i in card.pack.items] or ["  (none)"]
    if card.pack.similar:
        lines += ["", f"Similar cases: other subjects than {card.pack.subject or 'the one asked about'}, "
                      f"for comparison only ({len(card.pack.similar)}):"]
        lines += [_evidence_plain(i) for i in card.pack.similar]
    lines += ["", _RULE, "DIAGNOSTICS (how the answer was reached)", _RULE]
    lines.append(f"Variant: {card.variant}")
    if card.answer.grounding is not None:
        lines.append(f"Overall grounding: {card.answer.grounding:.3f} (0-1: how well the evidence supports the claims)")
    lines.append("Reasoning:")
    lines += [f"  {n}. {step}" for n, step in enumerate(card.answer.reasoning, start=1)] or ["  (none)"]
    lines.append("Claims (s_sim: similarity to the cited evidence, s_attn: attention on it):")
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
    lines.append("Evidence retrieval scores (fused: weighted RRF over the retrieval paths, the best = 1; it ranks "
                 "items, it does not say they match) and paths:")
    lines += [_evidence_detail(i, f"[Evidence {i.number}]") for i in card.pack.items] or ["  (none)"]
    if card.pack.dropped:
        lines.append(f"Dropped by the critic ({len(card.pack.dropped)}) - not citable, numbered apart:")
        for n, item in enumerate(card.pack.dropped, start=1):
            lines.append(_evidence_detail(item, f"[Dropped {n}]"))
            lines.append(f"      {bounded(item.summary) or '(no description)'}")
    lines.append(_RULE)
    if card.expansions:
        lines.append("Query expansions: " + "; ".join(card.expansions))
    if card.hops:
        lines.append("Hops:")
        for n, hop in enumerate(card.hops, start=1):
            conf = hop.get("confidence")
            found = (", ".join(str(d) for d in hop["documents"]) if hop.get("documents")
                     else _chunks(len(list(hop.get('ids', [])))))
            lines.append(
                f"  hop {hop.get('hop', n)}: {found} "
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
