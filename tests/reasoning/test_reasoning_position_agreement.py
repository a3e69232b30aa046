"""Agreement on where a finding sits across every claim of one answer (kira.reasoning.position_agreement)."""

from __future__ import annotations

from report_profile import REPORT_PROFILE

from kira.reasoning.sentences import vocabulary

import pytest

from kira.reasoning.position_agreement import disputed_positions
from kira.reasoning.template_generator import TemplateGenerator
from kira.reasoning.types import EvidenceItem, EvidencePack

VOCAB = vocabulary(REPORT_PROFILE)


def _item(doc: str, score: float, caption: str) -> EvidenceItem:
    return EvidenceItem(0, 0, doc, "document", score, ("visual",), caption, {"caption": caption})


def _effusion(doc: str, side: str, impression: bool) -> EvidenceItem:
    text = f"Findings: blunting of the {side} costophrenic angle with a fluid level."
    return _item(doc, 0.9, text + (f" Impression: {side} pleural effusion." if impression else ""))


def test_a_side_the_evidence_splits_on_is_left_out_of_every_claim() -> None:
    # seven films state the finding, 4 left / 3 right; only two (both right) also state the impression:
    # by its own two sources the impression would say "right", which the finding's witnesses dispute
    sides = ["right", "left", "left", "right", "left", "right", "left"]
    items = [_effusion(f"d{i}", s, impression=i in (0, 3)) for i, s in enumerate(sides)]
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("What does this radiograph show?", EvidencePack.from_items("q", items))
    assert "right" not in answer.plain_text.lower() and "left" not in answer.plain_text.lower()
    assert "pleural effusion" in answer.plain_text.lower() and "costophrenic angle" in answer.plain_text.lower()
    assert any("Where the finding sits" in line and "'right'" in line for line in answer.reasoning)


def test_a_side_most_of_the_evidence_states_is_kept() -> None:
    sides = ["left", "left", "left", "left", "left", "right"]
    items = [_effusion(f"d{i}", s, impression=i < 2) for i, s in enumerate(sides)]
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("What does this radiograph show?", EvidencePack.from_items("q", items))
    assert "left pleural effusion" in answer.plain_text.lower()
    assert "left costophrenic angle" in answer.plain_text.lower()
    assert not any("Where the finding sits" in line for line in answer.reasoning)


def test_disputed_positions_weighs_witnesses_and_lets_a_two_sided_witness_abstain() -> None:
    wordings = [("a", frozenset({"left", "lower", "zone"})), ("b", frozenset({"right", "lower"})),
                ("c", frozenset({"left"})), ("c", frozenset({"right"}))]  # c uses both sides: abstains
    assert disputed_positions(wordings, {"a": 0.8, "b": 0.2, "c": 5.0}, 0.7, axes=VOCAB.position_axes) == {"right": (0.2, 1.0)}
    assert disputed_positions(wordings, {"a": 0.5, "b": 0.5}, 0.7, axes=VOCAB.position_axes) == {"left": (0.5, 1.0), "right": (0.5, 1.0)}
    # "lower" is stated by both a and b: agreed; weights of zero count the witnesses equally
    assert disputed_positions(wordings, {}, 0.7, axes=VOCAB.position_axes) == {"left": (1.0, 2.0), "right": (1.0, 2.0)}
    assert disputed_positions([], {}, 0.7, axes=VOCAB.position_axes) == {}
    with pytest.raises(ValueError, match="share"):
        disputed_positions(wordings, {}, 1.0, axes=VOCAB.position_axes)
