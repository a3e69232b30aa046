"""The existing pipeline tests, unchanged, on a Milvus-backed knowledge base (Milvus Lite).

test_pipeline_ask's tests that read its ``kb`` fixture are imported as they are; this module's
``kb`` runs that fixture with `KnowledgeBase.create` defaulting to ``backend="milvus"``
(`milvus_fixtures.rebuilt_on_milvus`), so it builds the same knowledge base in Milvus and each
test asks what it asks of the embedded one. The variants that hop run
`kira.backends.hops` over the Milvus index (`kira.backends.hops.hops_for`).
"""

from __future__ import annotations

import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from milvus_fixtures import rebuilt_on_milvus  # noqa: E402


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """test_pipeline_ask's knowledge base, built in Milvus."""
    yield from rebuilt_on_milvus(ask_tests.kb, tmp_path_factory)


def test_these_tests_run_on_a_milvus_knowledge_base(kb):
    assert kb.backend == "milvus" and kb.uri.endswith("milvus.db")


import test_pipeline_ask as ask_tests  # noqa: E402
from test_pipeline_ask import (  # noqa: E402, F401
    test_bad_input,
    test_card_renders_text_json_html,
    test_compound_expansion_adds_group_members_with_decayed_scores,
    test_compound_groups_pull_in_the_rest_of_the_sequence,
    test_critic_drops_are_reported,
    test_custom_generator_is_used,
    test_evidence_carries_provenance_box_and_thumbnail,
    test_every_variant_answers_with_citations_inside_the_pack,
    test_fine_grained_ranking_weighs_visual_weight_times_its_scale,
    test_granularity_selection_restricts_levels,
    test_image_query_finds_the_same_image_and_runs_fine_grained,
    test_profile_concepts_feed_expansion_and_the_empty_profile_adds_none,
    test_reranker_blends_scores,
    test_text_and_image_together,
)
