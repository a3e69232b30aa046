"""kira.pipeline.change (change by analogy: recorded changes, the step test, the analogue) and
kira.pipeline.measured_change (change along the finding), each through ask()."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pipeline_fakes import FakeStack, document_items, flat, opacity

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira
from kira.pipeline.change import change_by_analogy, change_statement, recorded_changes
from kira.pipeline.measured_change import (change_along_finding, change_wording, document_space,
                                           documented_change_shares, finding_of, statement_documents)
from kira.reasoning.template_generator import statement_shape, states_change

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
                                document_items(kb, "T002-d0", "T002-d1", "T003-d0"), kb.config)
    assert analogy is not None and (analogy.earliest, analogy.latest) == ("T002-d0", "T002-d1")
    assert analogy.change.statement == "the lake dried out, exposing sand" and analogy.cosine > 0.9
    assert "T002-d0 -> T002-d1" in analogy.note


def test_no_analogy_without_a_change_a_comparison_or_a_silent_sequence(kb):
    ask = "Compare tile {} with its later acquisition: what changed?"
    assert change_by_analogy(kb, ask.format("T003"), document_items(kb, "T003-d0", "T003-d1"), kb.config) is None  # no step
    assert change_by_analogy(kb, ask.format("T006"), document_items(kb, "T006-d0", "T006-d1"), kb.config) is None  # says it
    assert change_by_analogy(kb, "What does tile T002 show?", document_items(kb, "T002-d0", "T002-d1"), kb.config) is None
    assert change_by_analogy(kb, ask.format("T002"), document_items(kb, "T002-d1"), kb.config) is None  # one member
    strict = dataclasses.replace(kb.config, hops=dataclasses.replace(kb.config.hops, change_min_share=5.0))
    assert change_by_analogy(kb, ask.format("T002"), document_items(kb, "T002-d0", "T002-d1"), strict) is None


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


# ---- change along the finding -------------------------------------------------------------

FINDING = "red opacity in the lower zone"


@pytest.fixture(scope="module")
def clinic(tmp_path_factory):
    """Patients with a red lower-zone opacity and clear ones; no report records a change."""
    base = _clinic(tmp_path_factory.mktemp("finding") / "kb")
    yield base
    base.close()


def _clinic(path, *, recorded_change: bool = False,
            documented_step: tuple[int, int] | None = (6, 24)) -> KnowledgeBase:
    base = KnowledgeBase.create(path, models=FakeStack())
    if recorded_change:  # one sequence whose later report states a change, over a long step (black to white)
        base.add_image(flat((0, 0, 0)), doc_id="Z-s1", caption="Phantom Z001, study 1.", sequence=("Z", 0))
        base.add_image(flat((1, 1, 1)), doc_id="Z-s2", caption="Phantom Z001, study 2. Change since the previous "
                       "study: the field turned white.", sequence=("Z", 1))
    for n in range(4):
        base.add_image(opacity(12 + 2 * n), doc_id=f"P1{n}", caption=f"Patient P10{n}. Findings: {FINDING}.")
        base.add_image(opacity(0), doc_id=f"P2{n}", caption=f"Patient P20{n}. Findings: clear fields.")
    sequences = {
        "P001": (6, 24, f"Findings: {FINDING}."),  # grows
        "P002": (24, 6, f"Findings: {FINDING}."),  # shrinks
        "P003": (16, 16, f"Findings: {FINDING}."),  # the same
    }
    if documented_step is not None:
        sequences["P004"] = (*documented_step, "R1 changed from 10k to 22k.")  # its own report states a change
    for pid, (before, after, later) in sequences.items():
        base.add_image(opacity(before), doc_id=f"{pid}-s1", caption=f"Patient {pid}, study 1. Findings: {FINDING}.",
                       sequence=(pid, 0))
        base.add_image(opacity(after), doc_id=f"{pid}-s2", caption=f"Patient {pid}, study 2, follow-up. {later}",
                       sequence=(pid, 1))
    base.commit()
    return base


def _compare(pid: str) -> str:
    return f"Compare study 2 of patient {pid} with study 1: how has it changed?"


def test_finding_of_is_the_statement_most_documents_make_with_value_clauses_cut():
    texts = ["PA film, patient P001. Findings: enlarged cardiac silhouette, cardiothoracic ratio about 0.65; lungs clear.",
             "Lateral film, patient P001. Enlarged cardiac silhouette, cardiothoracic ratio about 0.61.",
             "PA film, patient P001, follow-up. Reported by Dr. Osei."]
    wording, shape = finding_of(texts)
    assert wording == "enlarged cardiac silhouette"  # the value clause is cut from the wording ...
    assert "#" in shape  # ... and kept as a placeholder in what other documents are matched on
    assert finding_of(["Patient P001. R1 changed from 10k to 22k.", "Reported by Dr. Osei."]) is None
    assert finding_of(["Tile T001. Shows open water with wave texture."])[0] == "open water with wave texture"


def test_statement_documents_index_every_caption_sentence(clinic):
    index = statement_documents(clinic)
    assert index[statement_shape(FINDING)] >= {"P10", "P11", "P12", "P13", "P001-s1"}
    assert "P20" not in index[statement_shape(FINDING)]


def test_a_growing_finding_is_measured_as_increased_and_a_shrinking_one_as_decreased(clinic):
    grown = change_along_finding(clinic, _compare("P001"), document_items(clinic, "P001-s1", "P001-s2"), clinic.config)
    assert grown is not None and grown.share >= clinic.config.hops.finding_min_share
    assert grown.statement == f"Compared with the baseline, {FINDING} has increased"
    others = statement_documents(clinic)[statement_shape(FINDING)] - {"P001-s1", "P001-s2"}  # P001's own films excluded
    assert "P001-s1 -> P001-s2" in grown.note and f"{len(others)} other documents" in grown.note
    shrunk = change_along_finding(clinic, _compare("P002"), document_items(clinic, "P002-s1", "P002-s2"), clinic.config)
    assert shrunk is not None and shrunk.share <= -clinic.config.hops.finding_min_share
    assert shrunk.statement.endswith("has decreased")


def test_a_finding_that_does_not_move_is_measured_as_unchanged_where_documented_changes_move(clinic):
    assert min(map(abs, documented_change_shares(clinic, clinic.config))) >= clinic.config.hops.finding_stable_share
    same = change_along_finding(clinic, _compare("P003"), document_items(clinic, "P003-s1", "P003-s2"), clinic.config)
    assert same is not None and abs(same.share) < clinic.config.hops.finding_stable_share
    assert same.statement == f"Compared with the baseline, {FINDING} has remained unchanged"
    assert "1 documented changes" in same.note  # P004's, whose own report states it


def test_change_wording_gives_a_list_of_findings_no_singular_verb():
    assert change_wording("Enlarged cardiac silhouette", "remained unchanged") == (
        "Compared with the baseline, enlarged cardiac silhouette has remained unchanged")
    assert change_wording("Clear lungs, normal cardiomediastinal silhouette, no effusion", "remained unchanged") == (
        "Both studies show clear lungs, normal cardiomediastinal silhouette, no effusion, with no interval change")
    assert change_wording("RC low-pass filter", "increased") == "Compared with the baseline, RC low-pass filter has increased"
    assert states_change(change_wording("Clear lungs, no effusion", "remained unchanged"), "")  # still read as a change


def test_no_unchanged_where_a_documented_change_hardly_moved(tmp_path):
    base = _clinic(tmp_path / "kb", documented_step=(16, 16))  # P004's report states a change its images do not show
    try:
        assert max(map(abs, documented_change_shares(base, base.config))) < base.config.hops.finding_stable_share
        assert change_along_finding(base, _compare("P003"), document_items(base, "P003-s1", "P003-s2"), base.config) is None
        assert change_along_finding(base, _compare("P001"), document_items(base, "P001-s1", "P001-s2"),
                                    base.config).statement.endswith("has increased")  # a move is still measured
    finally:
        base.close()
    base = _clinic(tmp_path / "kb2", documented_step=None)  # no sequence documents a change: nothing speaks against it
    try:
        assert documented_change_shares(base, base.config) == ()
        same = change_along_finding(base, _compare("P003"), document_items(base, "P003-s1", "P003-s2"), base.config)
        assert same.statement.endswith("has remained unchanged") and "no sequence" in same.note
    finally:
        base.close()


def test_a_change_is_measured_only_when_every_study_between_moved_the_same_way(tmp_path):
    base = _clinic(tmp_path / "kb")
    try:
        for pid, rows in (("P005", (6, 14, 24)), ("P006", (8, 0, 24))):  # steady growth; a dip, then growth
            for n, r in enumerate(rows):
                base.add_image(opacity(r), doc_id=f"{pid}-s{n + 1}", sequence=(pid, n),
                               caption=f"Patient {pid}, study {n + 1}. Findings: {FINDING}.")
        base.commit()
        question = "Compare study 3 of patient {} with study 1: how has it changed?"
        steady = change_along_finding(base, question.format("P005"), document_items(base, "P005-s1", "P005-s2", "P005-s3"),
                                      base.config)
        assert steady is not None and steady.statement.endswith("has increased")
        assert steady.earliest == "P005-s1" and steady.latest == "P005-s3"
        dipped = ["P006-s1", "P006-s2", "P006-s3"]
        assert change_along_finding(base, question.format("P006"), document_items(base, *dipped), base.config) is None
        two = change_along_finding(base, question.format("P006"), document_items(base, "P006-s1", "P006-s3"), base.config)
        assert two is not None and two.statement.endswith("has increased")  # without the middle study it is a change
    finally:
        base.close()


def test_a_step_between_the_two_thresholds_measures_neither_a_change_nor_its_absence(clinic):
    items = document_items(clinic, "P001-s1", "P001-s2")
    share = abs(change_along_finding(clinic, _compare("P001"), items, clinic.config).share)
    hops = dataclasses.replace(clinic.config.hops, finding_min_share=share + 0.01, finding_stable_share=share - 0.01)
    assert change_along_finding(clinic, _compare("P001"), items, dataclasses.replace(clinic.config, hops=hops)) is None
    hops = dataclasses.replace(hops, finding_stable_share=share + 0.005)
    assert change_along_finding(clinic, _compare("P001"), items,
                                dataclasses.replace(clinic.config, hops=hops)).statement.endswith("remained unchanged")


def test_nothing_is_measured_without_a_comparison_enough_documents_or_where_a_change_is_stated(clinic):
    cfg = clinic.config
    assert change_along_finding(clinic, _compare("P004"), document_items(clinic, "P004-s1", "P004-s2"), cfg) is None
    assert change_along_finding(clinic, "What does patient P001 show?", document_items(clinic, "P001-s1", "P001-s2"),
                                cfg) is None
    stated = len(statement_documents(clinic)[statement_shape(FINDING)] - {"P001-s1", "P001-s2"})
    few = dataclasses.replace(cfg, hops=dataclasses.replace(cfg.hops, finding_min_documents=stated + 1))
    assert change_along_finding(clinic, _compare("P001"), document_items(clinic, "P001-s1", "P001-s2"), few) is None


def test_where_changes_are_recorded_a_step_shorter_than_the_step_test_allows_is_no_change(tmp_path):
    base = _clinic(tmp_path / "kb", recorded_change=True)
    try:
        (recorded,) = recorded_changes(base)
        items = document_items(base, "P001-s1", "P001-s2")
        rows, matrix = document_space(base)
        step = float(np.linalg.norm(matrix[rows["P001-s2"]] - matrix[rows["P001-s1"]]))
        strict = dataclasses.replace(base.config, hops=dataclasses.replace(base.config.hops, change_min_share=0.6))
        assert step < 0.6 * recorded.length  # short next to the recorded change
        assert change_along_finding(base, _compare("P001"), items, strict) is None
        loose = dataclasses.replace(base.config, hops=dataclasses.replace(base.config.hops, change_min_share=0.0))
        assert change_along_finding(base, _compare("P001"), items, loose) is not None
    finally:
        base.close()


def test_the_measurement_reads_the_encoder_features_not_the_domain_adapter(tmp_path):
    from kira.adapt import ProjectionHead

    base = _clinic(tmp_path / "kb")
    try:
        items = document_items(base, "P002-s1", "P002-s2")
        before = change_along_finding(base, _compare("P002"), items, base.config)
        head = ProjectionHead(weight=np.random.default_rng(0).normal(size=(48, 8)).astype(np.float32),
                              bias=np.zeros(8, np.float32))
        base.set_adapter(head)  # the visual index now holds 8-d projections
        after = change_along_finding(base, _compare("P002"), document_items(base, "P002-s1", "P002-s2"), base.config)
        assert before is not None and after is not None
        assert after.share == pytest.approx(before.share, rel=1e-5)
    finally:
        base.close()


def test_ask_adds_the_measured_change_as_its_own_claim(clinic):
    result = Kira(clinic).ask(_compare("P001"), variant="multi_hop")
    measured = [i for i in result.evidence.items if "measured" in i.paths]
    assert len(measured) == 1 and measured[0].doc_id == "P001-s2"
    assert measured[0].provenance["label"] == measured[0].summary and "caption" not in measured[0].provenance
    first = result.answer.claims[0]
    assert first.text.startswith(f"Compared with the baseline, {FINDING} has increased")
    assert first.citations == (measured[0].number,)  # the measurement alone states it
    assert "measured" in result.trace["change"] and "kira measured" in " ".join(result.answer.reasoning)
    import json

    from kira.explain.render_json import validate

    assert validate(json.loads(result.card.to_json())) == []
    assert not any("measured" in i.paths for i in Kira(clinic).ask(_compare("P001"), variant="query_expansion").evidence.items)
    off = dataclasses.replace(clinic.config, hops=dataclasses.replace(clinic.config.hops, change_along_finding=False))
    assert "change" not in Kira(clinic, config=off).ask(_compare("P001"), variant="multi_hop").trace


def test_statement_documents_and_document_space_kept_across_commits_equal_a_fresh_build(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        def fresh():
            kept = dict(kb._derived)
            kb._derived.clear()
            kb._caches.clear()
            try:
                return statement_documents(kb), document_space(kb)
            finally:
                kb._derived.update(kept)
                kb._caches.clear()

        for step, (colour, caption) in enumerate([(BLUE, "Lake tile. Open water."), (GREEN, "Forest tile. Closed canopy."),
                                                  (YELLOW, "Sand tile. Open water."), (RED, "Red tile. Closed canopy.")]):
            kb.add_image(flat(colour), doc_id=f"t{step}", caption=caption)
            if step == 2:
                kb.remove("t0")
            kb.commit()
            statements, (rows, matrix) = statement_documents(kb), document_space(kb)
            assert "statement_documents" in kb._derived and "document_space" in kb._derived  # kept, to update next
            want_statements, (want_rows, want_matrix) = fresh()
            assert statements == want_statements and rows == want_rows
            np.testing.assert_allclose(matrix, want_matrix, rtol=1e-6)
        assert statements[statement_shape("Open water")] == frozenset({"t2"})  # t0 was removed
