"""kira.pipeline.view_reading: a view whose record is only bookkeeping, read from its image, and
through ask() the answer that says the views agree."""

from __future__ import annotations

import dataclasses

import pytest
from pipeline_fakes import FakeStack, document_items, opacity

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira
from kira.pipeline.view_reading import members_by_group, read_unstated, read_view, read_views
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


def test_read_views_replaces_the_silent_item_in_place_and_leaves_a_disagreeing_one_silent(clinic):
    items = document_items(clinic, "P001-lat", "P001-pa", "R0")
    out, notes = read_views(clinic, _question("P001"), items, clinic.config)
    assert [i.doc_id for i in out] == ["P001-lat", "P001-pa", "R0"] and len(notes) == 1
    assert READ_PATH in out[1].paths and out[1].provenance["read"]["statements"] == ["Red opacity in the lower zone"]
    assert "P001-lat" not in out[1].provenance["read"]["neighbours"]  # its own subject does not vote, however alike
    assert text_of(out[1]).endswith("Reported by Dr. Osei. Red opacity in the lower zone.")
    assert out[0] == items[0] and out[2] == items[2]
    items = document_items(clinic, "P002-lat", "P002-pa")
    assert read_views(clinic, _question("P002"), items, clinic.config) == (items, [])
    assert read_views(clinic, "What do the views together show?", document_items(clinic, "R0", "C0"), clinic.config)[1] == []  # no view set


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


RED = "Red opacity in the left lower zone"


@pytest.fixture(scope="module")
def ward(tmp_path_factory):
    """Reported chest films with the red finding conclude left lobar pneumonia; hand films that look
    the same conclude a bone bruise. P001's two views state the finding and no conclusion; P002's lateral
    view concludes right lobar pneumonia; P003's views place the finding on the right."""
    base = KnowledgeBase.create(tmp_path_factory.mktemp("ward") / "kb", models=FakeStack())
    for n in range(5):
        base.add_image(opacity(19 + n), doc_id=f"R{n}", tags=("chest",),
                       caption=f"Patient P10{n}. Findings: {RED}. Impression: Left lobar pneumonia.")
        base.add_image(opacity(22), doc_id=f"K{n}", tags=("hand",),
                       caption=f"Patient P30{n}. Findings: {RED}. Impression: Bone bruise.")
        base.add_image(opacity(0), doc_id=f"C{n}", tags=("chest",),
                       caption=f"Patient P20{n}. Findings: Clear fields. Impression: Normal study.")
    for pid, lateral, frontal in (
        ("P001", f"{RED}.", f"{RED}."),
        ("P002", f"{RED}. Impression: Right lobar pneumonia.", f"{RED}."),
        ("P003", "Red opacity in the right lower zone.", "Red opacity in the right lower zone."),
    ):
        base.add_image(opacity(21), doc_id=f"{pid}-lat", tags=("chest",), view=(pid, 0),
                       caption=f"Lateral film, patient {pid}. Findings: {lateral}")
        base.add_image(opacity(21), doc_id=f"{pid}-pa", tags=("chest",), view=(pid, 1),
                       caption=f"PA film, patient {pid}. Findings: {frontal}")
    base.commit()
    yield base
    base.close()


def _subject(pid):
    return {f"{pid}-lat", f"{pid}-pa"}


def test_a_view_whose_subject_concludes_nothing_reads_what_reports_of_images_of_its_kind_conclude(ward):
    own = [(RED, statement_shape(RED))]
    reading = read_unstated(ward, "P001-pa", own, [statement_shape(RED)], _subject("P001"), ward.config)
    assert reading is not None and reading.statements == ("Left lobar pneumonia",) and not reading.silent
    assert len(reading.neighbours) == 5 and not any(d.startswith("K") for d in reading.neighbours)  # hand films:
    assert reading.votes[0] >= 4 and "leaves unstated" in reading.note  # another kind, however alike
    # a subject that states more than the view (an impression elsewhere) is not read for this view
    more = [statement_shape(RED), statement_shape("Right lobar pneumonia")]
    assert read_unstated(ward, "P001-pa", own, more, _subject("P001"), ward.config) is None
    assert read_unstated(ward, "P001-pa", [], [], _subject("P001"), ward.config) is None


def test_read_views_reads_a_conclusion_only_where_the_subject_states_none(ward):
    out, notes = read_views(ward, _question("P001"), document_items(ward, "P001-lat", "P001-pa"), ward.config)
    assert [_read(i) for i in out] == [["Left lobar pneumonia"]] * 2 and len(notes) == 2
    assert all(READ_PATH in i.paths for i in out)
    assert text_of(out[1]).endswith(f"{RED}. Left lobar pneumonia.")
    # P002's lateral view concludes right lobar pneumonia: the neighbours' left is a rival reading, not read
    items = document_items(ward, "P002-lat", "P002-pa")
    assert read_views(ward, _question("P002"), items, ward.config) == (items, [])
    # P003's views place the finding on the right: the neighbours' side is not read into them
    out, _ = read_views(ward, _question("P003"), document_items(ward, "P003-lat", "P003-pa"), ward.config)
    assert [_read(i) for i in out] == [["lobar pneumonia"]] * 2


def test_read_views_reads_only_the_views_of_the_subject_the_question_names(ward):
    items = document_items(ward, "P001-lat", "P001-pa", "P003-lat", "P003-pa")
    out, notes = read_views(ward, _question("P003"), items, ward.config)
    assert [_read(i) for i in out] == [None, None, ["lobar pneumonia"], ["lobar pneumonia"]]
    assert len(notes) == 2 and all(note.startswith("P003") for note in notes)
    out, notes = read_views(ward, "What do the two views together show?", items, ward.config)  # no subject named
    assert len(notes) == 4 and all(READ_PATH in i.paths for i in out)


def test_members_by_group_lists_each_compound_document_and_view_set(ward):
    groups = members_by_group(ward)
    views = ward.view_set_of()["P001-pa"]
    assert groups[("views", views)] == {"P001-lat", "P001-pa"}
    assert groups[("compound", ward.compound_of()["P001-pa"])] == {"P001-lat", "P001-pa"}
    assert not any("R0" in docs for docs in groups.values())  # in no group


def _read(item):
    return item.provenance.get("read", {}).get("statements")


def test_ask_concludes_what_the_views_show_with_the_reading_cited_to_the_views(ward):
    result = Kira(ward).ask(_question("P001"), variant="multi_hop")
    texts = [c.text for c in result.answer.claims]
    assert texts[0].startswith(f"Both PA and lateral films show {RED.lower()} [")
    assert len(texts) == 2 and texts[1].startswith("Left lobar pneumonia [")
    read = {i.number for i in result.evidence.items if READ_PATH in i.paths}
    assert read and set(result.answer.claims[1].citations) <= read
    assert any("leaves unstated" in note for note in result.trace["views_read"])
    rival = Kira(ward).ask(_question("P002"), variant="multi_hop")
    assert "left lobar" not in rival.answer.text.lower()
    assert not [i for i in rival.evidence.items if i.doc_id.startswith("P002") and READ_PATH in i.paths]
