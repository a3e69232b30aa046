"""The query state, stage context and Stage seam the pipeline runs (defined in kira.query_state, below
every stage package, so that kira.retrieval, kira.multihop and kira.grounding need not import the
pipeline that runs them)."""

from __future__ import annotations

from kira.query_state import QueryState, QuestionAnalysis, QuestionFacts, Stage, StageContext

__all__ = ["QueryState", "QuestionAnalysis", "QuestionFacts", "Stage", "StageContext"]
