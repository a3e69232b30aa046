"""Stages 2-5 over a knowledge base: `Kira(kb).ask(...) -> Result`, and the ablation `VARIANTS`."""

from __future__ import annotations

from kira.pipeline.concepts import BUILTIN_CONCEPTS, ConceptBank
from kira.pipeline.kira import VARIANTS, Kira, Result

__all__ = ["BUILTIN_CONCEPTS", "VARIANTS", "ConceptBank", "Kira", "Result"]
