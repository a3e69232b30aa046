"""Stage 5, explanation: the rationale card and its text, JSON and HTML renderings."""

from __future__ import annotations

from kira.explain.card import FIELD_RULES, REQUIRED_FIELDS, RationaleCard, critic_summary

__all__ = ["FIELD_RULES", "REQUIRED_FIELDS", "RationaleCard", "critic_summary"]
