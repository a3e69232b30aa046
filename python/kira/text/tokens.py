"""Content tokens for grounding and the critic: lower-cased words, stop-words removed, Snowball-stemmed."""

from __future__ import annotations

import functools
import re
import threading
from typing import Callable

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


_local = threading.local()


def _stemmer() -> Callable[[str], str]:
    """This thread's Snowball English stemmer (PyStemmer's objects are not thread-safe)."""
    st: Callable[[str], str] | None = getattr(_local, "stemmer", None)
    if st is None:
        try:
            import Stemmer  # PyStemmer: Snowball compiled to C

            st = Stemmer.Stemmer("english").stemWord
        except ImportError:
            try:
                import snowballstemmer  # the same algorithms in pure Python

                st = snowballstemmer.stemmer("english").stemWord
            except ImportError as exc:
                raise ImportError("kira's text tokens need a Snowball stemmer: pip install PyStemmer") from exc
        _local.stemmer = st
    return st


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The Snowball (Porter2) English stem of a lower-cased word: "lesions" -> "lesion",
    "masses" -> "mass", "opacities" -> "opac", "enlarged"/"enlargement" -> "enlarg".

    Words of one or two letters and tokens that start with a digit ("0.5", "3d") are kept whole.
    """
    if len(word) <= 2 or word[0].isdigit():
        return word
    return _stemmer()(word)


_NON = re.compile(r"\bnon-(?=[a-z])")


def words(text: str) -> list[str]:
    """Lower-cased word tokens of `text` (numbers like 0.5 kept whole; hyphens split, but a
    "non-" prefix stays on its word: "non-inverting" is "noninverting", not "non inverting")."""
    return _WORD.findall(_NON.sub("non", text.lower()).replace("-", " "))


def content_tokens(text: str) -> list[str]:
    """`words(text)` minus `STOP_WORDS` and `DISCOURSE_WORDS`, in order, duplicates kept."""
    return [w for w in words(text) if w not in STOP_WORDS and w not in DISCOURSE_WORDS]
