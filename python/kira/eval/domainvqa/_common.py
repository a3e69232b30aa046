"""Helpers the four DomainVQA-R generators share: canvases, noise, caption styles, splits."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

IMAGE_SIZE = 224  # every generated image is IMAGE_SIZE x IMAGE_SIZE RGB (CLIP's input size)

# How often a caption names the finding and the label, names the finding only, or is
# administrative only (patient/date/sheet). Users' captions are uneven; so are these.
CAPTION_STYLES = ("full", "findings", "minimal")
CAPTION_STYLE_P = (0.45, 0.35, 0.20)


def grid(size: int = IMAGE_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """(xx, yy) coordinate grids in [-1, 1], float32, shape (size, size)."""
    axis = np.linspace(-1.0, 1.0, size, dtype=np.float32)
    yy, xx = np.meshgrid(axis, axis, indexing="ij")
    return xx, yy


def ellipse(xx: np.ndarray, yy: np.ndarray, cx: float, cy: float, rx: float, ry: float, soft: float = 0.04) -> np.ndarray:
    """A soft-edged filled ellipse mask in [0, 1]."""
    d = np.sqrt(((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2)
    return np.clip((1.0 - d) / soft + 0.5, 0.0, 1.0).astype(np.float32)


def smooth_noise(rng: np.random.Generator, size: int, sigma: float) -> np.ndarray:
    """Gaussian-filtered white noise scaled to unit standard deviation."""
    field = ndimage.gaussian_filter(rng.standard_normal((size, size)).astype(np.float32), sigma)
    std = float(field.std()) or 1.0
    return (field / std).astype(np.float32)


def gray_to_rgb(values: np.ndarray) -> np.ndarray:
    """float [0, 1] (h, w) -> uint8 (h, w, 3)."""
    u8 = (np.clip(values, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return np.repeat(u8[:, :, None], 3, axis=2)


def float_rgb_to_uint8(values: np.ndarray) -> np.ndarray:
    """float [0, 1] (h, w, 3) -> uint8 (h, w, 3)."""
    return (np.clip(values, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def caption_style(rng: np.random.Generator) -> str:
    """One of CAPTION_STYLES, drawn with CAPTION_STYLE_P."""
    return str(rng.choice(CAPTION_STYLES, p=CAPTION_STYLE_P))


def question_split(n: int) -> tuple[int, int, int]:
    """How many of n questions are retrieval, visual and multi-hop (40/35/25 %)."""
    retrieval = max(1, round(n * 0.40))
    multihop = max(1, round(n * 0.25))
    visual = max(1, n - retrieval - multihop)
    return retrieval, visual, n - retrieval - visual


def spread(n: int, labels: tuple[str, ...]) -> list[str]:
    """n labels assigned round-robin, so every class gets an equal share."""
    return [labels[i % len(labels)] for i in range(n)]
