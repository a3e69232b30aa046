"""The kira command, run as a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest


def _kira(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "kira", *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"kira {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    from PIL import Image

    root = tmp_path_factory.mktemp("cli")
    folder = root / "imgs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, colour, caption in (("sunset", (230, 120, 30), "an orange sunset"), ("sea", (20, 60, 200), "the blue sea"),
                                  ("field", (40, 180, 50), "a green field")):
        a = np.clip(np.array(colour) + rng.normal(0, 20, (48, 64, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(a).save(folder / f"{name}.png")
        (folder / f"{name}.txt").write_text(caption)
    (folder / "bad.png").write_bytes(b"not an image")
    kb = root / "kb"
    proc = _kira("ingest", kb, folder, "--quiet")
    return root, kb, proc


def test_ingest_reports_added_and_skipped(built):
    _, _, proc = built
    assert "added 3 image(s)" in proc.stdout and "skipped" in proc.stdout and "bad.png" in proc.stdout


def test_info(built):
    _, kb, _ = built
    stats = json.loads(_kira("info", kb, "--json").stdout)
    assert stats["documents"] == 3 and stats["chunks"]["document"] == 3
    assert "documents: 3" in _kira("info", kb).stdout


def test_ask_text_image_and_cards(built):
    root, kb, _ = built
    out = _kira("ask", kb, "the blue sea").stdout
    assert "[Evidence 1]" in out and "sea" in out
    assert "sunset" not in out, out  # another subject, not blue: no similar case of "the blue sea"
    out = _kira("ask", kb, "is the sea orange?").stdout  # a yes/no question about the subject 'sea': no 'orange'
    assert out.startswith("Nothing recorded about sea matches 'orange'. The blue sea [Evidence 1]."), out
    assert "[Evidence 2] sunset (document; a similar case, another subject)" in out, out  # cited above, so listed
    # each item says whether it matches the question; a retrieval score only where nothing was judged
    out = _kira("ask", kb, "the ocean", "--variant", "dual_path").stdout
    assert re.search(r"\[Evidence 1\] sea \((?:document|region); matches the question \d\.\d\d\)", out), out
    assert "(document; does not match the question)" in out, out
    card = json.loads(_kira("ask", kb, "the blue sea", "--card", "json", "--variant", "dual_path",
                            "--levels", "document").stdout)
    assert card["variant"] == "dual_path" and card["evidence"]
    assert {e["level"] for e in card["evidence"]} == {"document"}
    html = root / "card.html"
    _kira("card", kb, "--image", root / "imgs" / "field.png", "--format", "html", "--out", html)
    assert "<html" in html.read_text().lower()
    assert "Evidence" in _kira("ask", kb, "what is this", "--image", root / "imgs" / "sunset.png", "--card", "text").stdout


def test_bad_input_exits_2(built, tmp_path):
    _, kb, _ = built
    proc = _kira("ask", kb, check=False)
    assert proc.returncode == 2 and "question" in proc.stderr
    proc = _kira("info", tmp_path / "nothing", check=False)
    assert proc.returncode == 2 and "not a kira knowledge base" in proc.stderr


def test_ingest_stores_a_profile_and_ask_can_answer_with_another(built, tmp_path):
    root, _, _ = built
    profile = tmp_path / "colours.toml"
    profile.write_text('name = "colours"\nconcepts = ["warm evening light", "open water"]\n', encoding="utf-8")
    kb = tmp_path / "kb-profile"
    _kira("ingest", kb, root / "imgs", "--quiet", "--profile", profile)
    assert json.loads(_kira("info", kb, "--json").stdout)["profile"] == "colours"
    assert "profile:   colours" in _kira("info", kb).stdout
    card = json.loads(_kira("ask", kb, "orange sunset", "--variant", "query_expansion", "--card", "json").stdout)
    assert set(card["expansions"]) & {"warm evening light", "open water"}
    bad = tmp_path / "bad.toml"
    bad.write_text('colour = "red"\n', encoding="utf-8")
    proc = _kira("ask", kb, "orange sunset", "--profile", bad, check=False)
    assert proc.returncode == 2 and "unknown profile keys" in proc.stderr


def test_ask_with_the_bundled_language_model_as_generator(built, bundled_lm):
    _, kb, _ = built
    card = json.loads(_kira("ask", kb, "the blue sea", "--generator", "lm", "--card", "json",
                            "--variant", "dual_path").stdout)
    assert card["answer"]["generator"].startswith("lm:") and card["answer"]["text"]
    assert set(card["answer"]["citations"]) <= {e["number"] for e in card["evidence"]}
    assert _kira("ask", kb, "the blue sea", "--generator", "gpt", check=False).returncode == 2
