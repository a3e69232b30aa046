"""Content tokens for grounding and the critic: lower-cased words, stop-words removed, lightly stemmed."""

from __future__ import annotations

import functools
import re

STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves
    may might must shall us via per""".split()
)
"""English function words (NLTK's list, trimmed): never content."""

DISCOURSE_WORDS = frozenset(
    """evidence show shows showing shown depict depicts depicting indicate indicates indicating suggest suggests
    suggesting appear appears appearing seen visible likely image picture alternatively answer question based
    according overall note noted""".split()
)
"""Words that frame a claim ("the image shows ...") rather than state content."""

_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix stripper (plural, -ing, -ed, -ly, -ity...): "opacities" -> "opac", "enlarged" -> "enlarg".

    Deliberately conservative: it only has to make inflections of one word meet.
    """
    w = word
    if len(w) <= 3 or w[0].isdigit():
        return w
    for suffix in ("ational", "ization", "ities", "ically", "ation", "ness", "ment", "ies", "ity", "ing", "ies",
                   "ied", "ion", "ed", "es", "ly", "al", "ic", "s", "y", "e"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    return w


_NON = re.compile(r"\bnon-(?=[a-z])")


def words(text: str) -> list[str]:
    """Lower-cased word tokens of `text` (numbers like 0.5 kept whole; hyphens split, but a
    "non-" prefix stays on its word: "non-inverting" is "noninverting", not "non inverting")."""
    return _WORD.findall(_NON.sub("non", text.lower()).replace("-", " "))


def content_tokens(text: str) -> list[str]:
    """`words(text)` minus `STOP_WORDS` and `DISCOURSE_WORDS`, in order, duplicates kept."""
    return [w for w in words(text) if w not in STOP_WORDS and w not in DISCOURSE_WORDS]
