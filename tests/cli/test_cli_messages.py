"""What a new user meets at the command line (issue 25): messages, exit codes, help."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from pipeline_fakes import FakeStack

import kira.cli as cli
import kira.cli_opening as cli_opening
from kira.knowledge_base import KnowledgeBase


def _save(path, n: int):
    from PIL import Image
    from skimage import data

    path.parent.mkdir(parents=True, exist_ok=True)
    source = (data.astronaut, data.chelsea, data.coffee)[n % 3]()
    Image.fromarray(np.ascontiguousarray(source[:48, :64])).save(path)
    return path


@pytest.fixture(autouse=True)
def fake_models(monkeypatch):
    monkeypatch.setattr(cli_opening, "model_stack", lambda models_dir: FakeStack())


def test_ingest_of_a_missing_folder_creates_nothing(tmp_path, capsys):
    assert cli.main(["ingest", str(tmp_path / "kb"), str(tmp_path / "no-such-folder")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert not (tmp_path / "kb").exists()


def test_ingest_of_an_empty_folder_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("not an image")
    assert cli.main(["ingest", str(tmp_path / "kb"), str(tmp_path / "empty"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "no image files in" in err and ".png" in err and "nothing was added" in err
    assert not (tmp_path / "kb").exists()


def test_ingest_where_every_file_is_skipped_exits_1_and_leaves_no_new_kb(tmp_path, capsys):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "broken.png").write_bytes(b"not a png")
    assert cli.main(["ingest", str(tmp_path / "kb"), str(tmp_path / "imgs"), "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "broken.png" in captured.out and "none of the 1 image file(s) was added" in captured.err
    assert not (tmp_path / "kb").exists()


def test_max_pixels_flag_and_no_bomb_warning(tmp_path, capsys):
    _save(tmp_path / "imgs" / "cat.png", 1)
    assert cli.main(["ingest", str(tmp_path / "kb"), str(tmp_path / "imgs"), "--quiet", "--max-pixels", "1000"]) == 1
    assert "over the limit of 1,000" in capsys.readouterr().out
    assert cli.main(["ingest", str(tmp_path / "kb"), str(tmp_path / "imgs"), "--quiet", "--max-pixels", "4000"]) == 0


def test_asking_an_empty_knowledge_base_says_it_is_empty(tmp_path, capsys):
    KnowledgeBase.create(tmp_path / "kb", models=FakeStack()).close()
    assert cli.main(["ask", str(tmp_path / "kb"), "what is this?"]) == 2
    err = capsys.readouterr().err
    assert "is empty" in err and "kira ingest" in err


def test_a_path_that_is_no_knowledge_base_points_to_kira_ingest(tmp_path, capsys):
    assert cli.main(["info", str(tmp_path)]) == 2
    assert f"kira ingest {tmp_path} FOLDER" in capsys.readouterr().err


def test_card_out_to_a_folder_is_a_message_not_a_traceback(tmp_path, capsys):
    _save(tmp_path / "imgs" / "cat.png", 1)
    assert cli.main(["ingest", str(tmp_path / "kb"), str(tmp_path / "imgs"), "--quiet"]) == 0
    assert cli.main(["card", str(tmp_path / "kb"), "a cat", "--out", str(tmp_path)]) == 2
    assert "is a folder; give a file path" in capsys.readouterr().err


def test_version_and_help_texts(capsys):
    from kira import __version__

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"kira {__version__}"
    for command in ("ask", "card"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert "knowledge base directory" in out and "the question" in out and "(default: 5)" in out
        assert "visual_only" in out and "fine-grained crops" in out  # the variants explained
    with pytest.raises(SystemExit):
        cli.main(["ingest", "--help"])
    out = capsys.readouterr().out
    assert "(default: 16)" in out and "--follow-links" in out and "--max-pixels" in out


def test_a_closed_pipe_ends_quietly(tmp_path):
    KnowledgeBase.create(tmp_path / "kb", models=FakeStack()).close()
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited
    try:
        proc = subprocess.run([sys.executable, "-m", "kira", "info", str(tmp_path / "kb")], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
