"""A sentence an answer opens with, before what the evidence says: why, and what the trace records of it.

kira.grounding.yes_no opens a yes/no answer ("Nothing recorded about IMG_1027 matches 'dog'."), and
kira.grounding.unheld_words one whose question's words no record holds ("No record in this knowledge base
mentions 'fractured' or 'wrist'; ...").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kira.reasoning.types import Answer


@dataclass(frozen=True)
class Opening:
    """The sentence that opens an answer, the reasoning step that says why, and its trace entry."""

    text: str
    step: str  # the reasoning step
    trace: dict[str, Any] = field(default_factory=dict)  # what Result.trace records of it (yes/no: trace["yes_no"])


def with_opening(answer: Answer, opening: Opening | None) -> Answer:
    """`answer` with `opening` opening its text and its reasoning step added (unchanged for None)."""
    if opening is None:
        return answer
    return dataclasses.replace(answer, text=f"{opening.text} {answer.text}", reasoning=(*answer.reasoning, opening.step))


__all__ = ["Opening", "with_opening"]
