from __future__ import annotations

import pytest

from kira import KiraConfig
from kira.config import HopConfig


def test_paper_constants():
    c = KiraConfig()
    assert c.retrieval.visual_weight == 0.6 and c.retrieval.rrf_k == 60
    assert (c.retrieval.rerank_original_weight, c.retrieval.rerank_cross_weight) == (0.4, 0.6)
    assert (c.hops.beta, c.hops.max_hops, c.hops.confidence) == (0.3, 3, 0.85)
    assert (c.hops.temporal_decay, c.hops.multiview_decay) == (0.8, 0.7)
    assert c.chunking.region_k_sigma == 0.5
    assert c.grounding.critic_threshold == 0.1 and c.grounding.hallucination_threshold == 0.3
    assert (c.adaptation.projection_in, c.adaptation.projection_out, c.adaptation.triplet_margin) == (768, 256, 0.3)


def test_json_round_trip_and_replace():
    c = KiraConfig().replace(hops=HopConfig(beta=0.5), seed=7)
    back = KiraConfig.from_json(c.to_json())
    assert back == c and back.hops.beta == 0.5 and back.seed == 7


def test_unknown_keys_are_named():
    with pytest.raises(ValueError, match="bogus"):
        KiraConfig.from_dict({"bogus": {}})
    with pytest.raises(ValueError, match="betta"):
        KiraConfig.from_dict({"hops": {"betta": 1}})


def test_retired_fields_of_older_knowledge_bases_are_ignored():
    from kira.config import RETIRED_FIELDS

    assert ("retrieval", "text_overfetch") in RETIRED_FIELDS
    loaded = KiraConfig.from_dict({"retrieval": {"text_overfetch": 4, "candidates": 30}})
    assert loaded.retrieval.candidates == 30 and not hasattr(loaded.retrieval, "text_overfetch")
