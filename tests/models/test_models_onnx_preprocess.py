"""kira's numpy/Pillow preprocessing against the Hugging Face image processors, pixel for pixel."""

from __future__ import annotations

import numpy as np
import pytest

from kira.models.manifest import ManifestError, Preprocess
from kira.models.onnx._run import run_chunked
from kira.models.preprocess import preprocess_batch, preprocess_from_hf, shortest_edge_size

pytestmark = pytest.mark.models
transformers = pytest.importorskip("transformers")


def _pil(name: str):
    """transformers 5's PIL-backend image processor, or the (PIL-based) slow one of transformers 4."""
    return getattr(transformers, f"{name}Pil", None) or getattr(transformers, name)


def _images() -> list[np.ndarray]:
    from skimage import data

    rng = np.random.default_rng(0)
    astronaut = data.astronaut()  # 512 x 512 RGB, a real photograph
    return [
        astronaut,
        astronaut[40:340, 10:500],  # landscape
        astronaut[0:500, 100:333],  # portrait
        rng.integers(0, 256, (97, 61, 3), dtype=np.uint8),  # odd sizes
        rng.integers(0, 256, (20, 30, 3), dtype=np.uint8),  # smaller than the crop: padded
        data.camera(),  # greyscale 2-d: converted to RGB
    ]


def _processors():
    return [
        _pil("CLIPImageProcessor")(),  # openai CLIP: shortest edge 224 bicubic, crop 224
        _pil("CLIPImageProcessor")(size={"shortest_edge": 64}, crop_size={"height": 48, "width": 56}),
        _pil("ViTImageProcessor")(size={"height": 224, "width": 224}, image_mean=[0.485, 0.456, 0.406],
                             image_std=[0.229, 0.224, 0.225]),  # facebook/dino-vits8
        _pil("BlipImageProcessor")(size={"height": 224, "width": 224}),  # Salesforce/blip2-opt-2.7b
    ]


@pytest.mark.parametrize("index", range(4))
def test_preprocessing_matches_hf_processors(index, tmp_path):
    pytest.importorskip("torch", reason="torch is not installed: pip install 'kira[export]' (the CPU build: --index-url https://download.pytorch.org/whl/cpu); transformers' image processors need it)")
    proc = _processors()[index]
    proc.save_pretrained(tmp_path)
    import json

    config = preprocess_from_hf(json.loads((tmp_path / "preprocessor_config.json").read_text()))
    images = _images()
    if index == 1:  # the small-crop processor also sees an image narrower than its crop after resize
        images.append(np.full((64, 40, 3), 200, np.uint8))
    ours = preprocess_batch(images, config)
    for i, image in enumerate(images):
        rgb = image if image.ndim == 3 else np.stack([image] * 3, axis=-1)
        ref = proc(images=[rgb], return_tensors="np")["pixel_values"][0]
        assert ours[i].shape == ref.shape
        np.testing.assert_allclose(ours[i], ref, atol=1e-5, err_msg=f"image {i}")


def test_preprocess_config_translation():
    clip = preprocess_from_hf({"size": {"shortest_edge": 224}, "do_center_crop": True,
                               "crop_size": {"height": 224, "width": 224}, "resample": 3})
    assert (clip.resize_mode, clip.size, clip.crop, clip.interpolation) == ("shortest_edge", (224, 224),
                                                                             (224, 224), "bicubic")
    vit = preprocess_from_hf({"size": {"height": 224, "width": 224}, "resample": 2, "image_mean": [0.1] * 3,
                              "image_std": [0.2] * 3})
    assert vit.crop is None and vit.interpolation == "bilinear" and vit.mean == (0.1, 0.1, 0.1)
    # openai/clip-vit-large-patch14's legacy config: bare ints, size meaning the shortest edge
    legacy_clip = preprocess_from_hf({"size": 224, "crop_size": 224, "do_center_crop": True, "resample": 3},
                                     default_to_square=False)
    assert (legacy_clip.resize_mode, legacy_clip.crop) == ("shortest_edge", (224, 224))
    legacy = preprocess_from_hf({"size": 384, "resample": 3, "do_normalize": False})
    assert legacy.size == (384, 384) and legacy.mean is None and legacy.output_size == (384, 384)
    with pytest.raises(ManifestError, match="longest_edge"):
        preprocess_from_hf({"size": {"shortest_edge": 800, "longest_edge": 1333}})
    with pytest.raises(ManifestError, match="resample"):
        preprocess_from_hf({"resample": 42})
    with pytest.raises(ManifestError, match="interpolation"):
        Preprocess(interpolation="cubic-ish")
    assert shortest_edge_size(300, 500, 224) == (224, 373)
    assert shortest_edge_size(500, 300, 224) == (373, 224)
    with pytest.raises(ValueError, match="no images"):
        preprocess_batch([], clip)


def test_run_chunked_halves_the_batch_on_out_of_memory():
    seen: list[int] = []

    def fn(s: slice) -> np.ndarray:
        seen.append(s.stop - s.start)
        if s.stop - s.start > 3:
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Failed to allocate memory")
        return np.arange(s.start, s.stop)[:, None]

    out, size = run_chunked(fn, 10, 16)
    assert size == 2 and out[:, 0].tolist() == list(range(10))
    assert seen[:3] == [10, 5, 2]
    with pytest.raises(RuntimeError, match="shape"):
        run_chunked(lambda s: (_ for _ in ()).throw(RuntimeError("bad shape")), 4, 2)
    with pytest.raises(ValueError, match="empty"):
        run_chunked(fn, 0, 4)
