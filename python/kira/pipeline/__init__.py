"""Stages 2-5 over a knowledge base: `Kira(kb).ask(...) -> Result`, retrieval alone
(`Kira(kb).retrieve(...) -> Retrieval`), the stage loop, and the ablation `VARIANTS` as stage lists.

The stages themselves live in the packages of the paper's stages: kira.retrieval (stage 2),
kira.multihop (stage 3) and kira.grounding (stage 4); the state they pass is kira.query_state's.
The pipeline imports them; none of them imports the pipeline."""

from __future__ import annotations

from kira.pipeline.kira import Kira
from kira.pipeline.question import NamedDocuments, NoAnalysis, QuestionAnalysis
from kira.pipeline.result import Result
from kira.pipeline.retrieve import Hit, Retrieval, VectorError
from kira.pipeline.variants import VARIANTS, variant_stages
from kira.query_state import QueryState, Stage, StageContext
from kira.retrieval.concepts import ConceptBank

__all__ = ["VARIANTS", "ConceptBank", "Hit", "Kira", "NamedDocuments", "NoAnalysis", "QueryState",
           "QuestionAnalysis", "Result", "Retrieval", "Stage", "StageContext", "VectorError", "variant_stages"]
