"""The form of a question, from its everyday English wording alone (no domain's vocabulary).

* `asks_yes_no`: "is this a dog?", "does it show a crack?" ask whether; "is the light red or
  green?" asks which, and "what is this?" asks what.
"""

from __future__ import annotations

YES_NO_OPENERS = frozenset("is are was were am does do did has have had can could will would should".split())
"""English words that open a yes/no question ("is this a dog?", "does it show a crack?")."""


def asks_yes_no(question: str | None) -> bool:
    """Whether `question` asks yes or no: it opens with an auxiliary verb and offers no alternatives ("is the
    light red or green?" asks which, not whether)."""
    tokens = (question or "").lower().replace("?", " ").split()
    return bool(tokens) and tokens[0] in YES_NO_OPENERS and "or" not in tokens


__all__ = ["YES_NO_OPENERS", "asks_yes_no"]
