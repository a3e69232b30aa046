"""What flows through the pipeline: one immutable query state, the context stages share, the Stage seam.

`Kira.ask` builds a `QueryState` from the question and image, then hands it through an
ordered list of stages (kira.pipeline.variants); each stage returns a new state
(`QueryState.evolve`), never changes the one it was given, and may add entries to the
trace. `Kira` times every stage by its ``name``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, runtime_checkable

import numpy as np

from kira.config import KiraConfig
from kira.pipeline.query import Fused, QueryVectors, Ranking
from kira.profile import DomainProfile
from kira.reasoning.types import Answer, EvidenceItem, EvidencePack



def empty_fused() -> Fused:
    """A fused list with nothing in it."""
    return Fused(np.zeros(0, np.int64), np.zeros(0, np.float32), {}, {})


@dataclass(frozen=True)
class QuestionFacts:
    """What the question analysis found (kira.pipeline.question), for every stage that needs it."""

    named_chunks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # chunks of named documents
    named_terms: tuple[str, ...] = ()  # the identifier terms of the question the knowledge base holds


@dataclass(frozen=True)
class QueryState:
    """One question on its way through the stages. Immutable: stages return `evolve(...)` copies."""

    question: str  # "" for an image-only query
    pixels: np.ndarray | None  # the query image, uint8 RGB
    top_k: int  # evidence items handed to the generator
    levels: tuple[str, ...] | None  # chunk levels retrieval may return (None: all)
    allow: np.ndarray | None  # chunk ids those levels allow (None: all)
    facts: QuestionFacts = field(default_factory=QuestionFacts)
    query: QueryVectors | None = None  # the question and image in the indexes' spaces
    rankings: tuple[Ranking, ...] = ()  # every search's result list, for fusion
    expansions: tuple[tuple[str, np.ndarray, float], ...] = ()  # (text, vector, cosine to the question)
    fused: Fused = field(default_factory=empty_fused)  # the fused candidate list
    hops: tuple[dict[str, Any], ...] = ()  # what each residual hop found
    stop_reason: str | None = None  # why the hops stopped
    candidates: tuple[EvidenceItem, ...] = ()  # evidence items built from the fused list
    kept: tuple[EvidenceItem, ...] = ()  # what reaches the generator (after the critic)
    dropped: tuple[EvidenceItem, ...] = ()  # what the critic set aside
    critic: Mapping[str, Any] | None = None  # the critic's decision summary, for the card
    pack: EvidencePack | None = None  # the numbered evidence (the subject's, and similar cases apart)
    answer: Answer | None = None
    trace: Mapping[str, Any] = field(default_factory=dict)  # stage notes for Result.trace

    def evolve(self, *, trace: Mapping[str, Any] | None = None, **changes: Any) -> QueryState:
        """A copy with `changes` applied and `trace` entries merged into the trace."""
        if trace:
            changes["trace"] = {**self.trace, **trace}
        return dataclasses.replace(self, **changes)

    @property
    def image_query(self) -> bool:
        """Whether the query has an image side: a query image, or a raw vector given in its place
        (`Kira.retrieve(vector=...)`). Such a query is already a visual query."""
        return self.pixels is not None or (self.query is not None and self.query.image_vector is not None)

    @property
    def empty(self) -> bool:
        """Whether retrieval found nothing (an empty knowledge base, or nothing allowed)."""
        return not len(self.fused.ids)


@dataclass(frozen=True)
class StageContext:
    """What every stage may read: the knowledge base, its models and constants, and the reasoning parts."""

    kb: Any  # kira.KnowledgeBase (or any object with its methods the stages use)
    models: Any  # the model stack
    config: KiraConfig
    profile: DomainProfile
    generator: Any  # kira.reasoning.Generator
    critic: Any  # kira.reasoning.EvidenceCritic (built lazily by Kira)
    verifier: Any  # kira.reasoning.GroundingVerifier
    analysis: Any  # kira.pipeline.question.QuestionAnalysis
    max_per_document: int = 2  # at most this many chunks of one document in the evidence
    thumbnails: bool = True  # evidence items carry their document's decoded thumbnail (for HTML cards)


@runtime_checkable
class Stage(Protocol):
    """One step of the pipeline: a new state from the old one. ``name`` keys its timing."""

    name: str

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        """The state after this stage. Must not modify `state` (or anything it holds) in place."""
        ...
