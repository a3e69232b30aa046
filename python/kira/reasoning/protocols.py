"""The stage-4 seams: what writes an answer from evidence, and what filters the evidence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from kira.reasoning.types import Answer, EvidenceItem, EvidencePack


@runtime_checkable
class Generator(Protocol):
    """Evidence pack -> answer. Must cite only evidence numbers present in the pack."""

    def generate(self, question: str, pack: EvidencePack) -> Answer:
        """An `Answer` whose claims cite ``[Evidence N]`` of `pack` (scores left unset)."""
        ...


@dataclass(frozen=True)
class CriticDecision:
    """What a critic kept and dropped, and why.

    ``kept`` and ``dropped`` preserve the input order; ``probabilities`` holds
    P(relevant) for every input item, keyed by its ``chunk_id``; ``threshold`` is the
    cut used; ``fallback`` is True when every item fell at or below the threshold and
    the critic kept the best one anyway (it never returns an empty ``kept`` for a
    non-empty input); ``note`` says so in words for the rationale card.
    """

    kept: tuple[EvidenceItem, ...]
    dropped: tuple[EvidenceItem, ...]
    probabilities: dict[int, float]
    threshold: float
    fallback: bool = False
    note: str = ""


@runtime_checkable
class EvidenceCritic(Protocol):
    """ReAG's critic over evidence items: P(relevant | question, item) and a filter on it."""

    def probabilities(self, question: str, items: Sequence[EvidenceItem]) -> list[float]:
        """P(relevant) in [0, 1] for each item, in order."""
        ...

    def filter(self, question: str, items: Sequence[EvidenceItem], threshold: float | None = None) -> CriticDecision:
        """Keep items with P(relevant) > threshold (the config's ``critic_threshold`` by default)."""
        ...
