"""What the stages of every paper stage share: the immutable `QueryState`, the `StageContext`, the
`Stage` seam, and the typed records one stage leaves for another (rankings per retrieval path, the
fused list). It imports no stage package: kira.retrieval, kira.multihop, kira.grounding and
kira.pipeline import it."""

from __future__ import annotations

from kira.query_state.records import Fused, QueryVectors, Ranking, Rankings, RetrievalPath, empty_fused
from kira.query_state.state import HopNote, QueryState, QuestionAnalysis, QuestionFacts, Stage, StageContext

__all__ = ["Fused", "HopNote", "QueryState", "QueryVectors", "QuestionAnalysis", "QuestionFacts", "Ranking",
           "Rankings", "RetrievalPath", "Stage", "StageContext", "empty_fused"]
