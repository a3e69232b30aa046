"""A reader's refresh reads only what changed since it last looked (schema 2's removal log and
the ids above the last one seen), and ends in step with the database either way."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.embedded.store import Store

RED, GREEN, BLUE, YELLOW, CYAN = (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1)


def _in_step(reader: KnowledgeBase) -> bool:
    return all(set(reader.index(space).ids().tolist()) == set(reader.store.chunk_ids(space=space).tolist())
               for space in ("visual", "text"))


@pytest.fixture()
def writer(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", models=FakeStack())
    for name, colour in (("red", RED), ("green", GREEN), ("yellow", YELLOW)):
        kb.add_image(flat(colour), doc_id=name, caption=f"{name} card")
    kb.commit(checkpoint=True)
    yield kb
    kb.close()


def test_refresh_adds_and_removes_what_changed_without_listing_every_id(writer, monkeypatch):
    reader = KnowledgeBase.open(writer.path, models=FakeStack(), read_only=True)
    try:
        listed: list[str] = []
        chunk_ids = Store.chunk_ids
        def spy(self, **kw):  # a listing of every id is one without a lower bound
            if kw.get("after") is None:
                listed.append(kw.get("space"))
            return chunk_ids(self, **kw)

        monkeypatch.setattr(Store, "chunk_ids", spy)
        writer.add_image(flat(BLUE), doc_id="blue", caption="blue card")
        writer.remove("green")
        writer.commit()
        assert reader.refresh()
        assert listed == []  # the reader read the removal log and the new ids, not every id
        monkeypatch.setattr(Store, "chunk_ids", chunk_ids)
        assert _in_step(reader) and "green" not in {r.doc_id for r in reader.store.chunks(reader.index("visual").ids()).values()}
        # a document added and removed between two refreshes never reaches the reader's indexes
        writer.add_image(flat(CYAN), doc_id="cyan")
        writer.commit()
        writer.remove("cyan")
        writer.add_image(flat(GREEN), doc_id="green again")
        writer.commit()
        assert reader.refresh() and _in_step(reader)
        assert not reader.refresh()  # nothing new: nothing read
    finally:
        reader.close()


def test_a_reader_of_a_version_1_database_lists_every_id_and_stays_in_step(writer):
    conn = sqlite3.connect(writer.path / "kira.sqlite")
    conn.execute("DROP TRIGGER chunks_removed")
    conn.execute("DROP TABLE removed_chunks")
    conn.commit()
    conn.close()
    reader = KnowledgeBase.open(writer.path, models=FakeStack(), read_only=True)
    try:
        assert reader.store.removed_since(0) is None and reader.store.removal_log_position() is None
        writer.remove("red")
        writer.add_image(flat(BLUE), doc_id="blue")
        writer.commit()
        assert reader.refresh() and _in_step(reader)
    finally:
        reader.close()


def test_the_removal_log_records_cascaded_chunk_removals(writer):
    start = writer.store.removal_log_position()
    chunks = set(writer.store.document_chunk_ids(["red"]).values())
    every = {c for c, row in writer.store.chunks(writer.store.chunk_ids()).items() if row.doc_id == "red"}
    writer.remove("red")
    writer.commit()
    removed, position = writer.store.removed_since(start)
    assert set(removed.tolist()) == every and chunks <= every and position == start + len(every)
    assert writer.store.removed_since(position)[0].size == 0


_WRITER_LOOP = """
import random, sys
sys.path.insert(0, sys.argv[2])
from pipeline_fakes import FakeStack, flat
from kira.knowledge_base import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1], models=FakeStack())
rng = random.Random(1)
live = sorted(kb.documents())
for i in range(300):
    if live and rng.random() < 0.4:
        kb.remove(live.pop(rng.randrange(len(live))))
    else:
        kb.add_image(flat((rng.random(), rng.random(), rng.random())), doc_id=f"d{i}")
        live.append(f"d{i}")
    if rng.random() < 0.5:
        kb.commit()
kb.close()
"""


def test_a_reader_refreshing_while_another_process_writes_ends_in_step(writer):
    import subprocess
    import sys
    from pathlib import Path

    writer.close()  # the writer is another process now
    reader = KnowledgeBase.open(writer.path, models=FakeStack(), read_only=True)
    proc = None
    try:
        proc = subprocess.Popen([sys.executable, "-c", _WRITER_LOOP, str(writer.path), str(Path(__file__).parents[1])])
        found = 0
        while proc.poll() is None:
            found += reader.refresh()  # races the writer's commits
        assert proc.returncode == 0
        reader.refresh()
        assert found > 0 and _in_step(reader)  # a missed add or removal would stay behind for good
        assert sorted(reader.documents()) == sorted(
            {r.doc_id for r in reader.store.chunks(reader.index("visual").ids()).values()})
    finally:
        if proc is not None and proc.poll() is None:  # a failed refresh must not leave the writer running
            proc.kill()
        if proc is not None:
            proc.wait()
        reader.close()


def _commit_between_reads(monkeypatch, reader: KnowledgeBase, change) -> list[int]:
    """Make `change()` (a writer's commit) happen right after the reader lists the new chunk ids
    and before it reads their vectors: the race the subprocess test above hits now and then."""
    fired: list[int] = []
    chunk_ids = Store.chunk_ids

    def listing_then_commit(self, **kw):
        ids = chunk_ids(self, **kw)
        if self is reader.store and kw.get("after") is not None and not fired:
            fired.append(len(ids))
            change()
        return ids

    monkeypatch.setattr(Store, "chunk_ids", listing_then_commit)
    return fired


def test_a_removal_committed_between_a_refresh_s_reads_does_not_break_it(writer, monkeypatch):
    reader = KnowledgeBase.open(writer.path, models=FakeStack(), read_only=True)
    try:
        writer.add_image(flat(BLUE), doc_id="blue", caption="blue card")
        writer.commit()
        blue = [c for c, row in writer.store.chunks(writer.store.chunk_ids()).items() if row.doc_id == "blue"]

        def remove_blue() -> None:
            writer.remove("blue")
            writer.commit()

        fired = _commit_between_reads(monkeypatch, reader, remove_blue)
        assert reader.refresh()  # read one committed state: blue's vectors are still there to read
        assert fired and fired[0] > 0  # the removal did land between the listing and the vector read
        assert all(reader.index("visual").contains(c) for c in blue)  # as the state it read held them
        assert reader.refresh() and _in_step(reader)  # the next refresh reads the removal
        assert not any(reader.index(space).contains(c) for c in blue for space in ("visual", "text"))
    finally:
        reader.close()


def test_vectors_of_removed_chunks_are_left_out_not_zero(writer):
    ids = writer.store.chunk_ids(space="visual")
    gone = sorted(writer.store.document_chunk_ids(["red"]).values())
    every_red = [c for c, row in writer.store.chunks(ids).items() if row.doc_id == "red"]
    writer.remove("red")
    writer.commit()
    found, vecs = writer.store.stored_vectors("visual", ids, 48)
    assert set(found.tolist()) == set(ids.tolist()) - set(every_red) and set(gone) <= set(every_red)
    assert len(vecs) == len(found) and (np.abs(vecs).sum(axis=1) > 0).all()
    assert list(found) == [i for i in ids.tolist() if i not in every_red]  # the asked order kept
