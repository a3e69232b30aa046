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
    assert (c.adaptation.projection_out, c.adaptation.triplet_margin) == (256, 0.3)


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
    loaded = KiraConfig.from_dict({"retrieval": {"text_overfetch": 4, "candidates": 30},
                                   "chunking": {"dino_patch_size": 8}, "grounding": {"max_evidence": 5},
                                   "adaptation": {"projection_in": 768}})
    assert loaded.retrieval.candidates == 30 and not hasattr(loaded.retrieval, "text_overfetch")
    assert loaded == KiraConfig().replace(retrieval=loaded.retrieval)


@pytest.mark.parametrize("data, error, where", [
    ({"hops": {"beta": "0.3"}}, TypeError, "hops.beta"),
    ({"hops": {"max_hops": -5}}, ValueError, "hops.max_hops"),
    ({"chunking": {"region_connectivity": 5}}, ValueError, "chunking.region_connectivity"),
    ({"retrieval": {"visual_weight": 1.5}}, ValueError, "retrieval.visual_weight"),
    ({"grounding": {"pieces_at_ingest": 1}}, TypeError, "grounding.pieces_at_ingest"),
    ({"retrieval": {"critic_candidates_per_result": 2.0}}, TypeError, "retrieval.critic_candidates_per_result"),
    ({"grounding": {"critic_threshold": float("nan")}}, ValueError, "grounding.critic_threshold"),
    ({"adaptation": {"epochs": True}}, TypeError, "adaptation.epochs"),
    ({"seed": -1}, ValueError, "seed"),
    ({"hops": [0.3]}, TypeError, "hops"),
])
def test_from_dict_refuses_bad_values_naming_the_field(data, error, where):
    from kira.config import ConfigError

    with pytest.raises(error, match=rf"^{where}\b") as info:
        KiraConfig.from_dict(data)
    assert isinstance(info.value, ConfigError)  # one class to catch, a ValueError


def test_construction_checks_too_and_ints_become_floats():
    with pytest.raises(ValueError, match="hops.beta must be in \\[0, 1\\]; got -0.1"):
        HopConfig(beta=-0.1)
    with pytest.raises(TypeError, match="hops must be a HopConfig"):
        KiraConfig(hops={"beta": 0.3})
    c = KiraConfig.from_dict({"hops": {"beta": 1, "max_hops": 2}})
    assert c.hops.beta == 1.0 and isinstance(c.hops.beta, float) and c.hops.max_hops == 2
    assert KiraConfig.from_json(c.to_json()) == c


def test_every_declared_range_holds_its_default_and_refuses_beyond_it():
    """Generic over the fields: a value just past each declared bound or outside the choices is refused."""
    import dataclasses

    from kira.config import _SECTION_TYPES, ConfigError

    checked = 0
    for section, cls in _SECTION_TYPES.items():
        cls()  # every default is in range
        for f in dataclasses.fields(cls):
            rng = f.metadata.get("range")
            if rng is None:
                continue
            outside = []
            step = 1 if isinstance(f.default, int) and not isinstance(f.default, bool) else 0.01
            if rng.lo is not None:
                outside.append(type(f.default)(rng.lo - step))
            if rng.hi is not None:
                outside.append(type(f.default)(rng.hi + step))
            if rng.choices is not None:
                outside.append(max(rng.choices) + 1)
            for bad in outside:
                with pytest.raises(ConfigError, match=rf"^{section}\.{f.name} must"):
                    cls(**{f.name: bad})
                checked += 1
    assert checked > 50
