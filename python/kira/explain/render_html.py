"""Rationale card -> one self-contained HTML page.

Inline CSS, no scripts, no external resources: evidence thumbnails are embedded as
base64 PNG with their region boxes drawn (Pillow ImageDraw). Every piece of user text
(question, summaries, provenance, claims, reasoning) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import io
import re
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from kira.explain.render_text import bounded
from kira.reasoning.types import _CITATION_MARK as _MARK
from kira.reasoning.types import Claim, EvidenceItem
from kira.reasoning.sequence_answer import sequence_label

if TYPE_CHECKING:
    from kira.explain.card import RationaleCard

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2330;background:#f7f8fa}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:20px 0 8px;border-bottom:1px solid #d8dde6}
.box{background:#fff;border:1px solid #d8dde6;border-radius:6px;padding:12px;margin:8px 0}
.question{background:#eef0f4;border-color:#eef0f4;color:#344054}
.answer{font-size:17px;line-height:1.5;border:1px solid #b2ccff;border-left:6px solid #2e6be6;background:#f5f8ff}
.answer a{color:#2e6be6;text-decoration:none;font-weight:600}.answer a:hover{text-decoration:underline}
.answer p{margin:0 0 8px}.answer p:last-of-type{margin-bottom:0}
.banner{border-radius:6px;padding:12px 14px;margin:8px 0 16px;font-weight:600}
.banner.nomatch{background:#fef3f2;border:1px solid #fda29b;color:#912018}
.banner.low{background:#fffaeb;border:1px solid #fec84b;color:#93370d}
table.kv{width:auto}table.kv th{padding-right:24px;white-space:nowrap}
.muted{color:#667085;font-size:12px}
.match{font-size:12px;padding:1px 6px;border-radius:8px;margin-left:6px}.match.yes{background:#e3f4e8;color:#1e6b3a}
.match.no{background:#f2f4f7;color:#667085}.match.part{background:#fff4e0;color:#8a5a00}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eef0f4;padding:6px;text-align:left;
vertical-align:top;font-size:13px}
.ev{display:flex;gap:12px;align-items:flex-start}.ev img{border:1px solid #d8dde6;max-width:160px}
.flag{color:#b42318;font-weight:600}.ok{color:#067647}.tag{display:inline-block;background:#eef4ff;
color:#3538cd;border-radius:4px;padding:0 6px;margin-right:4px;font-size:12px}
.dropped{opacity:.6}.diag{margin-top:28px;border-top:2px solid #d8dde6}
details summary{cursor:pointer;color:#667085;font-size:12px}
"""


def _e(value: object) -> str:
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


def readable(value: object) -> str:
    """A provenance value as a person reads it: no Python reprs. Labels as "espresso (p 0.99)", OCR lines
    as their text, mappings as "key: value", lists comma-separated, None as ""."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        if "label" in value and "p" in value:
            return f"{value['label']} (p {float(value['p']):.2f})"
        if "text" in value:
            return str(value["text"])
        return ", ".join(f"{k}: {readable(v)}" for k, v in value.items() if readable(v))
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return " x ".join(readable(v) for v in value) if len(value) == 2 else ", ".join(readable(v) for v in value)
        return ", ".join(r for r in (readable(v) for v in value) if r)
    return str(value)


def linked(text: str) -> str:
    """`text` HTML-escaped, each ``[Evidence N]`` marker a link to that evidence's block (#evidence-N)."""
    out, last = [], 0
    for match in _MARK.finditer(text):
        out.append(_e(text[last:match.start()]))
        numbers = [int(n) for n in re.findall(r"\d+", match.group(0))]
        links = ", ".join(f'<a href="#evidence-{n}">{n}</a>' for n in numbers)
        mark = match.group(0)
        out.append(f"{mark[:len(mark) - len(mark.lstrip())]}[Evidence {links}]")
        last = match.end()
    out.append(_e(text[last:]))
    return "".join(out)


def banner(card: RationaleCard) -> str:
    """The notice a card opens with: no match (the answer abstained) or low confidence; "" otherwise."""
    from kira.explain.card import notice

    kind, text = notice(card)
    if not kind:
        return ""
    return f"<div class='banner {kind}' role='alert'>{_e(text)}</div>"


def _evidence_block(item: EvidenceItem, label: str, css_class: str = "", match: str = "") -> str:
    """One evidence item: its image, whether it matches the question (`match`, kira.explain.card.match_label)
    and what it says first; scores, paths and provenance folded into a <details> below (no script needed)."""
    thumb = ""
    if item.thumbnail is not None:
        thumb = f'<img alt="{_e(label)}" src="{thumbnail_png(item.thumbnail, item.box, _image_size(item))}">'
    tags = "".join(f'<span class="tag">{_e(p)}</span>' for p in item.paths)
    prov = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(bounded(readable(v)))}</td></tr>"
        for k, v in (item.provenance or {}).items() if k != "image_size" and readable(v)
    )
    box = f" &middot; box {_e(', '.join(str(v) for v in item.box))}" if item.box is not None else ""
    anchor = f' id="evidence-{item.number}"' if label.startswith("[Evidence") else ""
    place = sequence_label(item)
    place = f" <span class='muted'>({_e(place)})</span>" if place else ""
    return (
        f'<div class="box ev {css_class}"{anchor}>{thumb}<div><b>{_e(label)}</b> {_e(item.doc_id)}{place}'
        f"{_match_tag(match)}{described(item)}"
        f"<details><summary>details</summary><div class='muted'>{_e(item.level)} &middot; fused retrieval score "
        f"{item.score:.3f}{box} {tags}</div><table class='muted kv'>{prov}</table></details></div></div>"
    )


def _match_tag(match: str) -> str:
    from kira.explain.card import match_kind

    return f" <span class='match {match_kind(match)}'>{_e(match)}</span>" if match else ""


def described(item: EvidenceItem) -> str:
    """What an item shows, then how it looks (kira.reasoning.shown); a hand-built item's summary as written."""
    from kira.reasoning.field_answer import fact_phrases
    from kira.reasoning.shown import shown

    view = shown(item)
    if "described_by" not in (item.provenance or {}):
        return f"<div>{_e(bounded(item.summary)) or '<i>(no description)</i>'}</div>"
    shows = [view.human_text] if view.human_text else []
    shows += fact_phrases(view, appearance=False)
    out = f"<div><b>Shows:</b> {_e(bounded('; '.join(shows)))}</div>" if shows else (
        "<div><b>Shows:</b> <i>nothing recorded (no caption, tags, text or confident classifier label)</i></div>")
    if view.looks:
        out += f"<div class='muted'><b>Looks:</b> {_e(bounded(', '.join(view.looks)))}</div>"
    if view.location:
        out += f"<div class='muted'>{_e(view.location)}</div>"
    return out


def _claim_row(claim: Claim) -> str:
    status = '<span class="flag">hallucination risk</span>' if claim.hallucination_risk else (
        '<span class="ok">grounded</span>' if claim.grounding is not None else '<span class="muted">unverified</span>'
    )
    invalid = f"<br><span class='flag'>cites missing {_e(list(claim.invalid_citations))}</span>" if claim.invalid_citations else ""
    cites = ", ".join(str(c) for c in claim.citations) or "none"
    return (
        f"<tr><td>{linked(claim.text)}</td><td>{_e(cites)}{invalid}</td><td>{_fmt(claim.s_sim)}</td>"
        f"<td>{_fmt(claim.s_attn)}</td><td>{_fmt(claim.grounding)}</td><td>{status}</td></tr>"
    )


def _ids(value: object, docs: Mapping[int, str] | None = None) -> str:
    """A count of chunks, with the documents they belong to where the card knows them (never chunk ids)."""
    if isinstance(value, (list, tuple)):
        names = list(dict.fromkeys(docs[int(v)] for v in value if docs and int(v) in docs))
        return f"{len(value)}" + (f" ({_e(', '.join(names))})" if names else "")
    return _e(value)


def _hop_documents(hop: Mapping[str, Any]) -> str:
    """A hop's documents ("IMG_1002, IMG_1005"), or how many chunks it found when it names none."""
    docs = hop.get("documents")
    if isinstance(docs, (list, tuple)) and docs:
        return _e(", ".join(str(d) for d in docs[:6]) + (f" and {len(docs) - 6} more" if len(docs) > 6 else ""))
    n = len(list(hop.get("ids", [])))
    return f"{n} chunk{'' if n == 1 else 's'}"


def to_html(card: RationaleCard) -> str:
    """The card as a complete HTML document (a str); safe to write to a file and open offline."""
    question = (card.question or "").strip()
    parts: list[str] = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>kira rationale: {_e(question or 'image query')}</title><style>{_CSS}</style></head><body>",
        "<h1>kira rationale card</h1>",
        banner(card),
        "<h2>Question</h2><div class='box question'>",
        f"<div>{_e(question) if question else '<i>(no question text)</i>'}</div>",
    ]
    if card.query_image is not None:
        parts.append(f"<img alt='query image' src='{thumbnail_png(card.query_image)}'>")
    parts.append("</div><h2>Answer</h2>")
    from kira.explain.card import confidence_line, match_label

    line = confidence_line(card)
    conf = f"<div class='muted'>{_e(line)}</div>" if line else ""
    paragraphs = [p for p in card.answer.text.split("\n\n") if p.strip()] or [""]
    text = "".join(f"<p>{linked(p)}</p>" for p in paragraphs)  # the similar cases apart, as in the text card
    parts.append(f"<div class='box answer'>{text}{conf}</div>")
    parts.append(f"<h2>Evidence ({len(card.pack.items)})</h2>")
    parts += [_evidence_block(i, f"[Evidence {i.number}]", match=match_label(card, i))
              for i in card.pack.items] or [
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
    parts.append("<h2>Retrieval trail</h2><div class='box'><table class='kv'>")
    parts.append(f"<tr><th>query expansions</th><td>{_e('; '.join(card.expansions)) or 'none'}</td></tr>")
    if card.hops:
        chain = " &rarr; ".join(
            f"hop {_e(h.get('hop', n))}: {_hop_documents(h)}, confidence "
            f"{_fmt(None if h.get('confidence') is None else float(h['confidence']))}"
            for n, h in enumerate(card.hops, start=1)
        )
    else:
        chain = "none"
    parts.append(f"<tr><th>hop chain</th><td>{chain}</td></tr>")
    parts.append(f"<tr><th>stop reason</th><td>{_e(card.stop_reason or 'n/a')}</td></tr>")
    docs = {i.chunk_id: i.doc_id for i in (*card.pack.items, *card.pack.similar, *card.pack.dropped)}
    if card.critic is not None:
        note = f" &middot; {_e(card.critic['note'])}" if card.critic.get("note") else ""
        parts.append(
            f"<tr><th>critic</th><td>kept {_ids(card.critic.get('kept', []), docs)}, dropped "
            f"{_ids(card.critic.get('dropped', []), docs)}, threshold {_e(card.critic.get('threshold', 'n/a'))}{note}</td></tr>"
        )
    else:
        parts.append("<tr><th>critic</th><td>not run</td></tr>")
    parts.append("</table></div><h2>Timings</h2><div class='box'><table class='kv'>")
    parts += [f"<tr><th>{_e(k)}</th><td>{float(v):.2f} ms</td></tr>" for k, v in card.timings.items()] or [
        "<tr><td><i>none recorded</i></td></tr>"
    ]
    parts.append("</table></div>")
    if card.config:
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(readable(v))}</td></tr>" for k, v in card.config.items()
                       if readable(v))
        parts.append(f"<h2>Configuration</h2><div class='box'><table class='muted kv'>{rows}</table></div>")
    missing = card.missing_fields()
    if missing:
        parts.append(f"<div class='muted'>missing for completeness: {_e(', '.join(missing))}</div>")
    parts.append("</div></body></html>")
    return "".join(parts)
