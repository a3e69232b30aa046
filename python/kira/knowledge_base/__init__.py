"""Stage 1: the persistent knowledge base (SQLite + the core's vector indexes)."""

from __future__ import annotations

from kira.knowledge_base.ingest import IngestSummary
from kira.knowledge_base.kb import KnowledgeBase

__all__ = ["IngestSummary", "KnowledgeBase"]
