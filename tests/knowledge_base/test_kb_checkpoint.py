"""Deferred index checkpoints: a small commit to a large knowledge base commits the database
alone; the index files catch up at a later checkpoint, at close, or in the next opener."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.embedded.vectors import INDEX_CHECKPOINT_SHARE

RED, GREEN, BLUE, YELLOW, CYAN = (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1)
FILES = ("visual.index", "text.index", "manifest.json")


def _snapshot(path: Path) -> dict[str, bytes]:
    return {name: (path / name).read_bytes() for name in FILES}


def _manifest_generation(path: Path) -> int:
    return json.loads((path / "manifest.json").read_text())["generation"]


def _top_document(kb: KnowledgeBase, colour) -> str:
    query = kb.visual_query(FakeStack().image.encode([flat(colour)]))[0]
    ids, _ = kb.index("visual").search(query, 1, allow=kb.level_ids(["document"]))
    return kb.store.chunks(ids[0])[int(ids[0][0])].doc_id


def _three(kb: KnowledgeBase) -> None:
    for name, colour in (("red", RED), ("green", GREEN), ("yellow", YELLOW)):
        kb.add_image(flat(colour), doc_id=name, caption=f"{name} card")
    kb.commit()


def test_a_small_commit_defers_the_files_and_a_reader_catches_up(tmp_path):
    path = tmp_path / "kb"
    kb = KnowledgeBase.create(path, models=FakeStack())
    assert kb.storage.checkpoint_share == INDEX_CHECKPOINT_SHARE
    _three(kb)
    assert kb.storage.spaces.unsaved == 0 and _manifest_generation(path) == kb.store.generation()  # first commit: saved
    saved = _snapshot(path)
    kb.storage.checkpoint_share = 0.5  # one image of four is under half of the rows
    kb.add_image(flat(BLUE), doc_id="blue", caption="blue card")
    generation = kb.commit()
    assert _snapshot(path) == saved  # the database committed; the index files were not rewritten
    assert kb.storage.spaces.unsaved > 0 and _manifest_generation(path) < generation
    assert _top_document(kb, BLUE) == "blue"  # the writer's in-memory indexes hold it
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as reader:
        assert not reader.storage.repair.clean and reader.storage.repair.added["visual"] > 0 and not any(reader.storage.repair.rebuilt.values())
        assert _top_document(reader, BLUE) == "blue"
        assert len(reader.index("visual")) == len(reader.store.chunk_ids(space="visual"))
    assert _snapshot(path) == saved  # a reader never writes
    kb.close()  # close always checkpoints (an empty commit leaves the generation where it was: issue 34)
    assert _manifest_generation(path) == generation and _snapshot(path) != saved
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as reader:
        assert reader.storage.repair.clean and _top_document(reader, BLUE) == "blue"


def test_changes_past_the_share_are_saved_and_checkpoint_forces_or_forbids(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        _three(kb)
        kb.storage.checkpoint_share = 0.2
        kb.add_image(flat(BLUE), doc_id="blue")  # a quarter of the rows: past the share
        assert kb.commit() == _manifest_generation(path) and kb.storage.spaces.unsaved == 0
        kb.storage.checkpoint_share = 1.0
        kb.add_image(flat(CYAN), doc_id="cyan")
        assert kb.commit(checkpoint=True) == _manifest_generation(path)  # forced, though under the share
        kb.storage.checkpoint_share = 0.0
        kb.remove("cyan")
        generation = kb.commit(checkpoint=False)  # forbidden, though past the share
        assert _manifest_generation(path) < generation and kb.storage.spaces.unsaved > 0
        assert kb.commit(checkpoint=True) == _manifest_generation(path)
        # a commit that changes no row only moves the manifest on: the files already match
        saved = {name: (path / name).read_bytes() for name in ("visual.index", "text.index")}
        kb.store.set_meta("note", "x")
        generation = kb.commit()
        assert _manifest_generation(path) == generation
        assert {name: (path / name).read_bytes() for name in saved} == saved
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as reader:
        assert reader.storage.repair.clean and sorted(reader.documents()) == ["blue", "green", "red", "yellow"]


_KILLED_AFTER_A_DEFERRED_COMMIT = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from pipeline_fakes import FakeStack, flat
    from kira.knowledge_base import KnowledgeBase
    kb = KnowledgeBase.create(sys.argv[1], models=FakeStack())
    for name, colour in (("red", (1, 0, 0)), ("green", (0, 1, 0)), ("yellow", (1, 1, 0))):
        kb.add_image(flat(colour), doc_id=name)
    saved = kb.commit()
    kb.storage.checkpoint_share = 1.0
    kb.add_image(flat((0, 0, 1)), doc_id="blue")
    deferred = kb.commit()  # deferred: the files still hold three documents
    print(saved, deferred, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_writer_killed_after_a_deferred_commit_loses_nothing(tmp_path):
    path = tmp_path / "kb"
    proc = subprocess.run([sys.executable, "-c", _KILLED_AFTER_A_DEFERRED_COMMIT, str(path), str(Path(__file__).parents[1])],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    saved, deferred = map(int, proc.stdout.split())
    assert _manifest_generation(path) == saved < deferred  # the files hold the three-document commit
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        assert sorted(kb.documents()) == ["blue", "green", "red", "yellow"]
        assert kb.storage.repair.added["visual"] > 0 and not any(kb.storage.repair.rebuilt.values())
        assert _top_document(kb, BLUE) == "blue"
        assert _manifest_generation(path) == kb.store.generation()  # a writer saves what it repaired at once
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as reader:
        assert reader.storage.repair.clean
