"""Concept banks for query expansion (KIRA stage 2).

A concept bank is a list of short domain phrases: the user's, from their domain profile
(`DomainProfile.concepts`); kira ships none. At query time every concept is scored
against the question (cosine of sentence embeddings) and the best few become extra
text queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from kira.models.protocols import TextEncoder


@dataclass
class ConceptBank:
    """A named list of concepts; vectors are computed once per text encoder and cached."""

    name: str
    concepts: Sequence[str]
    _cache: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.concepts = tuple(dict.fromkeys(str(c).strip() for c in self.concepts if str(c).strip()))
        if not self.concepts:
            raise ValueError(f"concept bank {self.name!r} is empty; give at least one concept")

    def vectors(self, encoder: TextEncoder) -> np.ndarray:
        key = id(encoder)
        if key not in self._cache:
            self._cache[key] = np.asarray(encoder.encode(list(self.concepts)), dtype=np.float32)
        return self._cache[key]


def top_concepts(
    banks: Sequence[ConceptBank], encoder: TextEncoder, query_vector: np.ndarray, n: int
) -> list[tuple[str, float]]:
    """The `n` concepts across `banks` most similar to `query_vector` (unit, text space), best first."""
    if n <= 0 or not banks:
        return []
    scored: dict[str, float] = {}
    for bank in banks:
        sims = bank.vectors(encoder) @ np.asarray(query_vector, dtype=np.float32)
        for concept, sim in zip(bank.concepts, sims):
            scored[concept] = max(scored.get(concept, -1.0), float(sim))
    return sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
