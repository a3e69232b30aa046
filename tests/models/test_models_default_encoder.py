"""The default pixel encoder: shapes, inputs, determinism, and the flip/brightness design."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from kira.images import ImageError
from kira.models.default.pixel_encoder import PixelEncoder, PixelEncoderConfig
from kira.models.protocols import ImageEncoder


@pytest.fixture(scope="module")
def encoder() -> PixelEncoder:
    return PixelEncoder()


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(6):
        base = rng.integers(0, 256, size=(3,), dtype=np.uint8)
        img = np.tile(base, (120, 160, 1))
        img[20 + 10 * i : 60 + 10 * i, 30:90] = rng.integers(0, 256, size=(3,))
        img = np.clip(img.astype(int) + rng.integers(-20, 21, size=img.shape), 0, 255).astype(np.uint8)
        out.append(img)
    return out


def test_shape_dtype_and_unit_rows(encoder, images):
    v = encoder.encode(images)
    assert isinstance(encoder, ImageEncoder)
    assert v.shape == (len(images), encoder.dim) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert encoder.dim == sum(encoder.blocks.values())


def test_empty_batch(encoder):
    out = encoder.encode([])
    assert out.shape == (0, encoder.dim) and out.dtype == np.float32


def test_array_pil_and_path_give_the_same_vector(encoder, images, tmp_path):
    path = tmp_path / "img.png"
    Image.fromarray(images[0]).save(path)
    v = encoder.encode([images[0], Image.fromarray(images[0]), str(path), path])
    assert np.array_equal(v[0], v[1]) and np.array_equal(v[0], v[2]) and np.array_equal(v[0], v[3])


def test_batch_array_and_list_agree(encoder, images):
    batch = np.stack(images)
    assert np.array_equal(encoder.encode(batch), encoder.encode(images))


def test_deterministic_and_batch_independent(images):
    a = PixelEncoder().encode(images)
    b = PixelEncoder().encode(images[::-1])[::-1]
    assert np.array_equal(a, b)


def test_greyscale_float_and_tiny_inputs(encoder):
    grey = np.linspace(0, 1, 50 * 70, dtype=np.float32).reshape(50, 70)
    tiny = np.full((1, 1, 3), 200, dtype=np.uint8)
    v = encoder.encode([grey, tiny])
    assert np.isfinite(v).all() and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_single_image_array_is_refused(encoder, images):
    with pytest.raises(ValueError, match="single image"):
        encoder.encode(images[0])
    with pytest.raises(ValueError, match="sequence"):
        encoder.encode("a/path.png")


def test_bad_items_raise_image_error(encoder, tmp_path):
    with pytest.raises(ImageError):
        encoder.encode([np.full((10, 10, 3), np.nan)])
    with pytest.raises(ImageError):
        encoder.encode([tmp_path / "missing.png"])


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="divisible"):
        PixelEncoder(PixelEncoderConfig(size=60))


def test_flip_matches_the_mirror_formula(encoder, images):
    """cos(f(x), f(flip x)) is high by design (antisymmetric part weighted 0.35), but not 1."""
    v = encoder.encode([images[1], images[1][:, ::-1]])
    cos = float(v[0] @ v[1])
    assert 0.8 < cos < 0.9999
    invariant = PixelEncoder(PixelEncoderConfig(mirror_weight=0.0, salience_mirror_weight=0.0))
    v = invariant.encode([images[1], images[1][:, ::-1]])
    assert float(v[0] @ v[1]) == pytest.approx(1.0, abs=1e-5)


def _film(side: str, seed: int) -> np.ndarray:
    """A symmetric grey 'chest' with a bright blob low on one side and fresh noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:128, 0:128]
    img = 90.0 + 60.0 * np.exp(-(((xx - 64) / 40.0) ** 2))  # symmetric about the midline
    cx = 36 if side == "left" else 92
    img += 80.0 * np.exp(-(((xx - cx) ** 2 + (yy - 92) ** 2) / (2 * 9.0**2)))
    img += rng.normal(0.0, 6.0, img.shape)
    return np.repeat(np.clip(img, 0, 255).astype(np.uint8)[:, :, None], 3, axis=2)


def test_salience_keeps_the_side_of_a_finding(encoder):
    """A left-sided blob is nearer a left-sided one than the mirror-image right-sided one, and more so than
    without the salience block (whose flip tolerance is what lets the other blocks blur the side)."""
    query, same, mirrored = _film("left", 1), _film("left", 2), _film("right", 3)
    assert encoder.blocks["salience"] == encoder.config.salience_grid**2
    without = PixelEncoder(PixelEncoderConfig(salience_weight=0.0))

    def margin(enc: PixelEncoder) -> float:
        v = enc.encode([query, same, mirrored])
        return float(v[0] @ v[1] - v[0] @ v[2])

    assert margin(encoder) > 0.05
    assert margin(encoder) > 2 * margin(without)


def test_same_image_is_closer_than_a_different_one(encoder, images):
    v = encoder.encode(images)
    bright = encoder.encode([np.clip(images[2].astype(np.float32) * 1.2, 0, 255).astype(np.uint8)])[0]
    sims = v @ bright
    assert int(np.argmax(sims)) == 2
