"""Stage 4 of the KIRA paper, grounded reasoning over the evidence: selecting and packing it
(`evidence`), ReAG's critic, the subject split, generation and verification (`stages`), the
relevance verdict and abstention (`answer_relevance`), and the stored piece vectors the judge and
the verifier reuse (`pieces`). The reasoning parts themselves are kira.reasoning's."""

from __future__ import annotations

from kira.grounding.stages import Critic, Generate, SelectEvidence, Subject, Verify

__all__ = ["Critic", "Generate", "SelectEvidence", "Subject", "Verify"]
