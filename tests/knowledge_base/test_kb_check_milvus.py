"""`kira check` on a Milvus-backed knowledge base: counts, orphan chunks found and removed (issue 34, item 9)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from milvus_fixtures import release_lite  # noqa: E402
from pipeline_fakes import FakeStack, photo  # noqa: E402

from kira.cli import main  # noqa: E402
from kira.knowledge_base import KnowledgeBase  # noqa: E402
from kira.knowledge_base.check import check  # noqa: E402
from kira.knowledge_base.milvus.check import _vector_problem  # noqa: E402


@pytest.fixture()
def lite_kb(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack(), backend="milvus") as kb:
        for n, name in enumerate(("astronaut", "cat", "coffee")):
            kb.add_image(photo(n), doc_id=name, caption=f"a photo of {name}")
    yield path
    release_lite(path / "milvus.db")


def test_a_sound_milvus_knowledge_base_checks_clean_with_its_counts(lite_kb, capsys):
    report = check(lite_kb)
    assert report.ok, report.to_text()
    assert report.checked["document records"] == 3 and "document 3" in report.checked["chunks"]
    assert report.checked["stored vectors"] == "finite and unit-norm"
    assert main(["check", str(lite_kb)]) == 0
    assert "everything agrees" in capsys.readouterr().out


def test_orphan_chunks_are_reported_and_removed_by_repair(lite_kb, capsys):
    with KnowledgeBase.open(lite_kb) as kb:  # what a crash between the chunks and the record leaves
        kb.storage.records.delete(["doc:cat", "thumb:cat"])
        kb.storage.note_external_writes()
        assert len(kb) == 2  # documents are counted by their records: the orphans are not (issue 34.4)
    report = check(lite_kb)
    [finding] = report.findings
    assert finding.where == "chunks" and "belong to no document record" in finding.problem and "'cat'" in finding.problem
    assert main(["check", str(lite_kb), "--repair"]) == 0
    assert "checked again after the repair: everything agrees" in capsys.readouterr().out
    with KnowledgeBase.open(lite_kb, read_only=True) as kb:
        assert len(kb) == 2 and sorted(kb.documents()) == ["astronaut", "coffee"]


def test_a_record_without_chunks_is_reported_and_not_repairable(lite_kb, capsys):
    from kira.knowledge_base.milvus.writes import delete_documents

    with KnowledgeBase.open(lite_kb) as kb:
        delete_documents(kb.storage.collection, ["coffee"])
        kb.storage.note_external_writes()
    report = check(lite_kb, repair=True)
    assert [f.where for f in report.remaining] == ["document records"]
    assert "['coffee']" in report.remaining[0].problem and not report.fixed


def test_vectors_kira_did_not_write_are_named():
    assert _vector_problem([0.6, 0.8]) is None
    assert "NaN" in _vector_problem([float("nan"), 1.0])
    assert "norm 1.6e+37, not 1" in _vector_problem([1.6e37, 0.0])


def test_check_takes_a_knowledge_base_named_at_a_uri(tmp_path, capsys):
    uri = str(tmp_path / "shared.db")
    try:
        with KnowledgeBase.create("team photos", models=FakeStack(), backend="milvus", uri=uri) as kb:
            kb.add_image(photo(0), doc_id="a")
        assert main(["check", "team photos", "--uri", uri, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["ok"] and data["checked"]["document records"] == 1 and "team_photos" in data["path"]
    finally:
        release_lite(uri)
