"""Rationale card -> one self-contained HTML page.

Inline CSS, no scripts, no external resources: evidence thumbnails are embedded as
base64 PNG with their region boxes drawn (Pillow ImageDraw). Every piece of user text
(question, summaries, provenance, claims, reasoning) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING, Any

import numpy as np

from kira.explain.render_text import bounded
from kira.reasoning.types import Claim, EvidenceItem

if TYPE_CHECKING:
    from kira.explain.card import RationaleCard

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2330;background:#f7f8fa}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:20px 0 8px;border-bottom:1px solid #d8dde6}
.box{background:#fff;border:1px solid #d8dde6;border-radius:6px;padding:12px;margin:8px 0}
.answer{font-size:16px}.muted{color:#667085;font-size:12px}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eef0f4;padding:6px;text-align:left;
vertical-align:top;font-size:13px}
.ev{display:flex;gap:12px;align-items:flex-start}.ev img{border:1px solid #d8dde6;max-width:160px}
.flag{color:#b42318;font-weight:600}.ok{color:#067647}.tag{display:inline-block;background:#eef4ff;
color:#3538cd;border-radius:4px;padding:0 6px;margin-right:4px;font-size:12px}
.dropped{opacity:.6}.diag{margin-top:28px;border-top:2px solid #d8dde6}
details summary{cursor:pointer;color:#667085;font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def thumbnail_png(image: np.ndarray, box: tuple[int, int, int, int] | None = None,
                  image_size: tuple[int, int] | None = None, max_side: int = 160) -> str:
    """A base64 PNG data URI of `image` (uint8 RGB), at most `max_side` px a side, with `box` drawn.

    `box` is (x0, y0, x1, y1) in the coordinates of an image of `image_size`
    (width, height); when `image_size` is None the box is taken to be in `image`'s own
    pixels. Raises ValueError for an image that is not (h, w, 3) uint8.
    """
    from PIL import Image, ImageDraw

    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
        raise ValueError(f"thumbnail must be uint8 (h, w, 3); got {arr.dtype} {arr.shape}")
    pil = Image.fromarray(arr, "RGB")
    src_w, src_h = image_size if image_size is not None else (pil.width, pil.height)
    scale = min(1.0, max_side / max(pil.width, pil.height))
    if scale < 1.0:
        pil = pil.resize((max(1, round(pil.width * scale)), max(1, round(pil.height * scale))))
    if box is not None and src_w > 0 and src_h > 0:
        sx, sy = pil.width / src_w, pil.height / src_h
        x0, y0, x1, y1 = box
        rect = [x0 * sx, y0 * sy, max(x0 * sx, x1 * sx - 1), max(y0 * sy, y1 * sy - 1)]
        ImageDraw.Draw(pil).rectangle(rect, outline=(255, 40, 40), width=2)
    buffer = io.BytesIO()
    pil.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _image_size(item: EvidenceItem) -> tuple[int, int] | None:
    size = (item.provenance or {}).get("image_size")
    if isinstance(size, (list, tuple)) and len(size) == 2:
        try:
            return int(size[0]), int(size[1])
        except (TypeError, ValueError):
            return None
    return None


def _evidence_block(item: EvidenceItem, label: str, css_class: str = "") -> str:
    """One evidence item: its image and what it says first; scores, paths and provenance folded
    into a <details> below (no script needed)."""
    thumb = ""
    if item.thumbnail is not None:
        thumb = f'<img alt="{_e(label)}" src="{thumbnail_png(item.thumbnail, item.box, _image_size(item))}">'
    tags = "".join(f'<span class="tag">{_e(p)}</span>' for p in item.paths)
    prov = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(bounded(v))}</td></tr>"
        for k, v in (item.provenance or {}).items() if k != "image_size"
    )
    box = f" &middot; box {_e(item.box)}" if item.box is not None else ""
    return (
        f'<div class="box ev {css_class}">{thumb}<div><b>{_e(label)}</b> {_e(item.doc_id)}'
        f"<div>{_e(bounded(item.summary)) or '<i>(no description)</i>'}</div>"
        f"<details><summary>details</summary><div class='muted'>{_e(item.level)} &middot; score "
        f"{item.score:.3f}{box} {tags}</div><table class='muted'>{prov}</table></details></div></div>"
    )


def _claim_row(claim: Claim) -> str:
    status = '<span class="flag">hallucination risk</span>' if claim.hallucination_risk else (
        '<span class="ok">grounded</span>' if claim.grounding is not None else '<span class="muted">unverified</span>'
    )
    invalid = f"<br><span class='flag'>cites missing {_e(list(claim.invalid_citations))}</span>" if claim.invalid_citations else ""
    cites = ", ".join(str(c) for c in claim.citations) or "none"
    return (
        f"<tr><td>{_e(claim.text)}</td><td>{_e(cites)}{invalid}</td><td>{_fmt(claim.s_sim)}</td>"
        f"<td>{_fmt(claim.s_attn)}</td><td>{_fmt(claim.grounding)}</td><td>{status}</td></tr>"
    )


def _ids(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"{len(value)} ({_e(', '.join(str(v) for v in value))})" if value else "0"
    return _e(value)


def to_html(card: RationaleCard) -> str:
    """The card as a complete HTML document (a str); safe to write to a file and open offline."""
    question = (card.question or "").strip()
    parts: list[str] = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>kira rationale: {_e(question or 'image query')}</title><style>{_CSS}</style></head><body>",
        "<h1>kira rationale card</h1>",
        "<h2>Question</h2><div class='box'>",
        f"<div>{_e(question) if question else '<i>(no question text)</i>'}</div>",
    ]
    if card.query_image is not None:
        parts.append(f"<img alt='query image' src='{thumbnail_png(card.query_image)}'>")
    parts.append("</div><h2>Answer</h2>")
    parts.append(f"<div class='box answer'>{_e(card.answer.text)}</div>")
    parts.append(f"<h2>Evidence ({len(card.pack.items)})</h2>")
    parts += [_evidence_block(i, f"[Evidence {i.number}]") for i in card.pack.items] or [
        "<div class='box'><i>no evidence</i></div>"]
    if card.pack.similar:
        parts.append(f"<h2>Similar cases: other subjects, for comparison only ({len(card.pack.similar)})</h2>")
        parts += [_evidence_block(i, f"[Evidence {i.number}]", "similar") for i in card.pack.similar]
    parts.append("<div class='diag'><h2>Diagnostics: how the answer was reached</h2>")
    parts.append(f"<div class='muted'>variant {_e(card.variant)} &middot; completeness {card.completeness():.2f} "
                 f"&middot; overall grounding {_fmt(card.answer.grounding)} (0-1: how well the evidence "
                 "supports the claims)</div>")
    parts.append("<h2>Reasoning</h2><div class='box'><ol>")
    parts += [f"<li>{_e(step)}</li>" for step in card.answer.reasoning] or ["<li><i>none</i></li>"]
    parts.append("</ol></div><h2>Claims</h2><div class='box'>")
    if card.answer.claims:
        parts.append("<table><tr><th>claim</th><th>cites</th><th title='similarity to the cited evidence'>s_sim</th>"
                     "<th title='attention on the cited evidence'>s_attn</th><th>grounding</th><th></th></tr>")
        parts += [_claim_row(c) for c in card.answer.claims]
        parts.append("</table>")
    else:
        parts.append("<i>no claims</i>")
    parts.append("</div>")
    if card.pack.dropped:
        parts.append(f"<h2>Dropped by the critic ({len(card.pack.dropped)}) - not citable</h2>")
        parts += [_evidence_block(i, f"[Dropped {n}]", "dropped") for n, i in enumerate(card.pack.dropped, start=1)]
    parts.append("<h2>Retrieval trail</h2><div class='box'><table>")
    parts.append(f"<tr><th>query expansions</th><td>{_e('; '.join(card.expansions)) or 'none'}</td></tr>")
    if card.hops:
        chain = " &rarr; ".join(
            f"hop {_e(h.get('hop', n))}: {_ids(list(h.get('ids', [])))} ids, confidence "
            f"{_fmt(None if h.get('confidence') is None else float(h['confidence']))}"
            for n, h in enumerate(card.hops, start=1)
        )
    else:
        chain = "none"
    parts.append(f"<tr><th>hop chain</th><td>{chain}</td></tr>")
    parts.append(f"<tr><th>stop reason</th><td>{_e(card.stop_reason or 'n/a')}</td></tr>")
    if card.critic is not None:
        note = f" &middot; {_e(card.critic['note'])}" if card.critic.get("note") else ""
        parts.append(
            f"<tr><th>critic</th><td>kept {_ids(card.critic.get('kept', []))}, dropped "
            f"{_ids(card.critic.get('dropped', []))}, threshold {_e(card.critic.get('threshold', 'n/a'))}{note}</td></tr>"
        )
    else:
        parts.append("<tr><th>critic</th><td>not run</td></tr>")
    parts.append("</table></div><h2>Timings</h2><div class='box'><table>")
    parts += [f"<tr><th>{_e(k)}</th><td>{float(v):.2f} ms</td></tr>" for k, v in card.timings.items()] or [
        "<tr><td><i>none recorded</i></td></tr>"
    ]
    parts.append("</table></div>")
    if card.config:
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in card.config.items())
        parts.append(f"<h2>Configuration</h2><div class='box'><table class='muted'>{rows}</table></div>")
    missing = card.missing_fields()
    if missing:
        parts.append(f"<div class='muted'>missing for completeness: {_e(', '.join(missing))}</div>")
    parts.append("</div></body></html>")
    return "".join(parts)
