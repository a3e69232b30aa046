"""The form of a question, from its everyday English wording alone (no domain's vocabulary).

* `asks_yes_no`: "is this a dog?", "does it show a crack?" ask whether; "is the light red or
  green?" asks which, "what is this?" asks what, and "do they agree, and what is the diagnosis?" asks
  whether and what, which no yes or no answers.
"""

from __future__ import annotations

import re

YES_NO_OPENERS = frozenset("is are was were am does do did has have had can could will would should".split())
"""English words that open a yes/no question ("is this a dog?", "does it show a crack?")."""

QUESTION_WORDS = frozenset("what which who whom whose where when why how".split())
"""English words that ask for something other than yes or no."""


def asks_yes_no(question: str | None) -> bool:
    """Whether `question` asks only yes or no: it opens with an auxiliary verb, offers no alternatives ("is the
    light red or green?" asks which, not whether) and asks nothing else ("..., and what is the diagnosis?")."""
    tokens = re.findall(r"[a-z']+", (question or "").lower())
    return bool(tokens) and tokens[0] in YES_NO_OPENERS and "or" not in tokens and not QUESTION_WORDS & set(tokens)


__all__ = ["QUESTION_WORDS", "YES_NO_OPENERS", "asks_yes_no"]
