"""Per-domain concept banks for query expansion (KIRA stage 2).

A concept bank is a list of short domain phrases. At query time every concept is scored
against the question (cosine of sentence embeddings) and the best few become extra
text queries. Built-in banks cover the paper's four domains; users pass their own with
`ConceptBank(name, concepts)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

BUILTIN_CONCEPTS: dict[str, tuple[str, ...]] = {
    "radiology": (
        "pneumonia consolidation in the lung", "pleural effusion", "pneumothorax", "cardiomegaly enlarged heart",
        "pulmonary nodule", "rib fracture", "normal chest x-ray", "lung opacity", "atelectasis",
        "CT scan axial slice", "MRI brain scan", "bone fracture on x-ray", "retina fundus photograph",
        "posteroanterior chest radiograph", "lateral view radiograph", "follow-up study over time",
    ),
    "circuits": (
        "resistor", "capacitor", "inductor", "operational amplifier", "voltage divider", "RC low-pass filter",
        "high-pass filter", "transistor amplifier", "diode rectifier", "battery voltage source", "ground symbol",
        "series circuit", "parallel circuit", "LED with current-limiting resistor", "circuit schematic diagram",
    ),
    "remote_sensing": (
        "satellite image of farmland", "urban area with buildings", "forest cover", "river or lake water body",
        "road network", "deforestation", "flooded area", "desert terrain", "coastline", "crop fields",
        "cloud cover", "land use change over time", "aerial photograph",
    ),
    "histopathology": (
        "tumour cells", "normal tissue", "inflammation with immune cells", "necrosis", "mitotic figures",
        "immunohistochemistry staining", "H&E stained tissue section", "gland structure", "stroma",
        "nuclei stained blue", "brown DAB stain positive cells", "microscopy slide", "carcinoma",
    ),
}


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

    def vectors(self, encoder: Any) -> np.ndarray:
        key = id(encoder)
        if key not in self._cache:
            self._cache[key] = np.asarray(encoder.encode(list(self.concepts)), dtype=np.float32)
        return self._cache[key]


def builtin_banks() -> list[ConceptBank]:
    """One `ConceptBank` per built-in domain."""
    return [ConceptBank(name, concepts) for name, concepts in BUILTIN_CONCEPTS.items()]


def top_concepts(
    banks: Sequence[ConceptBank], encoder: Any, query_vector: np.ndarray, n: int
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
