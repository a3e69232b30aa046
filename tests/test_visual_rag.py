"""The visual-rag reference API on kira, with the embedded default stack."""

from __future__ import annotations

import numpy as np
import pytest

from kira import VisualRAG


@pytest.fixture(scope="session")
def rag():
    from skimage import data

    r = VisualRAG()
    r.add_image("img_cat", data.chelsea(), tags=["cat", "pet"], caption="an orange tabby cat sitting indoors")
    r.add_image("img_coffee", data.coffee(), tags=["drink"], caption="a cup of coffee on a saucer")
    r.add_image("img_rocket", data.rocket(), tags=["space"], caption="a rocket on the launch pad")
    r.build()
    yield r
    r.close()


def test_text_query_reference_usage(rag):
    out = rag.answer("an orange cat indoors", top_k=2)
    assert out.results[0].image_id == "img_cat"
    assert len(out.results) <= 2
    rendered = out.context.render()
    assert rendered.startswith("[img_cat] score=") and all(f"[{r.image_id}]" in rendered for r in out.results)
    assert "cat" in out.answer.text.lower() and "[img_cat]" in out.answer.text
    assert "[Evidence" not in out.answer.text
    assert out.answer.citations[0] == "img_cat"  # cited image ids, in rank order
    assert set(out.answer.citations) <= set(out.context.image_ids)
    assert out.answer.kira.citations and set(out.answer.kira.citations) <= set(out.context.pack.numbers)


def test_probe_image_and_path(rag, tmp_path):
    from PIL import Image
    from skimage import data

    out = rag.answer(data.coffee(), top_k=2)
    assert out.results[0].image_id == "img_coffee" and out.query is None
    near = np.ascontiguousarray(data.chelsea()[20:-20, 30:-30][:, ::-1])  # a cropped mirror of a stored image
    assert rag.answer(near, top_k=2).results[0].image_id == "img_cat"
    path = tmp_path / "probe.png"
    Image.fromarray(data.rocket()).save(path)
    assert rag.answer(str(path), top_k=1).results[0].image_id == "img_rocket"


def test_duplicate_id_and_answer_before_build(tmp_path):
    r = VisualRAG(path=tmp_path / "kb")
    try:
        r.add_image("a", np.zeros((16, 16, 3), np.uint8), caption="black")
        with pytest.raises(ValueError, match="already"):
            r.add_image("a", np.zeros((16, 16, 3), np.uint8))
        with pytest.raises(ValueError, match="build"):
            r.answer("black")
        r.build()
        assert r.answer("black").results[0].image_id == "a"
    finally:
        r.close()
    reopened = VisualRAG(path=tmp_path / "kb")  # persistent when given a path
    try:
        assert reopened.answer("black", top_k=1).results[0].image_id == "a"
    finally:
        reopened.close()
