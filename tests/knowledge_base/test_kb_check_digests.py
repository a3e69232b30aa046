"""`kira check` verifies what it repairs: vector digests, implausible norms, damaged pages, settings
files, empty commits (issue 34, items 5 and 11)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from pipeline_fakes import FakeStack, photo, photo_kb

from kira.cli import main
from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.check import check, database_problem


@pytest.fixture()
def kb_path(tmp_path):
    return photo_kb(tmp_path)


def _chunk(kb_path, doc: str) -> int:
    with sqlite3.connect(kb_path / "kira.sqlite") as conn:
        return conn.execute("SELECT id FROM chunks WHERE doc_id = ? AND level = 'document'", (doc,)).fetchone()[0]


def _set_visual(kb_path, chunk: int, vector: np.ndarray, *, clear_digest: bool = False) -> None:
    conn = sqlite3.connect(kb_path / "kira.sqlite")
    extra = ", digest = NULL" if clear_digest else ""
    conn.execute(f"UPDATE chunks SET visual = ?{extra} WHERE id = ?", (vector.astype("<f4").tobytes(), chunk))
    conn.commit()
    conn.close()


def test_a_rewritten_vector_is_caught_by_its_digest_and_repair_leaves_it_out_and_says_so(kb_path, capsys):
    chunk = _chunk(kb_path, "coffee")
    _set_visual(kb_path, chunk, np.random.default_rng(1).standard_normal(48))  # a valid vector, not kira's
    report = check(kb_path)
    assert "60 chunk(s) verified" in report.checked["vector digests"]
    where = {f.where: f for f in report.findings}
    assert f"chunk {chunk} (differs from the digest" in where["kira.sqlite (visual vectors)"].problem
    assert "coffee" in where["kira.sqlite (visual vectors)"].repair
    assert "kira.sqlite (text vectors)" not in where  # its text vector is kira's: found in its own space
    assert main(["check", str(kb_path), "--repair"]) == 1  # it could not restore the vector
    out = capsys.readouterr().out
    assert "NOT FIXED kira.sqlite (visual vectors)" in out and "remove these documents and add them again: coffee" in out
    with KnowledgeBase.open(kb_path, models=None, read_only=True) as kb:
        assert not kb.index("visual").contains(chunk)  # the rewritten vector was not copied into the index
        assert kb.index("text").contains(chunk)
    again = check(kb_path)
    assert [f.where for f in again.findings] == ["kira.sqlite (visual vectors)"]  # the index now agrees


def test_a_huge_finite_vector_is_flagged_even_without_a_digest_and_repair_exits_1(kb_path, capsys):
    chunk = _chunk(kb_path, "cat")
    _set_visual(kb_path, chunk, np.full(48, 1.6e37), clear_digest=True)  # finite, as the fault pass wrote it
    report = check(kb_path)
    problem = {f.where: f.problem for f in report.findings}["kira.sqlite (visual vectors)"]
    assert f"chunk {chunk} (norm 1.11e+38: its dot products overflow float32)" in problem
    assert "absent for 1 stored before kira wrote them" in report.checked["vector digests"]
    assert main(["check", str(kb_path), "--repair", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["repaired"] is True and [f["where"] for f in data["remaining"]] == ["kira.sqlite (visual vectors)"]


def test_a_clean_repair_exits_0_after_checking_again(kb_path, capsys):
    (kb_path / "visual.index").unlink()
    assert main(["check", str(kb_path), "--repair"]) == 0
    assert "checked again after the repair: everything agrees" in capsys.readouterr().out


def _drop_digests(kb_path) -> None:
    """Make the database what kira wrote before schema 4: no digest column."""
    conn = sqlite3.connect(kb_path / "kira.sqlite")
    conn.execute("ALTER TABLE chunks DROP COLUMN digest")
    conn.execute("UPDATE schema_version SET version = 3")
    conn.commit()
    conn.close()


def test_a_knowledge_base_from_before_digests_opens_checks_and_says_they_are_absent(kb_path):
    _drop_digests(kb_path)
    report = check(kb_path)
    assert report.ok and report.checked["vector digests"].startswith("absent (schema 3")
    with KnowledgeBase.open(kb_path, models=FakeStack()) as kb:  # a writer migrates: new chunks get digests
        kb.add_image(photo(0), doc_id="again")
    report = check(kb_path)
    assert report.ok and "absent for 60 stored before kira wrote them" in report.checked["vector digests"]


def _damage_a_page(kb_path) -> None:
    conn = sqlite3.connect(kb_path / "kira.sqlite")
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'documents'").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(kb_path / "kira.sqlite", "r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\x0d" + b"\xff" * 63)


def test_a_damaged_page_makes_check_and_ask_refuse_with_the_fix(kb_path, capsys):
    _damage_a_page(kb_path)
    assert "SQLite integrity check failed" in check(kb_path).findings[0].problem
    problem = database_problem(kb_path)
    assert problem and "is damaged" in problem and "restore kira.sqlite from a backup" in problem
    for command in ("ask", "card"):  # refused before any model loads
        assert main([command, str(kb_path), "what is this?", "--out", str(kb_path.parent / "card.html")]) == 2
        err = capsys.readouterr().err
        assert "is damaged" in err and f"kira check {kb_path}" in err
    assert database_problem(photo_kb(kb_path.parent / "sound")) is None


def test_a_damaged_page_met_while_reading_a_large_database_is_a_message_with_the_fix(kb_path, monkeypatch, capsys):
    import kira.knowledge_base.embedded.check as check_module

    _damage_a_page(kb_path)
    monkeypatch.setattr(check_module, "QUICK_CHECK_PAGES", 1)  # too large to verify before answering
    assert database_problem(kb_path) is None
    assert main(["ask", str(kb_path), "what is this?"]) == 2
    err = capsys.readouterr().err
    assert "database could not be read" in err and f"kira check {kb_path}" in err and "Traceback" not in err


def test_empty_commits_do_not_advance_the_generation(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(photo(0), doc_id="a")
        first = kb.commit()
        assert kb.commit() == first and kb.commit(checkpoint=True) == first
        kb.add_image(photo(1), doc_id="b")
        assert kb.commit() == first + 1
        kb.rollback()
        assert kb.commit() == first + 1
    with KnowledgeBase.open(tmp_path / "kb", models=FakeStack()) as kb:
        assert kb.store.generation() == first + 1  # close() committed nothing new


def test_a_missing_config_is_refused_with_the_fix_and_repair_writes_the_defaults(kb_path, capsys):
    (kb_path / "config.json").unlink()
    with pytest.raises(ValueError, match=r"config.json is missing.*kira check .* --repair"):
        KnowledgeBase.open(kb_path, read_only=True)
    report = check(kb_path)
    assert [f.where for f in report.findings] == ["config.json"] and "missing" in report.findings[0].problem
    assert main(["check", str(kb_path), "--repair"]) == 0
    assert (kb_path / "config.json").is_file()
    KnowledgeBase.open(kb_path, read_only=True).close()


def test_an_invalid_profile_is_a_finding_that_repair_cannot_fix(kb_path, capsys):
    (kb_path / "profile.json").write_text('{"no such key": 1}')
    report = check(kb_path)
    [finding] = report.findings
    assert finding.where == "profile.json" and "no such key" in finding.problem
    assert main(["check", str(kb_path), "--repair"]) == 1
    assert "NOT FIXED profile.json" in capsys.readouterr().out
