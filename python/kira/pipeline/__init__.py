"""Stages 2-5 over a knowledge base: `Kira(kb).ask(...) -> Result`, its stages, and the ablation `VARIANTS`."""

from __future__ import annotations

from kira.pipeline.concepts import ConceptBank
from kira.pipeline.kira import Kira, Result
from kira.pipeline.question import NamedDocuments, NoAnalysis, QuestionAnalysis
from kira.pipeline.state import QueryState, Stage, StageContext
from kira.pipeline.variants import VARIANTS, variant_stages

__all__ = ["VARIANTS", "ConceptBank", "Kira", "NamedDocuments", "NoAnalysis", "QueryState", "QuestionAnalysis",
           "Result", "Stage", "StageContext", "variant_stages"]
