"""Stages 2-5 over a knowledge base: `Kira(kb).ask(...) -> Result`, retrieval alone
(`Kira(kb).retrieve(...) -> Retrieval`), the stages, and the ablation `VARIANTS`."""

from __future__ import annotations

from kira.pipeline.concepts import ConceptBank
from kira.pipeline.kira import Kira, Result
from kira.pipeline.question import NamedDocuments, NoAnalysis, QuestionAnalysis
from kira.pipeline.retrieve import Hit, Retrieval, VectorError
from kira.pipeline.state import QueryState, Stage, StageContext
from kira.pipeline.variants import VARIANTS, variant_stages

__all__ = ["VARIANTS", "ConceptBank", "Hit", "Kira", "NamedDocuments", "NoAnalysis", "QueryState",
           "QuestionAnalysis", "Result", "Retrieval", "Stage", "StageContext", "VectorError", "variant_stages"]
