"""How a stored description splits into the pieces that are compared and stored: pure text helpers.

`summary_pieces` cuts a description into the whole text and its sentences / ";" parts (what the
grounding verifier compares a claim with, and what ingest stores vectors of); `appearance_parts`
picks the parts of a described image's text that only say how it looks (the default describer's
measurements). Both the knowledge base (stage 1, at ingest) and reasoning (stage 4) read them,
so they live below both.
"""

from __future__ import annotations

import functools
import re

from kira.text.tokens import content_tokens

_PIECE = re.compile(r"(?<=[.;!?])\s+")
_FIELD_HEADS = ("tags:", "text:", "labels:")
_LOCATION = re.compile(r"^(?:region|patch|document) at x \d+-\d+, y \d+-\d+ of \d+x\d+$")
_NUMBER_IN_PARENS = re.compile(r"\s*\([^()]*\d[^()]*\)")
_PERCENT = re.compile(r"\s*\b\d+(?:\.\d+)?%")
PARTS_REMEMBERED = 8192  # summaries (and parts) whose split a process keeps: evidence items recur across asks


def summary_pieces(summary: str) -> list[str]:
    """The texts a claim is compared with for s_sim: the whole summary and each of its sentences / ";" parts.

    Parts with fewer than two content tokens are left out (they carry no statement).
    """
    parts = [p.strip() for p in _PIECE.split(summary) if len(content_tokens(p)) >= 2]
    whole = summary.strip()
    return [whole, *(p for p in parts if p != whole)] if whole else parts


def describer_parts(summary: str, caption: str) -> tuple[str, list[str]]:
    """(location, measurement parts) of a described image's `summary`: its ";" parts that are neither the
    user's `caption`, a field (tags, text read, labels) nor its location, as written (figures kept).
    Remembered per (summary, caption): an ask reads each evidence item's parts many times."""
    location, measured = _describer_parts(summary, caption)
    return location, list(measured)


@functools.lru_cache(maxsize=PARTS_REMEMBERED)
def _describer_parts(summary: str, caption: str) -> tuple[str, tuple[str, ...]]:
    location = ""
    measured: list[str] = []
    rest = summary.strip()
    if caption and rest.startswith(caption.strip()):
        rest = rest[len(caption.strip()):]
    for part in (p.strip() for p in rest.split(";")):
        if not part or part.lower().startswith(_FIELD_HEADS):
            continue
        if _LOCATION.match(part):
            location = part
            continue
        if part.startswith(("text ", "tags ")) or part in (caption or ""):
            continue
        measured.append(part)
    return location, tuple(measured)


def is_location(part: str) -> bool:
    """Whether a description part only says where a chunk lies ("region at x 10-80, y 5-60 of 512x512")."""
    return bool(_LOCATION.match(part.strip()))


def appearance_parts(summary: str, caption: str | None = None) -> list[str]:
    """The parts of a knowledge base-described image's `summary` that only say how it looks: the describer's
    brightness, colour, texture and salient-region measurements, as written (`kira.reasoning.shown.shown` reads them as
    `Shown.looks`, without figures). `caption`: the user's caption the summary starts with (None or "" when
    none). Returns [] for a summary of nothing but caption, fields and location."""
    return describer_parts(summary, caption or "")[1]


@functools.lru_cache(maxsize=PARTS_REMEMBERED)
def appearance_words(part: str) -> str:
    """A describer part without its figures: 'A dark, ... image (512x512, square) dominated by gray (80%)'
    -> 'a dark, ... image dominated by gray'; a salient-region part gives ""."""
    if "salient region" in part:
        return ""  # where the describer's saliency peaks: a layout statistic, not a look
    text = _PERCENT.sub("", _NUMBER_IN_PARENS.sub("", part)).strip(" ,;.")
    text = re.sub(r"\s+,", ",", re.sub(r"\s{2,}", " ", text))
    return text[:1].lower() + text[1:] if text else ""


__all__ = ["appearance_parts", "appearance_words", "describer_parts", "is_location", "summary_pieces"]
