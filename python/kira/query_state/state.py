"""What flows through the pipeline: one immutable query state, the context stages share, the Stage seam.

`Kira.ask` builds a `QueryState` from the question and image, then hands it through an
ordered list of stages (kira.pipeline.variants); each stage returns a new state
(`QueryState.evolve`), never changes the one it was given, and may add entries to the
trace. `Kira` times every stage by its ``name``. What one stage leaves for another is a typed
field here (`Rankings`, `Fused.leaders`, `QuestionFacts`, `relevance`), never a name to look up.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, TypedDict, runtime_checkable

import numpy as np

from kira.config import KiraConfig
from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.models.stack import ModelStack
from kira.profile import DomainProfile
from kira.query_state.records import Fused, QueryVectors, Rankings, empty_fused
from kira.reasoning.protocols import EvidenceCritic, Generator
from kira.reasoning.relevance import Relevance
from kira.reasoning.types import Answer, EvidenceItem, EvidencePack
from kira.reasoning.verifier import GroundingVerifier


@dataclass(frozen=True)
class QuestionFacts:
    """What the question analysis found (kira.pipeline.question), for every stage that needs it."""

    named_chunks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # chunks of named documents
    named_terms: tuple[str, ...] = ()  # the identifier terms of the question the knowledge base holds


class HopNote(TypedDict, total=False):
    """What one residual hop found, as the trace and the rationale card show it."""

    hop: int  # 1-based
    ids: list[int]  # its first chunk ids
    confidence: float
    new: int  # how many of its results no earlier hop returned
    documents: list[str]  # the documents of `ids` (added when the evidence is selected)


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
    rankings: Rankings = field(default_factory=Rankings)  # every search's result list, for fusion
    expansions: tuple[tuple[str, np.ndarray, float], ...] = ()  # (text, vector, cosine to the question)
    fused: Fused = field(default_factory=empty_fused)  # the fused candidate list
    hops: tuple[HopNote, ...] = ()  # what each residual hop found
    stop_reason: str | None = None  # why the hops stopped
    candidates: tuple[EvidenceItem, ...] = ()  # evidence items built from the fused list
    kept: tuple[EvidenceItem, ...] = ()  # what reaches the generator (after the critic)
    dropped: tuple[EvidenceItem, ...] = ()  # what the critic set aside
    critic: Mapping[str, Any] | None = None  # the critic's decision summary, for the card
    pack: EvidencePack | None = None  # the numbered evidence (the subject's, and similar cases apart)
    relevance: Relevance | None = None  # the relevance verdict on the pack (None: not judged)
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


@runtime_checkable
class QuestionAnalysis(Protocol):
    """question + knowledge base -> `QuestionFacts` (implementations: kira.pipeline.question)."""

    def analyze(self, question: str, kb: KnowledgeBaseLike, allow: np.ndarray | None) -> QuestionFacts:
        ...


@dataclass(frozen=True)
class StageContext:
    """What every stage may read: the knowledge base, its models and constants, and the reasoning parts.

    critic_shares_query_encoder / verifier_shares_query_encoder: the critic's (verifier's) text encoder is
    the stack's, so the question's sentence vector from the query encoding and the knowledge base's stored
    piece vectors are in its space and may be handed to it. `Kira` decides this once, where it builds them.
    """

    kb: KnowledgeBaseLike
    models: ModelStack
    config: KiraConfig
    profile: DomainProfile
    generator: Generator
    analysis: QuestionAnalysis
    critic: EvidenceCritic | None = None  # None: retrieval only
    verifier: GroundingVerifier | None = None  # None: retrieval only
    critic_shares_query_encoder: bool = False
    verifier_shares_query_encoder: bool = False
    max_per_document: int = 2  # at most this many chunks of one document in the evidence
    thumbnails: bool = True  # evidence items carry their document's decoded thumbnail (for HTML cards)


@runtime_checkable
class Stage(Protocol):
    """One step of the pipeline: a new state from the old one. ``name`` keys its timing."""

    @property
    def name(self) -> str:
        """What the stage's timing and trace entries are called."""
        ...

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        """The state after this stage. Must not modify `state` (or anything it holds) in place."""
        ...
