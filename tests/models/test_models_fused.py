"""FusedImageEncoder: the CNN and the pixel descriptor in one vector whose cosine is their weighted sum."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kira.models.default.pixel_encoder import PixelEncoder
from kira.models.fused import FusedImageEncoder


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from kira.models.cnn.encoder import CnnImageEncoder

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIRA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kira-cache"))
        return CnnImageEncoder(prefer_cuda=False, threads=1), PixelEncoder()


@pytest.fixture(scope="module")
def photos():
    from skimage import data

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [np.ascontiguousarray(getattr(data, n)()) for n in ("chelsea", "coffee", "rocket", "astronaut")]


@pytest.mark.parametrize("w", [0.0, 0.3, 1.0])
def test_fused_cosine_is_the_weighted_sum_of_the_part_cosines(parts, photos, w):
    cnn, pixel = parts
    fused = FusedImageEncoder(cnn, pixel, pixel_weight=w)
    f = fused.encode(photos)
    assert f.shape == (4, cnn.dim + pixel.dim) == (4, fused.dim) and f.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(f, axis=1), 1.0, atol=1e-5)
    c, p = cnn.encode(photos), pixel.encode(photos)
    np.testing.assert_allclose(f @ f.T, (1 - w) * (c @ c.T) + w * (p @ p.T), atol=1e-5)
    assert fused.config.name == f"fused-mobilenet_v2-imagenet-224+{pixel.config.name}-w{w:g}"


def test_fused_boxes_match_the_parts(parts, photos):
    cnn, pixel = parts
    fused = FusedImageEncoder(cnn, pixel, pixel_weight=0.5)
    im = photos[1]  # coffee, 400 x 600
    boxes = [None, (170, 15, 425, 305), (0, 0, 300, 200), (50, 60, 50, 60)]  # the last has no area
    v = fused.encode_boxes(im, boxes)
    assert v.shape == (4, fused.dim)
    np.testing.assert_allclose(v[0], fused.encode([im])[0], atol=1e-5)
    np.testing.assert_allclose(v[:, : cnn.dim] / np.sqrt(0.5), cnn.encode_boxes(im, boxes), atol=1e-5)
    crops = [im, im[15:305, 170:425], im[0:200, 0:300], im[60:61, 50:51]]
    np.testing.assert_allclose(v[:, cnn.dim :] / np.sqrt(0.5), pixel.encode([np.ascontiguousarray(c) for c in crops]),
                               atol=1e-5)
    assert fused.encode_boxes(im, []).shape == (0, fused.dim)
    assert fused.encode([]).shape == (0, fused.dim)


def test_fused_bad_input(parts):
    cnn, pixel = parts
    for bad in (-0.1, 1.5, float("nan"), "half"):
        with pytest.raises(ValueError, match="pixel_weight"):
            FusedImageEncoder(cnn, pixel, pixel_weight=bad)
    with pytest.raises(ValueError, match="wrap a single image"):
        FusedImageEncoder(cnn, pixel).encode(np.zeros((8, 8, 3), np.uint8))


def test_load_default_fused_is_a_named_choice(tmp_path, monkeypatch):
    from kira.models import load_default
    from kira.models.stack import image_encoder_choice

    monkeypatch.setenv("KIRA_CACHE_DIR", str(tmp_path))
    stack = load_default(image_encoder="fused", prefer_cuda=False)
    ident = stack.identity()["image"]
    assert ident.startswith("fused-mobilenet_v2-imagenet-224+kira-pixel") and ident.endswith(f"/{stack.image.dim}")
    assert image_encoder_choice(ident) == "fused"
    assert type(stack.regions).__name__ == "ActivationProposer"  # the CNN's attention, measured better on real masks
    assert load_default(image_encoder=image_encoder_choice(ident), prefer_cuda=False).identity()["image"] == ident


def test_knowledge_base_built_with_the_fused_encoder_reopens_with_it(tmp_path, monkeypatch, photos):
    from kira.knowledge_base.kb import KnowledgeBase
    from kira.models import load_default

    monkeypatch.setenv("KIRA_CACHE_DIR", str(tmp_path / "cache"))
    stack = load_default(image_encoder="fused", prefer_cuda=False)
    kb = KnowledgeBase.create(tmp_path / "kb", models=stack)
    kb.add_image(photos[0], doc_id="cat")
    kb.commit()
    kb.close()
    again = KnowledgeBase.open(tmp_path / "kb")
    try:
        assert again.models.identity()["image"] == stack.identity()["image"]
        with pytest.raises(ValueError, match="fused"):
            again.check_models(load_default(image_encoder="pixel"))
    finally:
        again.close()
