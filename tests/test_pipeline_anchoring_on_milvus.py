"""tests/test_pipeline_anchoring.py's tests that read its knowledge base, unchanged, on a Milvus Lite knowledge base
(its own fixture, run by `milvus_fixtures.rebuilt_on_milvus`; see tests/test_pipeline_on_milvus.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from milvus_fixtures import rebuilt_on_milvus  # noqa: E402


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """test_pipeline_anchoring's knowledge base, built in Milvus."""
    yield from rebuilt_on_milvus(source.kb, tmp_path_factory)


def test_these_tests_run_on_a_milvus_knowledge_base(kb):
    assert kb.backend == "milvus"


import test_pipeline_anchoring as source  # noqa: E402
from test_pipeline_anchoring import (  # noqa: E402, F401
    test_generic_question_keeps_the_image_top_document,
    test_question_rankings_stay_inside_the_image_neighbourhood,
    test_an_identifier_in_the_question_leads_the_ranking,
    test_named_evidence_survives_a_critic_that_rejects_everything,
    test_feedback_serves_text_queries_only,
    test_feedback_ranking_searches_with_the_mean_of_the_top_documents,
    test_feedback_from_named_documents_weighs_more,
    test_anchor_to_image_filters_and_scales,
    test_lead_with_identifiers_moves_named_chunks_first_and_adds_missing_ones,
    test_feedback_seeds_from_strong_bm25_matches_not_the_flat_fused_list,
    test_text_rankings_keep_at_most_two_chunks_per_document,
    test_document_groups_label_every_chunk_with_its_document_chunk,
    test_bridge_mapped_question_ranks_at_the_bridge_scale,
)
