"""The form of a question, from its everyday English wording alone (no domain's vocabulary).

* `asks_yes_no`: "is this a dog?", "does it show a crack?" ask whether; "is the light red or
  green?" asks which, "what is this?" asks what, and "do they agree, and what is the diagnosis?" asks
  whether and what, which no yes or no answers.
* `asked_phrase`: what a question asks, quoted as it wrote it ('cup of coffee').
"""

from __future__ import annotations

import re

from kira.reasoning.relevance import question_words

YES_NO_OPENERS = frozenset("is are was were am does do did has have had can could will would should".split())
"""English words that open a yes/no question ("is this a dog?", "does it show a crack?")."""

QUESTION_WORDS = frozenset("what which who whom whose where when why how".split())
"""English words that ask for something other than yes or no."""


def asks_yes_no(question: str | None) -> bool:
    """Whether `question` asks only yes or no: it opens with an auxiliary verb, offers no alternatives ("is the
    light red or green?" asks which, not whether) and asks nothing else ("..., and what is the diagnosis?")."""
    tokens = re.findall(r"[a-z']+", (question or "").lower())
    return bool(tokens) and tokens[0] in YES_NO_OPENERS and "or" not in tokens and not QUESTION_WORDS & set(tokens)


def asked_phrase(question: str | None, asked: str) -> str:
    """What the question asks, as it wrote it: the stretch of `question` from the first to the last of the
    `asked` words ("is this a cup of coffee?" asks 'cup of coffee', not 'cup coffee'), when that stretch holds
    no other content word (a subject's name); else the `asked` words as they are."""
    wanted = asked.split()
    if not question or not wanted:
        return asked
    spans = [m for m in re.finditer(r"[A-Za-z0-9]+", question) if m.group().lower() in set(wanted)]
    if not spans:
        return asked
    stretch = question[spans[0].start(): spans[-1].end()]
    return stretch if question_words(stretch) == wanted else asked


__all__ = ["QUESTION_WORDS", "YES_NO_OPENERS", "asked_phrase", "asks_yes_no"]
