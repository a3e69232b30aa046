"""Milvus: a writer killed between a batch's chunk writes and its document records leaves no orphan that
asks cite, len(kb) counts or remove() cannot delete (issue 34.4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from pipeline_fakes import FakeStack, flat  # noqa: E402

from kira.knowledge_base.milvus.orphans import find_orphans, remove_orphans  # noqa: E402
from kira.knowledge_base import KnowledgeBase  # noqa: E402

RED, GREEN, BLUE = (1, 0, 0), (0, 1, 0), (0, 0, 1)

_CHILD = textwrap.dedent("""
    import os, signal, sys
    from pipeline_fakes import FakeStack, flat
    from kira.knowledge_base.milvus.records import KbRecords
    from kira.knowledge_base import KnowledgeBase

    put = KbRecords.put
    def dies_before_the_records(self, items):
        if any(k.startswith("doc:") and k != "doc:red" for k in items):  # the second batch's records
            os.kill(os.getpid(), signal.SIGKILL)
        return put(self, items)

    KbRecords.put = dies_before_the_records
    kb = KnowledgeBase.create(sys.argv[1], models=FakeStack(), backend="milvus")
    kb.add_image(flat((1, 0, 0)), doc_id="red")
    kb.commit()
    kb.add_image(flat((0, 1, 0)), doc_id="green")
""")


def _crashed_kb(tmp_path: Path) -> Path:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    path = tmp_path / "kb"
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path)], env=env, timeout=300, capture_output=True)
    assert proc.returncode == -9, proc.stderr[-2000:]
    return path


def _cited(kb, colour) -> set[str]:
    query = np.atleast_2d(kb.visual_query(FakeStack().image.encode([flat(colour)])))
    ids, _ = kb.index("visual").search(query, 10)
    return {row.doc_id for row in kb.store.chunks(ids[0][ids[0] >= 0]).values()}


def test_a_reader_does_not_count_the_orphan_and_the_next_writer_removes_it(tmp_path, caplog):
    path = _crashed_kb(tmp_path)
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as kb:
        assert len(kb) == 1 and sorted(kb.documents()) == ["red"]
        assert find_orphans(kb.storage) == ["green"]  # named by the journal the stopped writer left
    assert "were being written when a writer stopped" in caplog.text
    with KnowledgeBase.open(path, models=FakeStack()) as kb:  # a writer: recovered at open
        assert find_orphans(kb.storage, everywhere=True) == []
        assert _cited(kb, GREEN) == {"red"} and len(kb) == 1
        assert not list(kb.storage.records.prefixed("pending:"))
        kb.add_image(flat(GREEN), doc_id="green")  # and the id can be added again
        assert len(kb) == 2 and "green" in _cited(kb, GREEN)


def test_orphans_without_a_journal_are_found_everywhere_and_removed(tmp_path):
    path = _crashed_kb(tmp_path)
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as kb:
        keys = [k for k, _ in kb.storage.records.prefixed("pending:")]
    from pymilvus import MilvusClient

    client = MilvusClient(uri=str(path / "milvus.db"))
    client.delete("kira__kb", ids=keys)  # a journal lost too: only a full scan finds the orphan
    client.close()
    from milvus_fixtures import release_lite

    release_lite(path / "milvus.db")
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        assert find_orphans(kb.storage) == [] and find_orphans(kb.storage, everywhere=True) == ["green"]
        assert remove_orphans(kb.storage) == ["green"]
        assert find_orphans(kb.storage, everywhere=True) == [] and _cited(kb, GREEN) == {"red"}


def test_remove_deletes_an_orphan_by_its_id(tmp_path):
    path = _crashed_kb(tmp_path)
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as kb:
        keys = [k for k, _ in kb.storage.records.prefixed("pending:")]
        assert json.loads(dict(kb.storage.records.prefixed("pending:"))[keys[0]]) == ["green"]
    from pymilvus import MilvusClient

    client = MilvusClient(uri=str(path / "milvus.db"))
    client.delete("kira__kb", ids=keys)
    client.close()
    from milvus_fixtures import release_lite

    release_lite(path / "milvus.db")
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        kb.remove("green")  # no record, chunks only: removed all the same
        assert _cited(kb, GREEN) == {"red"}
        with pytest.raises(ValueError, match="no document 'blue'"):
            kb.remove("blue")
        assert np.array_equal(kb.store.chunk_ids(), np.sort(kb.store.chunk_ids()))
