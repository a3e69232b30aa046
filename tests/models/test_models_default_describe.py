"""Saliency grids, measured attributes and the default captioner."""

from __future__ import annotations

import numpy as np
import pytest

from kira import _core
from kira.models.default.captioner import DefaultCaptioner, question_subject
from kira.models.default.describer import Describer
from kira.models.default.saliency import SaliencyConfig, SaliencyProposer
from kira.models.protocols import Captioner, RegionProposer


def _square(h=180, w=240, box=(140, 20, 230, 100), colour=(230, 40, 30), background=(20, 20, 25)) -> np.ndarray:
    img = np.empty((h, w, 3), dtype=np.uint8)
    img[:] = background
    x0, y0, x1, y1 = box
    img[y0:y1, x0:x1] = colour
    return img


@pytest.fixture(scope="module")
def proposer() -> SaliencyProposer:
    return SaliencyProposer()


def test_grid_shape_range_and_determinism(proposer):
    img = _square()
    g = proposer.propose(img)
    assert isinstance(proposer, RegionProposer)
    assert g.shape == (32, 32) and g.dtype == np.float32
    assert g.min() >= 0.0 and g.max() == pytest.approx(1.0)
    assert np.array_equal(g, SaliencyProposer().propose(img))


def test_uniform_image_has_no_saliency(proposer):
    assert not proposer.propose(np.full((40, 50, 3), 99, dtype=np.uint8)).any()


def test_the_object_is_the_most_salient_area(proposer):
    g = proposer.propose(_square())
    y, x = np.unravel_index(int(np.argmax(g)), g.shape)
    # square spans x 140..230 of 240 (cells 18..30), y 20..100 of 180 (cells 3..17)
    assert 18 <= x <= 30 and 3 <= y <= 17


def test_regions_through_the_core(proposer):
    img = _square()
    boxes, scores, labels = _core.extract_regions(proposer.propose(img), (img.shape[1], img.shape[0]), k_sigma=0.5)
    assert len(boxes) >= 1
    x0, y0, x1, y1 = boxes[0]
    # the top region overlaps the square
    assert x1 > 140 and x0 < 230 and y1 > 20 and y0 < 100


def test_a_prepared_batch_gives_each_image_its_own_grid(proposer):
    """propose_prepared (one FFT and filter pass for the batch) equals propose image by image; a uniform
    image in the batch stays all zeros and does not disturb its neighbours' scaling."""
    from PIL import Image

    rng = np.random.default_rng(3)
    images = [_square(), _square(box=(10, 100, 80, 170), colour=(30, 200, 40)), np.full((64, 64, 3), 90, np.uint8),
              rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)]
    s = proposer.config.work_size
    small = np.stack([np.asarray(Image.fromarray(im).resize((s, s), Image.BILINEAR, reducing_gap=2.0)) for im in images])
    batch = proposer.propose_prepared(small)
    assert batch.shape == (4, proposer.config.grid, proposer.config.grid) and batch.dtype == np.float32
    for grid, image in zip(batch, images):
        np.testing.assert_allclose(grid, proposer.propose(image), atol=1e-6)
    assert not batch[2].any() and batch[0].max() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="uint8"):
        proposer.propose_prepared(small.astype(np.float32))
    with pytest.raises(ValueError, match="uint8"):
        proposer.propose_prepared(small[:, :32])


def test_config_validation():
    with pytest.raises(ValueError):
        SaliencyProposer(SaliencyConfig(work_size=50, grid=32))


@pytest.fixture(scope="module")
def describer(proposer) -> Describer:
    return Describer(proposer)


def test_attributes_of_a_dark_image_with_a_red_square(describer):
    a = describer.describe(_square())
    assert a.brightness < 0.3 and a.brightness_word in ("very dark", "dark")
    assert not a.is_greyscale
    names = [n for n, _ in a.dominant_colours]
    assert names[0] == "black" and "red" in names
    assert a.regions and a.regions[0].location in ("top-right", "right", "top")
    text = a.to_text()
    assert text.startswith("A very dark") and "red" in text and "240x180" in text and "landscape" in text


def test_greyscale_and_orientation(describer):
    stripes = np.zeros((128, 128), dtype=np.uint8)
    stripes[::8] = 255
    stripes[1::8] = 255
    a = describer.describe(stripes)
    assert a.is_greyscale and a.orientation == "horizontal"
    assert "horizontal structures" in a.to_text() and "greyscale" in a.keywords
    b = describer.describe(stripes.T.copy())
    assert b.orientation == "vertical"


def test_contrast_and_texture_words(describer):
    flat = describer.describe(np.full((64, 64, 3), 128, dtype=np.uint8))
    assert flat.contrast_word == "low-contrast" and flat.texture_word == "smooth" and flat.regions == ()
    rng = np.random.default_rng(0)
    noisy = describer.describe(rng.integers(0, 256, size=(96, 96), dtype=np.uint8))
    assert noisy.contrast_word == "high-contrast" and noisy.texture_word == "highly textured"


def test_caption_with_and_without_prompt():
    cap = DefaultCaptioner()
    assert isinstance(cap, Captioner)
    img = _square()
    plain = cap.caption(img)
    prompted = cap.caption(img, "A chest X-ray showing")
    assert plain.startswith("A very dark")
    assert prompted == "A chest X-ray showing a very dark" + plain[len("A very dark") :]


def test_question_subject():
    assert question_subject("Where is the tumour?") == "tumour"
    assert question_subject("Is there a haemorrhage near the optic disc?") == "haemorrhage near optic disc"
    assert question_subject("What is this?") == ""


def test_hypotheses_are_deterministic_grounded_and_bounded():
    cap = DefaultCaptioner()
    img = _square()
    q = "Is there a lesion in the upper right?"
    h = cap.hypotheses(img, q, 4)
    assert len(h) == 4 and h == cap.hypotheses(img, q, 4)
    assert all("lesion" in x.lower() for x in h)
    assert any("top-right" in x or "right" in x for x in h)  # the measured salient region
    assert any("black" in x or "red" in x for x in h)  # measured colours
    assert len(set(h)) == len(h)
    assert cap.hypotheses(None, "Where is the resistor?", 3) == []  # a frame around the question adds nothing
    assert cap.hypotheses(img, q, 0) == [] and cap.hypotheses(None, "what is it?", 3) == []
    with pytest.raises(ValueError):
        cap.hypotheses(None, 42, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("shape", [(1, 1, 3), (1, 5, 3), (5, 1), (2, 2), (3, 300, 3), (400, 2)])
def test_tiny_and_thin_crops_are_described(shape):
    """The knowledge base captions region and patch crops, which can be one pixel thin."""
    img = np.random.default_rng(0).integers(0, 256, size=shape, dtype=np.uint8)
    cap = DefaultCaptioner()
    text = cap.caption(img)
    assert f"({shape[1]}x{shape[0]}," in text
    assert SaliencyProposer().propose(img).shape == (32, 32)
    assert len(cap.hypotheses(img, "where is the cat?", 3)) == 3
