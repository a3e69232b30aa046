"""ReAG's critic: calibrated P(relevant), the 0.1 filter, and never dropping everything silently."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kira.config import GroundingConfig
from kira.eval.calibration_data import critic_pairs
from kira.reasoning.critic import LMCritic, SimilarityCritic, filter_by_probability
from kira.reasoning.types import EvidenceItem


def _item(n: int, summary: str) -> EvidenceItem:
    return EvidenceItem(n, 100 + n, f"doc{n}", "document", 1.0, ("visual",), summary)


def test_calibration_keeps_relevant_evidence_and_drops_other_domains(minilm) -> None:
    critic = SimilarityCritic(minilm)
    by_kind: dict[str, list[float]] = {}
    pairs = critic_pairs()
    for question in dict.fromkeys(p.question for p in pairs):
        rows = [p for p in pairs if p.question == question]
        probs = critic.probabilities(question, [_item(i + 1, p.summary) for i, p in enumerate(rows)])
        for p, prob in zip(rows, probs):
            by_kind.setdefault(p.kind, []).append(prob)
    relevant, same, other = (np.array(by_kind[k]) for k in ("relevant", "same_domain", "other_domain"))
    threshold = GroundingConfig().critic_threshold
    assert (relevant > threshold).all()  # the critic never removes what the question asks about
    assert np.median(relevant) > 0.5
    assert (other <= threshold).mean() >= 0.9  # and removes most evidence from unrelated domains
    assert np.median(same) > np.median(other)


def test_filter_drops_the_irrelevant_item(minilm) -> None:
    items = [
        _item(1, "Chest X-ray, PA view: consolidation in the right lower lobe consistent with pneumonia"),
        _item(2, "Circuit schematic: 555 timer astable oscillator producing a square wave"),
    ]
    decision = SimilarityCritic(minilm).filter("Find chest X-rays showing pneumonia", items)
    assert [i.number for i in decision.kept] == [1] and [i.number for i in decision.dropped] == [2]
    assert decision.threshold == 0.1 and not decision.fallback
    assert set(decision.probabilities) == {101, 102}


def test_all_below_threshold_keeps_the_retrievals_first_and_says_so(caplog) -> None:
    """With nothing judged relevant, the least irrelevant-looking item is no better a guess than the
    retrieval's own first: that one is kept."""
    items = [_item(1, "a"), _item(2, "b"), _item(3, "c")]
    decision = filter_by_probability(items, [0.02, 0.08, 0.05], 0.1)
    assert [i.number for i in decision.kept] == [1] and [i.number for i in decision.dropped] == [2, 3]
    assert decision.fallback and "no evidence scored" in decision.note
    assert "critic" in caplog.text
    empty = filter_by_probability([], [], 0.1)
    assert empty.kept == () and not empty.fallback


def test_filter_validates_probabilities() -> None:
    with pytest.raises(ValueError, match="probabilities"):
        filter_by_probability([_item(1, "a")], [1.5], 0.1)
    with pytest.raises(ValueError, match="1 items"):
        filter_by_probability([_item(1, "a")], [0.5, 0.5], 0.1)


def test_image_only_query_skips_the_critic(minilm) -> None:
    items = [_item(1, "anything"), _item(2, "else")]
    decision = SimilarityCritic(minilm).filter("", items)
    assert decision.kept == tuple(items) and decision.dropped == () and "skipped" in decision.note


def test_threshold_from_config_and_override(minilm) -> None:
    items = [_item(1, "Satellite image: open water body, a lake with a smooth dark surface")]
    critic = SimilarityCritic(minilm, GroundingConfig(critic_threshold=0.999))
    assert critic.filter("Show satellite images of water", items).fallback
    assert not critic.filter("Show satellite images of water", items, threshold=0.1).fallback


def test_probability_from_scores_is_the_documented_logistic() -> None:
    critic = SimilarityCritic(encoder := object())  # type: ignore[arg-type]
    assert critic.encoder is encoder
    config = GroundingConfig()
    mid, slope = config.critic_midpoint, config.critic_slope
    assert critic.probability_from_scores(mid, 0.0) == pytest.approx(0.5)
    assert critic.probability_from_scores(0.6, 0.5) == pytest.approx(1 / (1 + math.exp(-(slope * (0.6 - mid) + 1.0))))


class _YesNoLM:
    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.prompts: list[str] = []

    def complete(self, prompt: str, *, max_new_tokens: int = 128) -> str:
        self.prompts.append(prompt)
        return next((a for key, a in self.answers.items() if key in prompt), "maybe")


class _LogprobLM(_YesNoLM):
    def yes_no_logprobs(self, prompt: str) -> tuple[float, float]:
        return (math.log(0.7), math.log(0.1)) if "lake" in prompt else (math.log(0.01), math.log(0.99))


def test_lm_critic_reads_yes_no_answers() -> None:
    lm = _YesNoLM({"lake": " Yes, it is.", "desert": "No"})
    items = [_item(1, "a lake"), _item(2, "a desert"), _item(3, "a forest")]
    decision = LMCritic(lm).filter("water?", items)
    assert decision.probabilities == {101: 0.9, 102: 0.05, 103: 0.5}
    assert [i.number for i in decision.kept] == [1, 3]
    assert "Question: water?" in lm.prompts[0] and "Passage: a lake" in lm.prompts[0]


def test_lm_critic_uses_logprobs_when_available() -> None:
    critic = LMCritic(_LogprobLM({}))
    probs = critic.probabilities("water?", [_item(1, "a lake"), _item(2, "a desert")])
    assert probs[0] == pytest.approx(0.7 / 0.8) and probs[1] == pytest.approx(0.01)
    with pytest.raises(ValueError, match="passage"):
        LMCritic(_YesNoLM({}), prompt="no placeholders")


def test_known_item_vectors_give_the_same_probabilities_without_encoding_the_items(minilm) -> None:
    items = [_item(1, "an orange tabby cat looking up"), _item(2, "a rocket on the launch pad"),
             _item(3, "a cup of coffee on a saucer")]
    question = "a picture of a kitten"
    plain = SimilarityCritic(minilm).probabilities(question, items)

    class Counting:
        config = minilm.config
        dim = minilm.dim
        texts: list[str] = []

        def encode(self, texts):
            Counting.texts += list(texts)
            return minilm.encode(texts)

    critic = SimilarityCritic(Counting())
    known = np.asarray(minilm.encode([i.summary for i in items]), np.float32)
    known[2] = 0.0  # unknown: encoded by the critic
    got = critic.probabilities(question, items, item_vectors=known)
    np.testing.assert_allclose(got, plain, atol=1e-5)
    assert Counting.texts == [question, items[2].summary]
    with pytest.raises(ValueError, match="item_vectors has shape"):
        critic.probabilities(question, items, item_vectors=known[:2])


def test_shown_text_reads_content_fields_not_appearance() -> None:
    from kira.reasoning.critic import UNJUDGED, shown_certainty, shown_text

    looks = "labels: espresso; A medium-brightness colour image dominated by orange (54%); 1 salient region."
    labelled = EvidenceItem(1, 1, "IMG_1", "document", 1.0, ("text",), looks,
                            provenance={"described_by": "captioner", "labels": [{"label": "espresso", "p": 0.8}]})
    assert shown_text(labelled) == "espresso" and shown_certainty(labelled) == pytest.approx(0.8)
    bare = EvidenceItem(2, 2, "IMG_2", "region", 1.0, ("visual",), "A dark greyscale image.",
                        provenance={"described_by": "captioner"})
    assert shown_text(bare) == "" and shown_certainty(bare) == 0.0
    captioned = EvidenceItem(3, 3, "d", "document", 1.0, ("text",), "x",
                             provenance={"described_by": "user caption/tags", "caption": "a cup", "tags": ["mug"],
                                         "text_read": [{"text": "CAFE"}]})
    assert shown_text(captioned) == "a cup. mug. CAFE" and shown_certainty(captioned) == 1.0
    assert shown_text(_item(4, "hand-built summary")) == "hand-built summary"

    class Fixed:
        dim = 2

        def encode(self, texts):
            return np.tile(np.array([[1.0, 0.0]], np.float32), (len(texts), 1))

    p = SimilarityCritic(Fixed()).probabilities("a cup of coffee", [bare, labelled])
    assert p[0] == UNJUDGED and UNJUDGED < p[1]  # unreadable: neither kept for a reason nor dropped
