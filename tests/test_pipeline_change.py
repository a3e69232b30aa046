"""Change by analogy (kira.pipeline.change): recorded changes, the step test, the analogue, and ask()."""

from __future__ import annotations

import dataclasses

import pytest
from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira
from kira.pipeline.change import change_by_analogy, change_statement, recorded_changes
from kira.pipeline.evidence import build_items

BLUE, YELLOW, GREEN, RED, GREY = (0.1, 0.2, 0.9), (0.9, 0.85, 0.2), (0.1, 0.8, 0.2), (0.9, 0.1, 0.1), (0.5, 0.5, 0.5)
HEAD = "Change since the previous acquisition"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    base = KnowledgeBase.create(tmp_path_factory.mktemp("change") / "kb", models=FakeStack())
    tiles = [
        ("T001", BLUE, YELLOW, f"Lake tile T001. {HEAD}: the lake dried out, exposing sand."),  # recorded
        ("T002", BLUE, YELLOW, "Lake tile T002, later acquisition."),  # the same change, not stated
        ("T003", GREEN, GREEN, "Forest tile T003, later acquisition."),  # no change
        ("T004", GREEN, RED, f"Forest tile T004. {HEAD}: the forest was cleared for fields."),  # recorded, other way
        ("T005", GREY, BLUE, "Schematic T005 rev B. R1 changed from 10k to 22k."),  # one instance's history: a value
        ("T006", BLUE, YELLOW, f"Lake tile T006. {HEAD}: the lake dried out, exposing sand."),  # states its own change
    ]
    for tile, before, after, caption in tiles:
        base.add_image(flat(before), doc_id=f"{tile}-d0", caption=f"Tile {tile}, first acquisition.",
                       sequence=(tile, 0))
        base.add_image(flat(after), doc_id=f"{tile}-d1", caption=caption, sequence=(tile, 1))
    base.commit()
    yield base
    base.close()


def _items(kb, *doc_ids):
    chunks = kb.store.document_chunk_ids(doc_ids)
    return build_items(kb, [chunks[d] for d in doc_ids], [1.0] * len(doc_ids), {}, {}, thumbnails=False)


def test_change_statements_are_class_level_sentences_that_state_a_change():
    # the head says it is a change; the same words alone do not
    lake = "the lake dried out, exposing sand"
    assert change_statement(f"Lake tile T001. {HEAD}: {lake}.") == lake
    assert change_statement("Lake tile T001. The lake dried out, exposing sand.") is None
    built = "new blocks were built on the edge"
    assert change_statement(f"Tile T009. {HEAD}: {built}.") == built
    assert change_statement("R1 changed from 10k to 22k, which raises the gain.") is None  # a value: one instance
    assert change_statement("Dense residential blocks.") is None


def test_recorded_changes_are_the_pairs_whose_later_document_states_one(kb):
    stated = sorted(c.statement for c in recorded_changes(kb))
    assert stated == ["the forest was cleared for fields", "the lake dried out, exposing sand",
                      "the lake dried out, exposing sand"]
    assert recorded_changes(kb) is recorded_changes(kb)  # built once per commit


def test_a_sequence_that_changed_like_a_recorded_one_gets_its_statement(kb):
    analogy = change_by_analogy(kb, "Compare tile T002 with its later acquisition: what changed?",
                                _items(kb, "T002-d0", "T002-d1", "T003-d0"), kb.config)
    assert analogy is not None and (analogy.earliest, analogy.latest) == ("T002-d0", "T002-d1")
    assert analogy.change.statement == "the lake dried out, exposing sand" and analogy.cosine > 0.9
    assert "T002-d0 -> T002-d1" in analogy.note


def test_no_analogy_without_a_change_a_comparison_or_a_silent_sequence(kb):
    ask = "Compare tile {} with its later acquisition: what changed?"
    assert change_by_analogy(kb, ask.format("T003"), _items(kb, "T003-d0", "T003-d1"), kb.config) is None  # no step
    assert change_by_analogy(kb, ask.format("T006"), _items(kb, "T006-d0", "T006-d1"), kb.config) is None  # says it
    assert change_by_analogy(kb, "What does tile T002 show?", _items(kb, "T002-d0", "T002-d1"), kb.config) is None
    assert change_by_analogy(kb, ask.format("T002"), _items(kb, "T002-d1"), kb.config) is None  # one member
    strict = dataclasses.replace(kb.config, hops=dataclasses.replace(kb.config.hops, change_min_share=5.0))
    assert change_by_analogy(kb, ask.format("T002"), _items(kb, "T002-d0", "T002-d1"), strict) is None


def test_ask_lends_the_change_from_multi_hop_on_and_says_it_is_by_analogy(kb):
    question = "Compare tile T002 with its later acquisition: what changed?"
    result = Kira(kb).ask(question, variant="multi_hop")
    lent = [i for i in result.evidence.items if "analogy" in i.paths]
    assert len(lent) == 1 and lent[0].doc_id in ("T001-d1", "T006-d1")
    assert result.answer.text.startswith(f"By analogy: the lake dried out, exposing sand [Evidence {lent[0].number}]")
    assert "forest" not in result.answer.text.lower()  # an analogue lends its change, nothing else
    assert "T002-d0 -> T002-d1" in result.trace["change"]
    import json

    from kira.explain.render_json import validate

    assert validate(json.loads(result.card.to_json())) == []  # the card holds the lent item and stays valid
    assert "lent by analogy" in result.card.to_text() and "analogy" in result.card.to_html()
    assert not any("analogy" in i.paths for i in Kira(kb).ask(question, variant="query_expansion").evidence.items)
    off = dataclasses.replace(kb.config, hops=dataclasses.replace(kb.config.hops, change_by_analogy=False))
    assert "change" not in Kira(kb, config=off).ask(question, variant="multi_hop").trace


def test_memo_builds_once_per_commit(tmp_path):
    base = KnowledgeBase.create(tmp_path / "kb", models=FakeStack())
    try:
        calls = []
        build = lambda: calls.append(1) or len(calls)  # noqa: E731
        assert base.memo("k", build) == 1 and base.memo("k", build) == 1 and len(calls) == 1
        base.add_image(flat(RED), doc_id="a", caption="red")
        base.commit()
        assert base.memo("k", build) == 2  # a commit clears it
    finally:
        base.close()
