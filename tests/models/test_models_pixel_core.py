"""The pixel descriptor and saliency maps in kira._core against their numpy specification
(benchmarks/peers/pixel_reference.py), on real photos, crops, digits, scans and edge cases; and the
binding's handling of bad input and the GIL."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from PIL import Image

from kira import _core
from kira.models.default.pixel_encoder import PixelEncoder, PixelEncoderConfig, _colour_table
from kira.models.default.saliency import SaliencyConfig, SaliencyProposer
from benchmarks.peers.pixel_reference import real_images, reference_encode_prepared, reference_saliency

PARITY = 1e-5  # max abs difference per vector entry


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    return real_images()


@pytest.mark.parametrize("config", [
    PixelEncoderConfig(),
    PixelEncoderConfig(size=48),  # half size 24: the FFT is not a power of two
    PixelEncoderConfig(size=32, lbp_radii=(1,), gradient_levels=(1, 4), colour_levels=(1, 2, 4), mirror_weight=1.0,
                       salience_mirror_weight=0.5, salience_grid=4, layout_grid=4),
], ids=["default", "size48", "other-levels"])
def test_core_rows_equal_the_numpy_specification(images, config):
    encoder = PixelEncoder(config)
    rgb = encoder.prepare(images)
    core = encoder.encode_prepared(rgb)
    reference = reference_encode_prepared(encoder, rgb)
    assert core.shape == reference.shape == (len(images), encoder.dim) and core.dtype == np.float32
    worst = float(np.abs(core - reference).max())
    assert worst < PARITY, f"max abs difference {worst:.3g}"
    assert np.allclose(np.linalg.norm(core, axis=1), 1.0, atol=1e-5)


def test_core_saliency_equals_the_numpy_specification(images):
    proposer = SaliencyProposer()
    s = proposer.config.work_size
    small = np.stack([np.asarray(Image.fromarray(img).convert("RGB").resize((s, s))) for img in images])
    core = proposer.propose_prepared(small)
    reference = reference_saliency(proposer.config, small)
    assert core.shape == (len(images), 32, 32) and core.dtype == np.float32
    assert float(np.abs(core - reference).max()) < PARITY
    assert not core[-1].any() and core[0].max() == 1.0  # the uniform image is all zeros; a photo spans [0, 1]


def test_a_zero_sigma_leaves_that_blur_out_as_scipy_does(images):
    config = SaliencyConfig(centre_sigma=0.0, residual_sigma=0.0)
    proposer = SaliencyProposer(config)
    small = np.stack([np.asarray(Image.fromarray(img).convert("RGB").resize((64, 64))) for img in images[:12]])
    assert float(np.abs(proposer.propose_prepared(small) - reference_saliency(config, small)).max()) < PARITY


def test_one_image_alone_equals_it_in_a_batch(images):
    encoder = PixelEncoder()
    rgb = encoder.prepare(images[:20])
    batch = encoder.encode_prepared(rgb)
    np.testing.assert_array_equal(encoder.encode_prepared(rgb[7:8])[0], batch[7])


def _descriptor_args(encoder: PixelEncoder) -> dict:
    cfg, sal = encoder.config, encoder.saliency_config
    return dict(colour_bins=encoder.colour_bins, colour_levels=cfg.colour_levels, lbp_radii=cfg.lbp_radii,
                texture_levels=cfg.texture_levels, orientation_bins=cfg.orientation_bins,
                gradient_levels=cfg.gradient_levels, layout_grid=cfg.layout_grid, salience_grid=cfg.salience_grid,
                mirror_weight=cfg.mirror_weight, salience_mirror_weight=cfg.salience_mirror_weight,
                weights=(0.8, 0.8, 1.0, 0.7, 0.5), saliency_grid=sal.grid, residual_filter=sal.residual_filter,
                residual_sigma=sal.residual_sigma, centre_sigma=sal.centre_sigma, surround_sigma=sal.surround_sigma,
                residual_weight=sal.residual_weight)


def test_bad_input_gets_an_error_naming_the_fix():
    encoder = PixelEncoder()
    table, args = _colour_table(encoder.config), _descriptor_args(encoder)
    good = np.zeros((2, 64, 64, 3), np.uint8)
    with pytest.raises(TypeError, match="dtype float32, expected uint8"):
        _core.pixel_descriptor(good.astype(np.float32), table, **args)
    with pytest.raises(TypeError, match="must be a numpy uint8 array"):
        _core.pixel_descriptor(good.tolist(), table, **args)
    with pytest.raises(ValueError, match=r"shape \(n, size, size, 3\), got \(2, 64, 63, 3\)"):
        _core.pixel_descriptor(np.zeros((2, 64, 63, 3), np.uint8), table, **args)
    with pytest.raises(ValueError, match="not C-contiguous"):
        _core.pixel_descriptor(np.zeros((2, 64, 128, 3), np.uint8)[:, :, ::2], table, **args)
    with pytest.raises(ValueError, match="32768 entries"):
        _core.pixel_descriptor(good, table[:100], **args)
    with pytest.raises(ValueError, match="outside"):
        _core.pixel_descriptor(good, np.full(32768, 99, np.int32), **args)
    with pytest.raises(TypeError, match="int32"):
        _core.pixel_descriptor(good, table.astype(np.int64), **args)
    with pytest.raises(ValueError, match="divisible by every pyramid level"):
        _core.pixel_descriptor(np.zeros((1, 66, 66, 3), np.uint8), table, **args)
    with pytest.raises(ValueError, match="5 block weights"):
        _core.pixel_descriptor(good, table, **{**args, "weights": (1.0, 1.0)})
    with pytest.raises(ValueError, match="multiple of grid"):
        _core.saliency_maps(np.zeros((1, 40, 40, 3), np.uint8), grid=32, residual_filter=3, residual_sigma=3.0,
                            centre_sigma=1.0, surround_sigma=8.0, residual_weight=0.35)
    with pytest.raises(ValueError, match="residual_weight"):
        _core.saliency_maps(good, grid=32, residual_filter=3, residual_sigma=3.0, centre_sigma=1.0,
                            surround_sigma=8.0, residual_weight=1.5)
    with pytest.raises(ValueError, match="expected uint8"):  # the library's own check names prepare()
        encoder.encode_prepared(good.astype(np.float32))


def test_the_gil_is_released_while_the_core_computes(images):
    """With a long switch interval the other thread can run only while this one has released
    the GIL, so every step it counts before `returned` is set happened during the call."""
    encoder = PixelEncoder()
    rgb = np.ascontiguousarray(np.repeat(encoder.prepare(images[:8]), 48, axis=0))  # 384 images
    go, state = threading.Event(), {"returned": False, "during": 0}

    def other() -> None:
        go.wait()
        for _ in range(20000):
            if not state["returned"]:
                state["during"] += 1

    previous = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        thread = threading.Thread(target=other)
        thread.start()
        go.set()
        encoder.encode_prepared(rgb)
        state["returned"] = True
        thread.join()
    finally:
        sys.setswitchinterval(previous)
    assert state["during"] > 0
