"""`levels` given as one string is one level, never its letters (issue 34, item 11)."""

from __future__ import annotations

import pytest
from pipeline_fakes import FakeStack, photo, photo_kb

from kira import Kira
from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.chunker import levels_arg


def test_levels_arg_takes_one_name_or_a_list_and_names_what_is_unknown():
    assert levels_arg("region") == ("region",)
    assert levels_arg(["document", "patch"]) == ("document", "patch")
    with pytest.raises(ValueError, match=r"unknown levels \['document,region'\].*levels is a list of names"):
        levels_arg("document,region")
    with pytest.raises(TypeError, match="levels must be a list of level names"):
        levels_arg(3)


def test_create_and_ask_take_a_single_level_name(tmp_path):
    with KnowledgeBase.create(tmp_path / "one", models=FakeStack(), levels="region") as kb:
        assert kb.levels == ("document", "region")
        kb.add_image(photo(0), doc_id="a")
    with KnowledgeBase.open(photo_kb(tmp_path), models=FakeStack(), read_only=True) as kb:
        hits = Kira(kb).retrieve("a photo of a cat", top_k=5, levels="document").hits
        assert hits and {h.level for h in hits} == {"document"}
        result = Kira(kb).ask("a photo of a cat", levels="document", variant="dual_path", top_k=3)
        assert {item.level for item in result.evidence.items} == {"document"}
