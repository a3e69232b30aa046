"""tests/test_pipeline_subject.py's tests that read its knowledge base, unchanged, on a Milvus Lite knowledge base
(its own fixture, run by `milvus_fixtures.rebuilt_on_milvus`; see tests/test_pipeline_on_milvus.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from milvus_fixtures import rebuilt_on_milvus  # noqa: E402


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """test_pipeline_subject's knowledge base, built in Milvus."""
    yield from rebuilt_on_milvus(source.kb, tmp_path_factory)


def test_these_tests_run_on_a_milvus_knowledge_base(kb):
    assert kb.backend == "milvus"


import test_pipeline_subject as source  # noqa: E402
from test_pipeline_subject import (  # noqa: E402, F401
    test_a_claim_about_the_named_subject_never_rests_on_another_subjects_evidence,
    test_a_question_naming_no_subject_is_answered_from_all_the_evidence,
)
