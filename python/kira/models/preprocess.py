"""Image preprocessing in numpy + Pillow that matches the Hugging Face image processors.

CLIPImageProcessor: resize the shortest side to `size` (bicubic), center crop, rescale
by 1/255, normalise. ViTImageProcessor (DINO) and BlipImageProcessor: resize to exactly
height x width, no crop, rescale, normalise. Pillow does the resampling, as the HF
processors' PIL backend does, so the pixels agree to float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kira.images import ImageLike, load_image
from kira.models.manifest import ManifestError, Preprocess

PIL_RESAMPLE_NAMES = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}


def _resample(name: str) -> int:
    from PIL import Image

    return {
        "nearest": Image.Resampling.NEAREST,
        "lanczos": Image.Resampling.LANCZOS,
        "bilinear": Image.Resampling.BILINEAR,
        "bicubic": Image.Resampling.BICUBIC,
        "box": Image.Resampling.BOX,
        "hamming": Image.Resampling.HAMMING,
    }[name]


def shortest_edge_size(height: int, width: int, edge: int) -> tuple[int, int]:
    """(height, width) after resizing the shorter side to `edge`, as transformers rounds it (floor)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = edge, int(edge * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def center_crop(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Center-crop (h, w, c) to height x width, zero-padding first where the image is smaller."""
    h, w = image.shape[:2]
    if height > h or width > w:
        top, left = max(height - h, 0) // 2, max(width - w, 0) // 2
        bottom, right = (max(height - h, 0) + 1) // 2, (max(width - w, 0) + 1) // 2
        image = np.pad(image, ((top, bottom), (left, right), (0, 0)))
        h, w = image.shape[:2]
    top, left = int((h - height) / 2.0), int((w - width) / 2.0)
    return image[top : top + height, left : left + width]


def preprocess_image(image: ImageLike, config: Preprocess) -> np.ndarray:
    """One image -> float32 (3, H, W) model input under `config`. Raises kira.images.ImageError."""
    from PIL import Image

    pixels = load_image(image)
    h, w = pixels.shape[:2]
    if config.resize_mode != "none":
        if config.resize_mode == "shortest_edge":
            nh, nw = shortest_edge_size(h, w, config.size[0])
        else:
            nh, nw = config.size
        if (nh, nw) != (h, w):
            pixels = np.asarray(Image.fromarray(pixels).resize((nw, nh), resample=_resample(config.interpolation)))
    if config.crop is not None:
        pixels = center_crop(pixels, *config.crop)
    out: np.ndarray = pixels.astype(np.float32)
    if config.rescale is not None:
        out = (pixels.astype(np.float64) * config.rescale).astype(np.float32)
    if config.mean is not None and config.std is not None:
        out = (out - np.asarray(config.mean, np.float32)) / np.asarray(config.std, np.float32)
    return np.ascontiguousarray(out.transpose(2, 0, 1), dtype=np.float32)


def preprocess_batch(images: Sequence[ImageLike], config: Preprocess) -> np.ndarray:
    """Images -> float32 (n, 3, H, W). Raises ValueError for an empty batch."""
    if len(images) == 0:
        raise ValueError("no images given: pass at least one image")
    return np.stack([preprocess_image(im, config) for im in images])


def _size_pair(size: Any, what: str, default_to_square: bool = True) -> tuple[str, tuple[int, int]]:
    if isinstance(size, int):
        # transformers' get_size_dict: a bare int is the shortest edge for CLIP-style processors
        return ("exact" if default_to_square else "shortest_edge"), (size, size)
    if isinstance(size, dict):
        if "shortest_edge" in size:
            edge = int(size["shortest_edge"])
            return "shortest_edge", (edge, edge)
        if "height" in size and "width" in size:
            return "exact", (int(size["height"]), int(size["width"]))
    raise ManifestError(f"cannot read {what} {size!r} from the preprocessor config")


def preprocess_from_hf(config: dict[str, Any], *, default_to_square: bool = True) -> Preprocess:
    """Translate a Hugging Face preprocessor_config.json (as a dict) into a Preprocess.

    default_to_square: how a bare integer `size` reads, as in transformers' get_size_dict:
    True (ViT, BLIP) -> resize to size x size; False (CLIP) -> shortest edge.
    Raises ManifestError for settings kira cannot reproduce (shortest+longest edge, padding).
    """
    if config.get("do_pad"):
        raise ManifestError("preprocessor configs with do_pad are not supported")
    resize_mode, size = "none", (0, 0)
    if config.get("do_resize", True):
        size_field = config.get("size", 224)
        if isinstance(size_field, dict) and "longest_edge" in size_field:
            raise ManifestError("preprocessor configs with a longest_edge are not supported")
        resize_mode, size = _size_pair(size_field, "size", default_to_square)
    crop = None
    if config.get("do_center_crop", False):
        crop = _size_pair(config.get("crop_size", size[0]), "crop_size")[1]
    resample = config.get("resample", 2)
    if resample not in PIL_RESAMPLE_NAMES:
        raise ManifestError(f"unknown resample code {resample!r} in the preprocessor config")
    normalize = config.get("do_normalize", True)
    mean = tuple(float(v) for v in config.get("image_mean", (0.5, 0.5, 0.5))) if normalize else None
    std = tuple(float(v) for v in config.get("image_std", (0.5, 0.5, 0.5))) if normalize else None
    return Preprocess(
        resize_mode=resize_mode,
        size=size,
        crop=crop,
        interpolation=PIL_RESAMPLE_NAMES[resample],
        rescale=float(config.get("rescale_factor", 1 / 255)) if config.get("do_rescale", True) else None,
        mean=mean,  # type: ignore[arg-type]
        std=std,  # type: ignore[arg-type]
    )
