"""What `ingest` reads from a folder: ids from relative paths, links and special files (issue 25)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from pipeline_fakes import FakeStack

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.ingest import collect_entries


def _save(path: Path, n: int) -> Path:
    from PIL import Image
    from skimage import data

    source = (data.astronaut, data.chelsea, data.coffee, data.rocket)[n % 4]()
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(source[:48, :64])).save(path)
    return path


@pytest.fixture()
def kb(tmp_path):
    base = KnowledgeBase.create(tmp_path / "kb", models=FakeStack())
    yield base
    base.close()


def test_same_file_names_in_two_folders_get_two_ids(kb, tmp_path):
    root = tmp_path / "photos"
    _save(root / "a" / "IMG_0001.jpg", 0)
    _save(root / "b" / "IMG_0001.jpg", 1)
    _save(root / "top.png", 2)
    _save(root / "twin.png", 3)
    _save(root / "twin.jpg", 0)
    summary = kb.ingest(root)
    assert sorted(summary.added) == ["a/IMG_0001", "b/IMG_0001", "top", "twin.jpg", "twin.png"]
    assert not summary.skipped and summary.found == 5
    assert kb.documents(["a/IMG_0001"])["a/IMG_0001"].source == str(root / "a" / "IMG_0001.jpg")


def test_a_single_file_keeps_its_stem_as_id(kb, tmp_path):
    path = _save(tmp_path / "x" / "sunrise.png", 1)
    assert kb.ingest(path).added == ["sunrise"]
    assert kb.ingest([_save(tmp_path / "y" / "dusk.png", 2)]).added == ["dusk"]


def test_links_out_of_the_folder_are_not_followed_unless_asked(kb, tmp_path):
    outside = tmp_path / "outside"
    secret = outside / "secret.txt"
    outside.mkdir()
    secret.write_text("a private file outside the folder")
    _save(outside / "far.png", 3)
    root = tmp_path / "photos"
    _save(root / "cat.png", 1)
    (root / "cat.txt").symlink_to(secret)  # a caption sidecar leading out
    (root / "far.png").symlink_to(outside / "far.png")
    (root / "sub").symlink_to(outside, target_is_directory=True)
    _save(root / "inner" / "mug.png", 2)
    (root / "again.png").symlink_to(root / "inner" / "mug.png")  # inside: followed
    summary = kb.ingest(root)
    reasons = {Path(p).name: r for p, r in summary.skipped}
    assert sorted(summary.added) == ["again", "inner/mug"]
    assert "outside the ingest folder" in reasons["cat.png"] and "caption file" in reasons["cat.png"]
    assert "outside the ingest folder" in reasons["far.png"] and "outside" in reasons["sub"]
    assert all(secret.read_text() not in (d.caption or "") for d in kb.documents().values())
    followed = kb.ingest(root, follow_links=True)
    assert sorted(followed.added) == ["cat", "far", "sub/far"]
    assert kb.documents(["cat"])["cat"].caption == secret.read_text()


def test_broken_links_and_fifos_are_listed_as_skipped(tmp_path):
    root = tmp_path / "photos"
    _save(root / "ok.png", 0)
    (root / "gone.png").symlink_to(tmp_path / "nowhere.png")
    os.mkfifo(root / "pipe.png")
    os.mkfifo(root / "pipe-without-suffix")
    _save(root / "fifo-caption.png", 1)
    os.mkfifo(root / "fifo-caption.txt")  # reading it would block forever
    found, skipped, _ = collect_entries(root)
    assert [p.name for p in found] == ["fifo-caption.png", "ok.png"]
    reasons = {Path(p).name: r for p, r in skipped}
    assert reasons["gone.png"] == "broken symbolic link"
    assert reasons["pipe.png"].startswith("a FIFO") and reasons["pipe-without-suffix"].startswith("a FIFO")
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        summary = kb.ingest(root)
        assert summary.added == ["ok"]
        assert "a FIFO" in dict((Path(p).name, r) for p, r in summary.skipped)["fifo-caption.png"]


def test_a_missing_folder_is_a_value_error(kb, tmp_path):
    with pytest.raises(ValueError, match="no such file or folder"):
        kb.ingest(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    summary = kb.ingest(empty)
    assert summary.found == 0 and not summary.added and not summary.skipped


def test_a_link_loop_inside_the_folder_is_read_once(kb, tmp_path):
    root = tmp_path / "photos"
    _save(root / "a" / "cat.png", 1)
    (root / "a" / "loop").symlink_to(root / "a", target_is_directory=True)
    (root / "again").symlink_to(root / "a", target_is_directory=True)
    summary = kb.ingest(root)
    assert summary.added == ["a/cat"]
    assert {os.path.basename(p) for p, _ in summary.skipped} == {"loop", "again"}


def test_a_knowledge_base_in_a_folder_named_with_uri_characters_opens_read_only(tmp_path):
    path = tmp_path / "kb #1?x=2"
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        kb.ingest(_save(tmp_path / "cat.png", 1))
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as reader:
        assert list(reader.documents()) == ["cat"]
