"""Flags and names that agree (issue 34, items 16 and 18): --card on ask and card, the subcommand's
own usage for a wrong option, no HTML on a terminal, absolute sources, `kira ingest --ocr`."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest
from pipeline_fakes import FakeStack

import kira.cli as cli
from kira.knowledge_base import KnowledgeBase


def _save(path, image):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(image)).save(path)
    return path


def test_card_is_one_flag_on_ask_and_card_and_format_is_its_old_name(capsys):
    parser = cli.build_parser()
    assert parser.parse_args(["card", "kb", "q", "--card", "text"]).card == "text"
    assert parser.parse_args(["card", "kb", "q"]).card == "html"
    assert parser.parse_args(["ask", "kb", "q", "--card", "json"]).card == "json"
    assert parser.parse_args(["ask", "kb", "q"]).card is None  # the short answer
    capsys.readouterr()
    assert parser.parse_args(["card", "kb", "q", "--format", "json"]).card == "json"
    assert "--format is the old name of --card; use --card json" in capsys.readouterr().err


def test_a_wrong_option_shows_the_subcommands_usage_not_the_top_level_one(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["card", "kb", "q", "--cards", "text"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: kira card") and "unrecognized arguments: --cards text" in err


def test_an_html_card_is_not_dumped_on_a_terminal(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    for argv in (["card", str(tmp_path), "q"], ["ask", str(tmp_path), "q", "--card", "html"]):
        assert cli.main(argv) == 2  # refused before anything is opened or loaded
        assert "give --out card.html (or redirect stdout to a file)" in capsys.readouterr().err


def test_sources_are_stored_absolute_wherever_ingest_ran(tmp_path, monkeypatch):
    from skimage import data

    monkeypatch.chdir(tmp_path)
    _save(tmp_path / "imgs" / "cat.png", data.chelsea()[:48, :64])
    _save(tmp_path / "one.png", data.coffee()[:48, :64])
    with KnowledgeBase.create("kb", models=FakeStack()) as kb:
        kb.ingest("imgs", progress=False)
        kb.add_image("one.png")
        docs = kb.documents()
        assert docs["cat"].source == str(tmp_path / "imgs" / "cat.png")
        assert docs["one"].source == str(tmp_path / "one.png")
        assert kb.store.provenance("one")["source"] == str(tmp_path / "one.png")


@dataclasses.dataclass
class OcrStack(FakeStack):
    ocr: object = None

    def identity(self) -> dict[str, str]:
        return {"image": "GridColourEncoder", "text": "HashingTextEncoder", "ocr": "OcrReader"}


def test_ingest_ocr_loads_the_stack_with_ocr_and_info_says_so(tmp_path, monkeypatch, capsys):
    from skimage import data

    from kira.models.ocr import OcrNotInstalled, model_dir

    try:
        model_dir()
    except OcrNotInstalled:
        pytest.skip("needs rapidocr-onnxruntime (installed with --no-deps)")

    import kira.models
    from kira.models.ocr import OcrReader

    asked = []

    def load_default(**kwargs):
        asked.append(kwargs)
        return OcrStack(ocr=OcrReader(prefer_cuda=False, threads=2) if kwargs.get("ocr") else None)

    monkeypatch.setattr(kira.models, "load_default", load_default)
    page = _save(tmp_path / "page.png", data.page())
    kb = tmp_path / "kb"
    assert cli.main(["ingest", str(kb), str(page), "--ocr", "--quiet"]) == 0
    assert asked == [{"image_encoder": None, "ocr": True}]
    capsys.readouterr()
    assert cli.main(["info", str(kb)]) == 0
    assert "ocr:       OcrReader" in capsys.readouterr().out
    with KnowledgeBase.open(kb, read_only=True) as opened:
        read = json.dumps(opened.store.provenance("page")["text_read"]).lower()
    assert "segmentation" in read.replace(" ", "")
    assert cli.main(["ingest", str(kb), str(page), "--ocr", "--models", str(tmp_path)]) == 2
    assert "--ocr adds RapidOCR to the default model stack" in capsys.readouterr().err


def test_info_says_when_ocr_is_off(tmp_path, monkeypatch, capsys):
    from pipeline_fakes import photo_kb

    assert cli.main(["info", str(photo_kb(tmp_path))]) == 0
    assert "ocr:       off (kira ingest --ocr reads printed words)" in capsys.readouterr().out
