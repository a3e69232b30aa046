"""Evaluation: the DomainVQA-R benchmark (builder, metrics, runner, planted-claim check)."""

from __future__ import annotations

from kira.eval.dataset import DOMAINS, Document, DomainDataset, Question, build_domainvqa

__all__ = ["DOMAINS", "Document", "DomainDataset", "Question", "build_domainvqa"]
