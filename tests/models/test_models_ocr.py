"""OCR with RapidOCR's ONNX models and kira's own pre/post-processing, on real text images."""

from __future__ import annotations

import re

import numpy as np
import pytest
from skimage import data

from kira.models import ocr as ocr_mod
from kira.models.ocr import OcrReader

# What skimage.data.page() shows (a photographed page of the scikit-image tutorial), read by eye.
PAGE_WORDS = ("Region-based segmentation Let us first determine markers of the coins and the background. These "
              "markers are pixels that we can label unambiguously as either object or background. Here, the markers "
              "are found at the two extreme parts of the histogram of grey values: >>> markers = np.zeros_like(coins)")


def word_recall(truth: str, read: str) -> float:
    """Share of the truth's words found in what was read (case and spaces ignored: the model drops some spaces)."""
    words = [w for w in re.findall(r"[a-z0-9]+", truth.lower()) if len(w) > 1]
    squeezed = re.sub(r"[^a-z0-9]", "", read.lower())
    return sum(w in squeezed for w in words) / len(words)


@pytest.fixture(scope="module")
def reader():
    return OcrReader(prefer_cuda=False, threads=2)


def test_reads_the_printed_page(reader):
    page = data.page()
    lines = reader.read(page)
    text = " ".join(line.text for line in lines)
    assert word_recall(PAGE_WORDS, text) >= 0.8, text
    assert word_recall("the cat sat on a mat with quartz jugs", text) < 0.5  # recall is not free
    assert "region" in lines[0].text.lower()  # reading order: the title first
    h, w = page.shape
    for line in lines:
        x0, y0, x1, y1 = line.box
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
        assert 0.5 <= line.score <= 1.0
    ys = [line.box[1] for line in lines]
    assert ys == sorted(ys) or sum(a > b + 5 for a, b in zip(ys, ys[1:])) == 0


def test_flat_image_reads_nothing_and_crops_are_straightened(reader):
    assert reader.read(np.full((200, 300, 3), 200, np.uint8)) == []
    # a page line rotated by 90 degrees is turned back before recognition
    rotated = np.ascontiguousarray(np.rot90(data.page()[5:40, :300]))
    text = reader.text(rotated)
    assert word_recall("Region-based segmentation", text) >= 0.5, text


def test_missing_wheel_names_it(monkeypatch):
    real = ocr_mod.importlib.util.find_spec
    monkeypatch.setattr(ocr_mod.importlib.util, "find_spec",
                        lambda name, *a: None if name == ocr_mod.PACKAGE else real(name, *a))
    with pytest.raises(ImportError, match="pip install --no-deps rapidocr-onnxruntime"):
        OcrReader()


def test_words_read_join_the_description_with_boxes_as_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("KIRA_CACHE_DIR", str(tmp_path / "cache"))
    from kira.knowledge_base.kb import KnowledgeBase
    from kira.models import load_default

    stack = load_default(ocr=True, threads=2)
    assert stack.identity()["ocr"] == "rapidocr-ppocrv4" and "ocr" in stack.providers
    kb = KnowledgeBase.create(tmp_path / "kb", models=stack, levels=("document",))
    kb.add_image(data.page(), doc_id="page", caption="a tutorial page")
    kb.commit()
    row = kb.store.conn.execute("SELECT description FROM chunks WHERE doc_id='page' AND level='document'").fetchone()
    desc = row[0]
    assert desc.startswith("a tutorial page; text: ")  # the user's caption first, then the words read
    assert "unambiguously" in desc
    prov = kb.store.provenance("page")
    assert prov["text_read"] and all(len(line["box"]) == 4 for line in prov["text_read"])
    kb.close()


def test_each_patch_gets_the_lines_read_inside_it(reader):
    from kira.config import ChunkingConfig
    from kira.knowledge_base.chunker import describe, plan_image

    page = np.dstack([data.page()] * 3)
    lines = reader.read(page)
    plan = plan_image(page, None, ChunkingConfig(patch_grid=2), levels=("document", "patch"))
    describe(plan, None, (), None, caption_children=False, lines=lines)
    doc, patches = plan.chunks[0], plan.chunks[1:]
    assert doc.description.startswith("text: ") and "markers" in doc.description
    top_left = patches[0]  # the title's centre is in the top-left quarter
    assert "text: Region" in top_left.description and top_left.embed_text.startswith("text: Region")
    bottom_right = patches[3]
    assert "Region" not in bottom_right.description
