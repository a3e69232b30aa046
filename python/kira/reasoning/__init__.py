"""Stage 4, grounded reasoning: evidence packs, generators, the critic and the grounding verifier."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from kira.reasoning.citations import find_citations, split_claims
from kira.reasoning.protocols import CriticDecision, EvidenceCritic, Generator
from kira.reasoning.template_generator import TemplateGenerator
from kira.reasoning.types import LEVELS, Answer, Claim, EvidenceItem, EvidencePack

if TYPE_CHECKING:  # the names _LAZY imports on first use, as the type checker sees them
    from kira.reasoning.critic import LMCritic, SimilarityCritic
    from kira.reasoning.lm_generator import LanguageModelGenerator
    from kira.reasoning.openai_generator import GenerationError, OpenAICompatibleGenerator
    from kira.reasoning.relevance import Relevance, RelevanceJudge
    from kira.reasoning.verifier import GroundingVerifier

_LAZY = {
    "GroundingVerifier": "kira.reasoning.verifier",
    "SimilarityCritic": "kira.reasoning.critic",
    "LMCritic": "kira.reasoning.critic",
    "OpenAICompatibleGenerator": "kira.reasoning.openai_generator",
    "GenerationError": "kira.reasoning.openai_generator",
    "LanguageModelGenerator": "kira.reasoning.lm_generator",
    "RelevanceJudge": "kira.reasoning.relevance",
    "Relevance": "kira.reasoning.relevance",
}

__all__ = [
    "LEVELS",
    "Answer",
    "Claim",
    "CriticDecision",
    "EvidenceCritic",
    "EvidenceItem",
    "EvidencePack",
    "Generator",
    "TemplateGenerator",
    "find_citations",
    "split_claims",
    *_LAZY,
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'kira.reasoning' has no attribute {name!r}")
