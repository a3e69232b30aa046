"""Knowledge base: create/open, chunking, durability (crash, concurrent reader), bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.embedded.store import SCHEMA_VERSION

RED, GREEN, BLUE = (1, 0, 0), (0, 1, 0), (0, 0, 1)


def _save_png(path: Path, colour, spot=None) -> Path:
    from PIL import Image

    Image.fromarray(flat(colour, spot=spot)).save(path)
    return path


@pytest.fixture()
def kb(tmp_path):
    base = KnowledgeBase.create(tmp_path / "kb", models=FakeStack())
    yield base
    base.close()


def test_add_image_stores_three_levels_with_parent_links(kb):
    kb.add_image(flat(RED, spot=(BLUE, 10, 10, 16)), doc_id="red", caption="a red card", tags=["red"])
    kb.commit()
    counts = kb.store.count_chunks()
    assert counts["document"] == 1 and counts["patch"] == 16 and counts.get("region", 0) >= 1
    rows = kb.store.chunks(kb.store.chunk_ids())
    doc = [r for r in rows.values() if r.level == "document"][0]
    assert doc.parent_id is None and doc.box is None and doc.description.startswith("a red card; tags: red")
    for r in rows.values():
        if r.level == "region":
            assert r.parent_id == doc.id
        if r.level == "patch":
            assert rows[r.parent_id].level in ("document", "region")
            assert r.box is not None and r.box[2] > r.box[0]
    assert len(kb.index("visual")) == len(rows) == len(kb.index("text"))


def test_reopen_loads_indexes_without_rebuild(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        kb.add_image(flat(RED), doc_id="a", caption="red")
        kb.add_image(flat(GREEN), doc_id="b", caption="green")
        before = kb.index("visual").search(kb.visual_query(FakeStack().image.encode([flat(RED)]))[0], 3)
    manifest = json.loads((path / "manifest.json").read_text())
    kb2 = KnowledgeBase.open(path, models=FakeStack(), read_only=True)
    try:
        assert kb2.storage.repair is not None and kb2.storage.repair.clean
        assert manifest["generation"] == kb2.store.generation()
        after = kb2.index("visual").search(kb2.visual_query(FakeStack().image.encode([flat(RED)]))[0], 3)
        np.testing.assert_array_equal(before[0], after[0])
    finally:
        kb2.close()


def test_stale_index_files_are_repaired_from_stored_vectors(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        kb.add_image(flat(RED), doc_id="a")
    saved = {name: (path / name).read_bytes() for name in ("visual.index", "text.index", "manifest.json")}
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        kb.add_image(flat(GREEN), doc_id="b")
        kb.remove("a")
    for name, data in saved.items():  # simulate a crash after the DB commit, before the index save
        (path / name).write_bytes(data)
    stack = FakeStack()
    with KnowledgeBase.open(path, models=stack, read_only=True) as kb:
        assert not kb.storage.repair.clean
        assert kb.storage.repair.added["visual"] > 0 and kb.storage.repair.removed["visual"] > 0
        ids = set(kb.index("visual").ids().tolist())
        assert ids == set(kb.store.chunk_ids(space="visual").tolist())
        assert {r.doc_id for r in kb.store.chunks(list(ids)).values()} == {"b"}


def test_duplicate_and_unknown_ids_raise(kb):
    kb.add_image(flat(RED), doc_id="a")
    with pytest.raises(ValueError, match="already"):
        kb.add_image(flat(GREEN), doc_id="a")
    with pytest.raises(ValueError, match="no document"):
        kb.remove("nope")
    kb.remove("a")
    assert len(kb) == 0 and len(kb.index("visual")) == 0


def test_add_document_with_passages_and_text_only(kb):
    kb.add_document("page", images=[flat(RED), flat(BLUE)], passages=["The red card is used in football.", "Second passage."])
    kb.add_document("note", passages=["only text here"], caption="a note")
    kb.commit()
    assert kb.store.count_chunks()["passage"] == 3
    assert {g[2][0] for g in kb.store.groups()} == {"page"}
    assert kb.store.documents(["page#1"])["page#1"].width == 64
    with pytest.raises(ValueError):
        kb.add_document("empty")
    from kira.pipeline import Kira

    result = Kira(kb).ask("which card is used in football?", variant="dual_path", levels=("passage",))
    assert result.evidence.items[0].level == "passage"
    assert "football" in result.answer.text


def test_ingest_skips_corrupt_and_bomb_and_keeps_stored(tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    _save_png(folder / "red.png", RED)
    _save_png(folder / "green.png", GREEN)
    (folder / "green.txt").write_text("a green square")
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png")
    from PIL import Image

    Image.new("L", (30000, 30000 // 1000)).save(folder / "huge.png")  # 30000 px side: over MAX_SIDE
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(flat(BLUE), doc_id="blue")
        summary = kb.ingest(folder, batch_size=1)
        assert sorted(summary.added) == ["green", "red"]
        reasons = dict(summary.skipped)
        assert "cannot read image" in reasons[str(folder / "broken.png")]
        assert "over the limit" in reasons[str(folder / "huge.png")]
        again = kb.ingest(folder)
        assert not again.added and sorted(again.unchanged) == ["green", "red"]  # unchanged: counted, not listed
        assert kb.store.documents(["green"])["green"].caption == "a green square"
        assert len(kb) == 3


def test_second_writer_is_refused_readers_are_not(tmp_path):
    path = tmp_path / "kb"
    kb = KnowledgeBase.create(path, models=FakeStack())
    try:
        with pytest.raises(ValueError, match="read_only"):
            KnowledgeBase.open(path)
        KnowledgeBase.open(path, read_only=True).close()
    finally:
        kb.close()


_CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pipeline_fakes import FakeStack, GridColourEncoder
    from kira.knowledge_base import KnowledgeBase

    class KillOnThirdBatch(GridColourEncoder):
        def encode(self, images):
            if self.calls == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            return super().encode(images)

    # the same encoder that dies: a knowledge base records its encoder's class and refuses another one
    KillOnThirdBatch.__name__ = KillOnThirdBatch.__qualname__ = "GridColourEncoder"
    kb = KnowledgeBase.create(sys.argv[1], models=FakeStack(image=KillOnThirdBatch()))
    kb.ingest(sys.argv[2], batch_size=2)
""")


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_killed_mid_ingest_loses_only_the_batch_in_flight(tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    colours = [RED, GREEN, BLUE, (1, 1, 0), (0, 1, 1), (1, 0, 1)]
    for i, c in enumerate(colours):
        _save_png(folder / f"img{i}.png", c)
    path = tmp_path / "kb"
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(folder)], env=_child_env(), timeout=120)
    assert proc.returncode == -signal.SIGKILL
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        assert sorted(d for d in kb.documents()) == ["img0", "img1", "img2", "img3"]  # two committed batches
        assert kb.storage.repair.added["visual"] == len(kb.store.chunk_ids(space="visual"))  # indexes rebuilt from BLOBs
        query = kb.visual_query(FakeStack().image.encode([flat(GREEN)]))[0]
        ids, _ = kb.index("visual").search(query, 1, allow=kb.level_ids(["document"]))
        assert kb.store.chunks(ids[0])[int(ids[0][0])].doc_id == "img1"
        summary = kb.ingest(folder, batch_size=2)  # finishing the job adds only what is missing
        assert sorted(summary.added) == ["img4", "img5"]


_READER = textwrap.dedent("""
    import json, sys
    from kira.knowledge_base import KnowledgeBase
    kb = KnowledgeBase.open(sys.argv[1], read_only=True)
    print(json.dumps({"docs": len(kb), "visual": len(kb.index("visual"))}))
    kb.close()
""")


def test_concurrent_reader_sees_committed_state_while_writer_is_mid_transaction(tmp_path):
    path = tmp_path / "kb"
    kb = KnowledgeBase.create(path, models=FakeStack())
    try:
        kb.add_image(flat(RED), doc_id="a")
        kb.commit()
        committed = len(kb.index("visual"))
        kb.add_image(flat(GREEN), doc_id="b")  # uncommitted: the writer holds a write transaction
        out = subprocess.run([sys.executable, "-c", _READER, str(path)], env=_child_env(), capture_output=True,
                             text=True, timeout=120, check=True)
        seen = json.loads(out.stdout)
        assert seen == {"docs": 1, "visual": committed}
        reader = KnowledgeBase.open(path, read_only=True)
        try:
            assert len(reader) == 1
            kb.commit()
            assert reader.refresh() and len(reader) == 2
            assert len(reader.index("visual")) == len(kb.index("visual"))
        finally:
            reader.close()
    finally:
        kb.close()


def test_wrong_model_dims_and_not_a_kb(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(flat(RED), doc_id="a")

    class Wide:
        dim = 7

        def encode(self, items):
            return np.ones((len(items), 7), np.float32) / np.sqrt(7)

    with pytest.raises(ValueError, match="built with"):  # refused at open (issue 34.1), not at the first write
        KnowledgeBase.open(tmp_path / "kb", models=FakeStack(image=Wide()))
    with KnowledgeBase.open(tmp_path / "kb", models=FakeStack()) as kb:  # the refusal released the writer lock
        kb.add_image(flat(GREEN), doc_id="b")
    with pytest.raises(ValueError, match="not a kira knowledge base"):
        KnowledgeBase.open(tmp_path)
    with pytest.raises(ValueError, match="not an empty directory"):
        KnowledgeBase.create(tmp_path / "kb")


def test_hnsw_knowledge_base_round_trip(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack(), index="hnsw") as kb:
        for name, c in (("red", RED), ("green", GREEN), ("blue", BLUE)):
            kb.add_image(flat(c), doc_id=name, caption=name)
        kb.remove("green")
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as kb:
        assert kb.storage.repair.clean and type(kb.index("visual")).__name__ == "HNSWIndex"
        query = kb.visual_query(FakeStack().image.encode([flat(BLUE)]))[0]
        ids, _ = kb.index("visual").search(query, 1, allow=kb.level_ids(["document"]))
        assert kb.store.chunks(ids[0])[int(ids[0][0])].doc_id == "blue"
        assert "green" not in kb.documents()


def test_exception_mid_ingest_keeps_committed_batches_and_reports_the_rest(tmp_path):
    from pipeline_fakes import GridColourEncoder

    class BreaksAfterFirstBatch(GridColourEncoder):
        def encode(self, images):
            if self.calls >= 1:
                self.calls += 1
                raise RuntimeError("encoder crashed")
            return super().encode(images)

    folder = tmp_path / "imgs"
    folder.mkdir()
    for i, c in enumerate((RED, GREEN, BLUE, (1, 1, 0))):
        _save_png(folder / f"img{i}.png", c)
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack(image=BreaksAfterFirstBatch())) as kb:
        summary = kb.ingest(folder, batch_size=2)
        assert summary.added == ["img0", "img1"]
        assert [p for p, _ in summary.skipped] == [str(folder / "img2.png"), str(folder / "img3.png")]
        assert all("encoder crashed" in reason for _, reason in summary.skipped)
    with KnowledgeBase.open(path, models=FakeStack(image=BreaksAfterFirstBatch()), read_only=True) as kb:  # its encoder
        assert kb.storage.repair.clean and sorted(kb.documents()) == ["img0", "img1"]
        assert len(kb.index("visual")) == len(kb.store.chunk_ids(space="visual"))


def test_a_version_1_database_is_migrated_by_a_writer_and_read_as_it_is(tmp_path):
    import sqlite3

    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        kb.add_image(flat(RED), doc_id="red", caption="red card")
        kb.add_image(flat(BLUE), doc_id="blue", caption="blue card")
    conn = sqlite3.connect(path / "kira.sqlite")  # as kira 0.1 (schema 1) left it: no partial indexes
    conn.execute("DROP INDEX chunks_with_visual")
    conn.execute("DROP INDEX chunks_with_text")
    conn.execute("UPDATE schema_version SET version = 1")
    conn.commit()
    conn.close()

    def indexes(kb):
        return {r[0] for r in kb.store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}

    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as reader:  # a reader never writes
        assert reader.store.schema_version() == 1 and "chunks_with_visual" not in indexes(reader)
        assert len(reader.store.chunk_ids(space="visual")) == len(reader.index("visual")) > 0
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        assert kb.store.schema_version() == SCHEMA_VERSION and {"chunks_with_visual", "chunks_with_text"} <= indexes(kb)
        plan = kb.store.conn.execute("EXPLAIN QUERY PLAN SELECT id FROM chunks WHERE visual IS NOT NULL ORDER BY id")
        assert "chunks_with_visual" in " ".join(str(row) for row in plan.fetchall())
        assert kb.storage.repair.clean and sorted(kb.documents()) == ["blue", "red"]


def test_a_database_from_a_newer_kira_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        kb.add_image(flat(RED), doc_id="red")
    conn = sqlite3.connect(path / "kira.sqlite")
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match="newer than this kira understands"):
        KnowledgeBase.open(path, models=FakeStack())
