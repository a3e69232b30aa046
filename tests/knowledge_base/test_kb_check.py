"""`kira check`: the database, the index files and their agreement (issue 25, item 12)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from pipeline_fakes import photo_kb

from kira.cli import main
from kira.knowledge_base.check import check


@pytest.fixture()
def kb_path(tmp_path):
    return photo_kb(tmp_path)


def _tamper(kb_path, doc: str) -> int:
    """Overwrite one document chunk's stored visual vector with another valid vector (a page
    that still parses), in a knowledge base stored before kira wrote vector digests (its
    digests are cleared: tests/knowledge_base/test_kb_check_digests.py has the case with them)."""
    conn = sqlite3.connect(kb_path / "kira.sqlite")
    chunk = conn.execute("SELECT id FROM chunks WHERE doc_id = ? AND level = 'document'", (doc,)).fetchone()[0]
    vector = np.random.default_rng(0).standard_normal(48).astype("<f4")
    conn.execute("UPDATE chunks SET visual = ?, digest = NULL WHERE id = ?", (vector.tobytes(), chunk))
    conn.commit()
    conn.close()
    return chunk


def test_a_sound_knowledge_base_checks_clean(kb_path):
    report = check(kb_path)
    assert report.ok and report.checked["visual index rows"] > 0 and "integrity ok" in report.checked["database"]


def test_a_tampered_vector_without_a_digest_is_found_and_repaired(kb_path, capsys):
    chunk = _tamper(kb_path, "cat")
    report = check(kb_path)
    assert not report.ok
    [finding] = report.findings
    assert finding.where == "visual.index" and str(chunk) in finding.problem and "cat" in finding.problem
    assert main(["check", str(kb_path)]) == 1
    assert "PROBLEM visual.index" in capsys.readouterr().out
    assert main(["check", str(kb_path), "--repair", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["repaired"] is True
    assert check(kb_path).ok  # the index now holds what the database holds


def test_damaged_stored_vectors_and_leftovers_are_named(kb_path):
    conn = sqlite3.connect(kb_path / "kira.sqlite")
    chunk = conn.execute("SELECT id FROM chunks WHERE doc_id = 'coffee' AND level = 'document'").fetchone()[0]
    conn.execute("UPDATE chunks SET text = ? WHERE id = ?", (b"\x00\x01", chunk))
    conn.commit()
    conn.close()
    (kb_path / "visual.index.tmp-99-0").write_bytes(b"half")
    report = check(kb_path)
    where = {f.where: f for f in report.findings}
    assert f"chunk {chunk} (2 bytes" in where["kira.sqlite (text vectors)"].problem
    assert "coffee" in where["kira.sqlite (text vectors)"].repair
    assert "visual.index.tmp-99-0" in where[str(kb_path)].problem
    check(kb_path, repair=True)
    assert not (kb_path / "visual.index.tmp-99-0").exists()
    assert [f.where for f in check(kb_path).findings] == ["kira.sqlite (text vectors)"]  # the database is not rewritten


def test_a_missing_index_file_is_a_finding(kb_path):
    (kb_path / "text.index").unlink()
    report = check(kb_path)
    assert [f.where for f in report.findings] == ["text.index"]
    assert check(kb_path, repair=True).repaired and check(kb_path).ok


def test_check_of_a_path_that_is_no_knowledge_base_exits_2(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 2
    assert "kira ingest" in capsys.readouterr().err
