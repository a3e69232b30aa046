"""Parsing ``[Evidence N]`` citations and splitting answer text into claims.

Accepted citation forms (case-insensitive): ``[Evidence 2]``, ``[Evidence 1, 3]``,
``[Evidence 1,3 and 4]``, ``[Evidence 1-3]`` (a range), and runs of single markers
``[Evidence 1][Evidence 2]``. A claim is one sentence; a citation marker belongs to the
sentence it ends (markers placed right after a full stop are attached to the sentence
before them, as LLMs often write ``... a crack. [Evidence 2]``).
"""

from __future__ import annotations

import re

from kira.reasoning.types import Claim, strip_citation_marks

CITATION_PATTERN = re.compile(r"\[\s*Evidence\s+([0-9][0-9\s,&\-–]*(?:and\s*[0-9][0-9\s,&\-–]*)*)\]", re.IGNORECASE)
"""One bracketed citation marker; group 1 holds the number list."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_LEADING_MARKS = re.compile(r"^((?:\s*\[\s*Evidence[^\]]*\])+)", re.IGNORECASE)


def parse_numbers(inner: str) -> tuple[int, ...]:
    """Numbers in the inside of one marker: "1, 3 and 5" -> (1, 3, 5); "2-4" -> (2, 3, 4).

    Order of first appearance, duplicates removed. Ranges longer than 50 are refused
    (ValueError) rather than expanded.
    """
    numbers: list[int] = []
    for part in re.split(r"\s*(?:,|&|\band\b)\s*", inner.strip(), flags=re.IGNORECASE):
        part = part.strip()
        if not part:
            continue
        span = re.fullmatch(r"(\d+)\s*[\-–]\s*(\d+)", part)
        if span:
            lo, hi = int(span.group(1)), int(span.group(2))
            if hi < lo or hi - lo > 50:
                raise ValueError(f"citation range {part!r} is reversed or longer than 50")
            numbers.extend(range(lo, hi + 1))
        elif part.isdigit():
            numbers.append(int(part))
    seen: dict[int, None] = {}
    for n in numbers:
        seen.setdefault(n, None)
    return tuple(seen)


def _safe_numbers(inner: str) -> tuple[int, ...]:
    # Model output is untrusted: a reversed or runaway range cites nothing rather than raising.
    try:
        return parse_numbers(inner)
    except ValueError:
        return ()


def find_citations(text: str) -> tuple[int, ...]:
    """All evidence numbers cited anywhere in `text`, in order of first appearance.

    Never raises: a marker with a reversed or runaway range ("[Evidence 1-1000]") cites nothing.
    """
    seen: dict[int, None] = {}
    for match in CITATION_PATTERN.finditer(text):
        for n in _safe_numbers(match.group(1)):
            seen.setdefault(n, None)
    return tuple(seen)


def split_sentences(text: str) -> list[str]:
    """`text` split into sentences; citation markers that open a sentence move to the previous one.

    Bullets ("- ", "* ", "1. ") at line starts are removed; blank pieces are dropped.
    """
    lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", line) for line in text.splitlines()]
    pieces: list[str] = []
    for line in lines:
        pieces.extend(p.strip() for p in _SENTENCE_END.split(line) if p.strip())
    sentences: list[str] = []
    for piece in pieces:
        lead = _LEADING_MARKS.match(piece)
        if lead and sentences:
            sentences[-1] = f"{sentences[-1]} {lead.group(1).strip()}"
            piece = piece[lead.end():].strip()
        if piece:
            sentences.append(piece)
    return sentences


def split_claims(text: str, valid: set[int] | frozenset[int] | None = None) -> tuple[Claim, ...]:
    """One `Claim` per sentence of `text` that says something beyond its citation markers.

    Parameters
    ----------
    text: answer text with inline ``[Evidence N]`` markers.
    valid: the evidence numbers present in the pack. When given, cited numbers outside
        it are moved from ``citations`` to ``invalid_citations`` (they can't ground the
        claim). None keeps every number.

    Returns the claims in order (scores unset).
    """
    claims: list[Claim] = []
    for sentence in split_sentences(text):
        if not strip_citation_marks(sentence).strip(" .;:,"):
            continue
        cited = find_citations(sentence)
        if valid is None:
            claims.append(Claim(text=sentence, citations=cited))
        else:
            claims.append(
                Claim(
                    text=sentence,
                    citations=tuple(n for n in cited if n in valid),
                    invalid_citations=tuple(n for n in cited if n not in valid),
                )
            )
    return tuple(claims)


def format_citation(numbers: tuple[int, ...] | list[int]) -> str:
    """The marker for `numbers`: (1,) -> "[Evidence 1]", (1, 3) -> "[Evidence 1, 3]"; () -> ""."""
    if not numbers:
        return ""
    return "[Evidence " + ", ".join(str(n) for n in numbers) + "]"
