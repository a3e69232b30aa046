"""The CNN fused with the pixel descriptor: one vector whose cosine is a weighted sum of the two cosines.

The fused vector of an image is [sqrt(1 - w) * c, sqrt(w) * p], with c the CNN's and p the
pixel descriptor's unit vectors and w the pixel part's weight. It has unit norm, and the
cosine of two fused vectors is (1 - w) cos(c1, c2) + w cos(p1, p2): concatenation is score
fusion, so every index and the knowledge base handle it as any other image encoder.

The CNN's regions, tags and box pooling (one forward pass per image) are unchanged; the
pixel part of a region or patch is the descriptor of its crop (the descriptor is cheap).
`benchmarks/studies/compare_fused_encoder.py` measures it against both parts alone.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kira.images import ImageLike, load_image

logger = logging.getLogger(__name__)

DEFAULT_PIXEL_WEIGHT = 0.5  # chosen on Fashion-MNIST training images only (compare_fused_encoder.py)


@dataclass(frozen=True)
class FusedConfig:
    """Identity of a fused encoder; travels with the knowledge base."""

    name: str
    pixel_weight: float


class FusedImageEncoder:
    """CNN + pixel descriptor -> float32 (n, cnn.dim + pixel.dim) unit rows (an ImageEncoder).

    Parameters: cnn (a CnnImageEncoder, or anything with `encode`, `dim`, `config.name`
    and optionally `encode_boxes`), pixel (a PixelEncoder, likewise), pixel_weight (w in
    [0, 1], the pixel cosine's share of the fused cosine; default 0.5).
    Raises ValueError for a weight outside [0, 1] (or not a number).
    Thread safety: as its parts (both may run in several threads).
    """

    def __init__(self, cnn, pixel, *, pixel_weight: float = DEFAULT_PIXEL_WEIGHT) -> None:
        try:
            w = float(pixel_weight)
        except (TypeError, ValueError):
            raise ValueError(f"pixel_weight must be a number in [0, 1], got {pixel_weight!r}") from None
        if not 0.0 <= w <= 1.0 or math.isnan(w):
            raise ValueError(f"pixel_weight must be in [0, 1] (the pixel cosine's share), got {pixel_weight!r}")
        self.cnn, self.pixel = cnn, pixel
        self.dim = int(cnn.dim) + int(pixel.dim)
        self._scale = (np.float32(math.sqrt(1.0 - w)), np.float32(math.sqrt(w)))
        self.config = FusedConfig(name=f"fused-{cnn.config.name}+{pixel.config.name}-w{w:g}", pixel_weight=w)

    def _join(self, c: np.ndarray, p: np.ndarray) -> np.ndarray:
        out = np.concatenate([_unit(c) * self._scale[0], _unit(p) * self._scale[1]], axis=1)
        return np.ascontiguousarray(out, dtype=np.float32)

    def encode(self, images: Sequence[ImageLike]) -> np.ndarray:
        """Fused vectors of `images`, float32 (n, dim) with unit rows; (0, dim) for []."""
        if isinstance(images, np.ndarray) and images.ndim == 3:
            raise ValueError("encode takes a sequence of images; wrap a single image in a list")
        images = [load_image(im) for im in images]
        if not images:
            return np.zeros((0, self.dim), np.float32)
        return self._join(self.cnn.encode(images), self.pixel.encode(images))

    def encode_boxes(self, image: ImageLike, boxes: Sequence[tuple[int, int, int, int] | None]) -> np.ndarray:
        """Fused vectors of boxes of one image, float32 (len(boxes), dim), unit rows.

        A box is (x0, y0, x1, y1) in the image's pixels (x1, y1 exclusive); None is the
        whole image (equal to `encode([image])[0]`). The CNN part comes from one forward
        pass (when the CNN offers `encode_boxes`), the pixel part from each crop; a box
        with no area gives the pixel at its corner.
        """
        pixels = load_image(image)
        boxes = list(boxes)
        if not boxes:
            return np.zeros((0, self.dim), np.float32)
        h, w = pixels.shape[:2]
        crops = []
        for box in boxes:
            if box is None:
                crops.append(pixels)
                continue
            x0, y0, x1, y1 = (int(v) for v in box)
            x0, y0 = min(max(0, x0), w - 1), min(max(0, y0), h - 1)  # a degenerate box: its one pixel,
            x1, y1 = max(min(w, x1), x0 + 1), max(min(h, y1), y0 + 1)  # as the CNN pools its one cell
            crops.append(np.ascontiguousarray(pixels[y0:y1, x0:x1]))
        boxed = getattr(self.cnn, "encode_boxes", None)
        c = boxed(pixels, boxes) if callable(boxed) else self.cnn.encode(crops)
        return self._join(c, self.pixel.encode(crops))


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
