"""kira.pipeline.view_reading: a view whose record is only bookkeeping, read from its image, and
through ask() the answer that says the views agree."""

from __future__ import annotations

import dataclasses

import pytest
from pipeline_fakes import FakeStack, document_items, opacity

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira
from kira.pipeline.view_reading import read_silent_views, read_view
from kira.reasoning.template_generator import READ_PATH, statement_shape, text_of

FINDING = "Red opacity in the lower zone, ratio about 0.65"
CLEAR = "Clear fields"


@pytest.fixture(scope="module")
def clinic(tmp_path_factory):
    """Reported patients with the red finding or clear fields; P001's PA film (red) and P002's PA
    film (clear) are reported only by name, their lateral films state the finding."""
    base = KnowledgeBase.create(tmp_path_factory.mktemp("views") / "kb", models=FakeStack())
    for n in range(4):
        base.add_image(opacity(20 + n), doc_id=f"R{n}", caption=f"Patient P10{n}. Findings: {FINDING}.")
        base.add_image(opacity(0), doc_id=f"C{n}", caption=f"Patient P20{n}. Findings: {CLEAR}.")
    for pid, pa_rows in (("P001", 22), ("P002", 0)):
        base.add_image(opacity(22), doc_id=f"{pid}-lat", caption=f"Lateral film, patient {pid}. Findings: {FINDING}.",
                       view=(pid, 0))
        base.add_image(opacity(pa_rows), doc_id=f"{pid}-pa", caption=f"PA film, patient {pid}. Reported by Dr. Osei.",
                       view=(pid, 1))
    base.commit()
    yield base
    base.close()


def _question(pid: str) -> str:
    return f"Patient {pid} had PA and lateral films: what do the two views together show?"


def test_a_silent_view_whose_neighbours_state_its_sets_finding_is_read_without_the_value(clinic):
    stated = [(FINDING, statement_shape(FINDING))]
    reading = read_view(clinic, "P001-pa", stated, {"P001-lat", "P001-pa"}, clinic.config)
    assert reading is not None and reading.statements == ("Red opacity in the lower zone",)  # the value is not its own
    assert reading.votes[0] >= clinic.config.hops.view_min_votes
    assert set(reading.neighbours) <= {f"R{n}" for n in range(4)} | {"P002-lat"}  # reported documents only
    assert len(reading.neighbours) == clinic.config.hops.view_neighbours
    assert read_view(clinic, "P002-pa", stated, {"P002-lat", "P002-pa"}, clinic.config) is None  # clear: no majority


def test_read_silent_views_replaces_the_silent_item_in_place_and_leaves_a_disagreeing_one_silent(clinic):
    items = document_items(clinic, "P001-lat", "P001-pa", "R0")
    out, notes = read_silent_views(clinic, items, clinic.config)
    assert [i.doc_id for i in out] == ["P001-lat", "P001-pa", "R0"] and len(notes) == 1
    assert READ_PATH in out[1].paths and out[1].provenance["read"]["statements"] == ["Red opacity in the lower zone"]
    assert text_of(out[1]).endswith("Reported by Dr. Osei. Red opacity in the lower zone.")
    assert out[0] == items[0] and out[2] == items[2]
    items = document_items(clinic, "P002-lat", "P002-pa")
    assert read_silent_views(clinic, items, clinic.config) == (items, [])
    assert read_silent_views(clinic, document_items(clinic, "R0", "C0"), clinic.config)[1] == []  # no view set


def test_ask_says_both_views_show_the_finding_only_where_the_silent_view_was_read(clinic):
    result = Kira(clinic).ask(_question("P001"), variant="multi_hop")
    first = result.answer.claims[0].text
    assert first.startswith("Both PA and lateral films show red opacity in the lower zone [")  # not the lateral's value
    read = [i for i in result.evidence.items if READ_PATH in i.paths]
    assert [i.doc_id for i in read] == ["P001-pa"] and read[0].number in result.answer.claims[0].citations
    assert "P001-pa states only bookkeeping" in result.trace["views_read"][0]
    assert any("what kira read in its image" in step for step in result.answer.reasoning)
    silent = Kira(clinic).ask(_question("P002"), variant="multi_hop")
    assert not silent.answer.text.startswith("Both") and "views_read" not in silent.trace
    off = dataclasses.replace(clinic.config, hops=dataclasses.replace(clinic.config.hops, read_silent_views=False))
    assert not Kira(clinic, config=off).ask(_question("P001"), variant="multi_hop").answer.text.startswith("Both")
    assert "views_read" not in Kira(clinic).ask("What does patient P001 show?", variant="multi_hop").trace
