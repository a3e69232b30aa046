"""Wording a statement as its sources agree (the template generator's consensus).

Sources that word one statement differently ("the left lower zone" / "the right lower
zone"; "R = 22k" / "R = 47k") agree on the class-level part: `consensus_text` keeps the
content words more than `CONSENSUS_SHARE` of the (weighted) witnesses use, leaves out a
clause whose value they disagree on, and writes a unitless reading they disagree on as
its range over the cited documents ("about 0.62-0.67"). Every word kept is a word of the
evidence. A wording that loses its first clause and would open on a clause that leans on it
("which lowers the cutoff frequency", after "R1 changed from 22k to 100k" was left out) is no
wording: it reads as a fragment, so `consensus_text` gives "" and the generator words the
statement as one witness does, citing only the witnesses that word it so.
"""

from __future__ import annotations

import re
from typing import Iterable

from kira.reasoning.sentences import has_value
from kira.text.tokens import content_tokens, stem

CONSENSUS_SHARE = 0.7  # a word of a statement is kept when more than this share of its sources state it

_PIECE = re.compile(r"(?:non-(?=[a-z]))?[a-z0-9]+(?:\.[0-9]+)?", re.I)  # "non-inverting" is one word (kira.text.tokens.words)
_CLAUSE = re.compile(r"(?<=[,;])\s+")
DEPENDENT_OPENERS = frozenset({
    "which", "that", "who", "whose", "whom", "where", "when", "while", "whereas", "and", "but", "or", "nor", "so",
    "because", "although", "though", "since", "thus", "hence", "then"})
"""English words that open a clause leaning on the one before it: a consensus may not open on one."""


_PLAIN_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")
_UNITLESS_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]|\.\d)")  # 0.65, not 2.2k or C1


def value_ranges(text: str, readers: Iterable[frozenset[str]], agreed: frozenset[str]) -> dict[str, str]:
    """{the one unitless number of `text` not agreed: "lo-hi" over `readers`' numbers} when each
    of them states at most one such number besides those `text` keeps (so they are readings of one
    quantity), else {}. A reading most witnesses agree on is a reading too: "0.67" written by the
    best-weighted witness, "0.65" by the rest, spans "0.65-0.67"."""
    numbers = _UNITLESS_NUMBER.findall(text)
    own = {w for w in numbers if w not in agreed}
    if len(own) != 1:
        return {}
    kept = {w for w in numbers if w in agreed}
    readings: list[str] = []
    for stems in readers:
        values = [s for s in stems if _PLAIN_NUMBER.match(s) and s not in kept]
        if len(values) > 1:
            return {}
        readings += values
    if not readings:
        return {}
    lo, hi = min(readings, key=float), max(readings, key=float)
    return {next(iter(own)): f"{lo}-{hi}"} if float(lo) < float(hi) else {}


def consensus_text(text: str, agreed: frozenset[str], ranges: dict[str, str] | None = None) -> str:
    """`text` with the content words whose stem is not in `agreed` left out.

    A clause (comma-separated) that loses a value (10k, 0.65) is left out whole: a name
    without its value states nothing, unless `ranges` maps that value to the range its
    sources span ("0.65" -> "0.62-0.67"), which takes its place. Every word kept is a
    word of `text` or an end of such a range.
    """
    ranges = ranges or {}
    kept_clauses: list[str] = []
    first_dropped = False
    for n, clause in enumerate(_CLAUSE.split(text)):
        out: list[str] = []
        last = 0
        dropped_value = False
        for m in _PIECE.finditer(clause):
            word = m.group(0).lower().replace("-", "")
            drop = word in content_tokens(word) and stem(word) not in agreed
            if drop and word in ranges:
                out.append(clause[last:m.start()] + ranges[word])
                last = m.end()
                continue
            if drop:
                dropped_value = dropped_value or has_value(word)
                out.append(clause[last:m.start()])
                last = m.end()
                if last < len(clause) and clause[last] in "- ":
                    last += 1  # the word's trailing space or hyphen goes with it
        out.append(clause[last:])
        piece = re.sub(r"\s{2,}", " ", "".join(out)).strip()
        if not dropped_value and content_tokens(piece.rstrip(",;")):
            kept_clauses.append(piece)
        elif n == 0:
            first_dropped = True
    if first_dropped and kept_clauses and kept_clauses[0].split()[0].lower().strip(",;") in DEPENDENT_OPENERS:
        return ""  # "which lowers the cutoff frequency": a fragment, no wording (module docstring)
    joined = " ".join(kept_clauses).strip().rstrip(",;").strip()
    return re.sub(r"\s+([,;])", r"\1", joined)


def without_words(text: str, dropped: Iterable[str]) -> str:
    """`text` with the content words whose stem is in `dropped` left out (see `consensus_text`)."""
    dropped = frozenset(dropped)
    kept = frozenset(stem(m.group(0).lower().replace("-", "")) for m in _PIECE.finditer(text)) - dropped
    return consensus_text(text, kept) or text
