"""A model stack's own critic (kira.models.protocols.Critic: relevance(question, texts)) as kira.reasoning's
`EvidenceCritic`, so the Critic stage runs it like any other."""

from __future__ import annotations

from typing import Sequence

from kira.models.protocols import Critic as ModelCritic
from kira.reasoning.critic import filter_by_probability
from kira.reasoning.protocols import CriticDecision
from kira.reasoning.types import EvidenceItem


class StackCritic:
    """Adapts a model-layer `Critic` (relevance(question, texts)) to kira.reasoning's EvidenceCritic."""

    def __init__(self, critic: ModelCritic, threshold: float) -> None:
        self.inner = critic
        self.threshold = threshold

    def probabilities(self, question: str, items: Sequence[EvidenceItem]) -> list[float]:
        """P(relevant) of each item's summary, as the stack's critic scores it."""
        if not items:
            return []
        return [float(p) for p in self.inner.relevance(question, [i.summary for i in items])]

    def filter(self, question: str, items: Sequence[EvidenceItem], threshold: float | None = None) -> CriticDecision:
        """Keep items with P(relevant) > threshold (this critic's own by default)."""
        return filter_by_probability(items, self.probabilities(question, items),
                                     self.threshold if threshold is None else threshold)


__all__ = ["StackCritic"]
