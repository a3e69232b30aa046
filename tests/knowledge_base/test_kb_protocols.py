"""The knowledge base seam: both backends satisfy it, and it lists everything the pipeline, reasoning and server use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.protocols import PROTOCOL_NAMES, KnowledgeBaseLike
from kira.knowledge_base.storage import Storage, StoredRows

PACKAGES = ("pipeline", "query_state", "retrieval", "multihop", "grounding", "reasoning", "serve")
ROOT = Path(__file__).resolve().parents[2] / "python" / "kira"


def _used(pattern: str) -> set[str]:
    names: set[str] = set()
    for package in PACKAGES:
        for file in (ROOT / package).glob("*.py"):
            names |= set(re.findall(pattern, file.read_text(encoding="utf-8")))
    return names


def test_the_protocol_lists_every_knowledge_base_attribute_the_pipeline_reasoning_and_server_use():
    used = _used(r"\bkb\.([A-Za-z_]+)")
    assert used, "the pattern found no kb.<name> at all: the packages moved"
    assert used <= PROTOCOL_NAMES, sorted(used - PROTOCOL_NAMES)


def test_no_stage_reads_past_the_seam_into_the_store():
    assert "store" not in _used(r"\bkb\.([A-Za-z_]+)")
    for package in PACKAGES:
        for file in (ROOT / package).glob("*.py"):
            text = file.read_text(encoding="utf-8")
            assert not re.search(r"getattr\(\s*\w*kb\w*\s*,\s*[\"']store", text), file


def test_the_embedded_knowledge_base_satisfies_the_protocol_unchanged(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(flat((1, 0, 0)), doc_id="red", caption="red card")
        assert isinstance(kb, KnowledgeBaseLike) and isinstance(kb.storage, Storage)
        assert isinstance(kb.storage.rows, StoredRows)


def test_the_milvus_knowledge_base_satisfies_the_protocol(tmp_path):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from milvus_fixtures import release_lite

    kb = KnowledgeBase.create(tmp_path / "kb", models=FakeStack(), backend="milvus")
    try:
        assert isinstance(kb, KnowledgeBaseLike) and isinstance(kb.storage, Storage)
        assert isinstance(kb.storage.rows, StoredRows)
        assert not isinstance(object(), KnowledgeBaseLike)
    finally:
        kb.close()
        release_lite(tmp_path / "kb" / "milvus.db")
