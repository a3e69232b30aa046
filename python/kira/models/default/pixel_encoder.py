"""The pixel descriptor: classical CBIR descriptors, deterministic, no model files (half of the fused default).

Why these four blocks (each is a well-tested CBIR feature, and each covers a failure of
the others):

- **colour**: an HSV histogram with an achromatic axis. Chromatic pixels (saturation and
  value high enough for hue to mean something) fall into hue x saturation x value bins;
  the others into grey-level bins, so greyscale images (scans, drawings, digits)
  still get an 8-level intensity histogram instead of hue noise. Pyramid 1x1 + 2x2:
  the global histogram is invariant to flips and crops; the quadrants add layout.
- **texture**: rotation-invariant uniform local binary patterns (LBP riu2, P = 8) at
  radius 1 and 2. LBP is invariant to monotonic brightness changes, which is what a
  different exposure or scanner gain does, and riu2 is invariant to flips. Pyramid
  1x1 + 2x2.
- **gradient**: unsigned gradient-orientation histograms (HOG-like, 9 bins, magnitude
  weighted, soft-assigned between neighbouring bins) on a 1x1 + 2x2 + 4x4 pyramid:
  shape and structure, which is what separates a digit "1" from a "7" or one
  drawn symbol from another. Cells are normalised by the image's mean gradient
  energy, not per cell, so a flat cell stays flat and global contrast cancels.
- **layout**: an 8 x 8 zero-mean thumbnail of luminance (the MPEG-7 colour-layout
  idea), which keeps the coarse spatial arrangement the histograms throw away.
- **salience**: an 8 x 8 zero-mean grid of the default saliency map (spectral residual
  + centre-surround contrast, kira.models.default.saliency): where the image's
  unexpected structure sits. Luminance layout is dominated by what every image of a
  domain shares (the body, the sheet); salience is dominated by what differs (a
  spot on one side, a fluid level). It keeps its left-right sense
  (salience_mirror_weight 1.0), because which side a finding is on is the finding.

Histograms get the Hellinger (square-root) map, each pyramid level is scaled to unit
length, each block is L2-normalised and weighted, and the concatenation is
L2-normalised, so cosine similarity between two vectors is a weighted sum of
per-block similarities.

Images are first resized with Pillow (antialiased bilinear) to a fixed working size
(64 x 64 by default); all feature extraction then runs in the compiled core
(`kira._core.pixel_descriptor`, cpp/src/pixel_descriptor.cpp) with the GIL released. The
numpy implementation it replaced is kept as the specification in
benchmarks/peers/pixel_reference.py.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kira import _core
from kira.images import ImageLike, load_image


@dataclass(frozen=True)
class PixelEncoderConfig:
    """Everything that fixes the descriptor; two encoders with equal configs agree bit for bit."""

    name: str = "kira-pixel-cbir-v2"  # identity, stored with a knowledge base (v2: + salience block)
    size: int = 64  # working size: every image is resized to size x size first
    hue_bins: int = 8  # chromatic pixels: hue x saturation x value bins
    saturation_bins: int = 2
    value_bins: int = 3
    grey_bins: int = 8  # achromatic pixels: value bins
    min_saturation: float = 0.2  # below this (or below min_value) a pixel counts as grey
    min_value: float = 0.12
    lbp_radii: tuple[int, ...] = (1, 2)  # LBP riu2, 8 neighbours on the square of this radius
    orientation_bins: int = 9  # unsigned gradient orientations over [0, pi)
    colour_levels: tuple[int, ...] = (1, 2)  # spatial pyramid: cells per side at each level
    texture_levels: tuple[int, ...] = (1, 2)
    gradient_levels: tuple[int, ...] = (1, 2, 4)
    layout_grid: int = 8  # layout block: layout_grid x layout_grid luminance thumbnail
    mirror_weight: float = 0.35  # weight of the left-right antisymmetric part (1 = no flip tolerance)
    colour_weight: float = 0.8  # block weights in the final concatenation
    texture_weight: float = 0.8
    gradient_weight: float = 1.0
    layout_weight: float = 0.7
    salience_grid: int = 8  # salience block: salience_grid x salience_grid cells of the saliency map
    salience_mirror_weight: float = 1.0  # left-right sense kept: a right-sided finding is not a left-sided one
    salience_weight: float = 0.5


class PixelEncoder:
    """Deterministic CBIR image encoder (an ImageEncoder): images -> float32 (n, dim) unit rows.

    Thread safety: stateless after construction; `encode` may run in several threads.
    """

    def __init__(self, config: PixelEncoderConfig | None = None) -> None:
        self.config = cfg = config or PixelEncoderConfig()
        if cfg.size < 16 or cfg.size % max(cfg.gradient_levels + cfg.colour_levels + cfg.texture_levels) != 0:
            raise ValueError(f"size {cfg.size} must be >= 16 and divisible by every pyramid level")
        if cfg.size % cfg.layout_grid != 0:
            raise ValueError(f"size {cfg.size} must be divisible by layout_grid {cfg.layout_grid}")
        from kira.models.default.saliency import SaliencyConfig, SaliencyProposer

        # The default saliency map at half the encoder's size (its blurs scaled to match): the block keeps
        # only salience_grid^2 cells, and the surround blur at full size would cost more than all other blocks.
        if cfg.size % (2 * cfg.salience_grid) != 0:
            raise ValueError(f"size {cfg.size} must be divisible by 2 * salience_grid = {2 * cfg.salience_grid}")
        base = SaliencyConfig()
        scale = (cfg.size // 2) / base.work_size
        self.saliency_config = SaliencyConfig(
            work_size=cfg.size // 2, grid=cfg.size // 2, residual_sigma=base.residual_sigma * scale,
            centre_sigma=base.centre_sigma * scale, surround_sigma=base.surround_sigma * scale)
        SaliencyProposer(self.saliency_config)  # validates it
        self.colour_bins = cfg.hue_bins * cfg.saturation_bins * cfg.value_bins + cfg.grey_bins
        self.blocks = {
            "colour": self.colour_bins * _cells(cfg.colour_levels),
            "texture": 10 * len(cfg.lbp_radii) * _cells(cfg.texture_levels),
            "gradient": cfg.orientation_bins * _cells(cfg.gradient_levels),
            "layout": cfg.layout_grid**2,
            "salience": cfg.salience_grid**2,
        }
        self.dim = sum(self.blocks.values())

    # -- input -----------------------------------------------------------------
    def prepare(self, images: Sequence[ImageLike] | np.ndarray) -> np.ndarray:
        """Load and resize a batch: uint8 (n, size, size, 3).

        Raises ValueError for a single image passed where a batch is expected, and
        kira.images.ImageError for unusable items.
        """
        from PIL import Image

        if isinstance(images, np.ndarray):
            if images.ndim == 3 and images.shape[-1] in (3, 4) and images.shape[0] > 4:
                raise ValueError(
                    f"got one array of shape {images.shape}, which looks like a single image; "
                    "pass a list of images or a batch of shape (n, h, w, 3)"
                )
            if images.ndim not in (3, 4):
                raise ValueError(f"a batch array must be (n, h, w) or (n, h, w, 3), got shape {images.shape}")
        elif isinstance(images, (str, bytes)) or not hasattr(images, "__len__"):
            raise ValueError("encode takes a sequence of images (paths, PIL images or arrays); wrap one in a list")
        s = self.config.size
        out = np.empty((len(images), s, s, 3), dtype=np.uint8)
        for i, item in enumerate(images):
            pixels = load_image(item)
            if pixels.shape[0] != s or pixels.shape[1] != s:
                # reducing_gap: integer box reduction first, then antialiased bilinear (Pillow docs)
                pixels = np.asarray(Image.fromarray(pixels).resize((s, s), Image.Resampling.BILINEAR, reducing_gap=2.0))
            out[i] = pixels
        return out

    # -- encoding ----------------------------------------------------------------
    def encode(self, images: Sequence[ImageLike] | np.ndarray) -> np.ndarray:
        """Encode a batch of images (paths, PIL images, uint8/float arrays).

        Returns float32 (n, dim) with unit rows; (0, dim) for an empty batch.
        Raises ValueError / kira.images.ImageError for bad input.
        """
        rgb = self.prepare(images)
        if rgb.shape[0] == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_prepared(rgb)

    def encode_prepared(self, rgb: np.ndarray) -> np.ndarray:
        """Encode uint8 (n, size, size, 3) pixels (the output of `prepare`)."""
        cfg = self.config
        if rgb.dtype != np.uint8 or rgb.ndim != 4 or rgb.shape[1:] != (cfg.size, cfg.size, 3):
            raise ValueError(f"expected uint8 (n, {cfg.size}, {cfg.size}, 3) from prepare(), got {rgb.dtype} {rgb.shape}")
        sal = self.saliency_config
        return _core.pixel_descriptor(
            np.ascontiguousarray(rgb), _colour_table(cfg),
            colour_bins=self.colour_bins, colour_levels=list(cfg.colour_levels), lbp_radii=list(cfg.lbp_radii),
            texture_levels=list(cfg.texture_levels), orientation_bins=cfg.orientation_bins,
            gradient_levels=list(cfg.gradient_levels), layout_grid=cfg.layout_grid, salience_grid=cfg.salience_grid,
            mirror_weight=cfg.mirror_weight, salience_mirror_weight=cfg.salience_mirror_weight,
            weights=[cfg.colour_weight, cfg.texture_weight, cfg.gradient_weight, cfg.layout_weight, cfg.salience_weight],
            saliency_grid=sal.grid, residual_filter=sal.residual_filter, residual_sigma=sal.residual_sigma,
            centre_sigma=sal.centre_sigma, surround_sigma=sal.surround_sigma, residual_weight=sal.residual_weight,
        )


@functools.lru_cache(maxsize=8)
def _colour_table(cfg: PixelEncoderConfig) -> np.ndarray:
    """int32 (32768,): colour bin of each 5-bit-per-channel RGB value (centre of its cube)."""
    levels = (np.arange(32, dtype=np.float32) * 8 + 4) / 255.0
    r, g, b = np.meshgrid(levels, levels, levels, indexing="ij")
    return _hsv_bins(r.ravel(), g.ravel(), b.ravel(), cfg)


def _hsv_bins(r: np.ndarray, g: np.ndarray, b: np.ndarray, cfg: PixelEncoderConfig) -> np.ndarray:
    """Colour bin per pixel: hue x saturation x value for chromatic pixels, else a grey level."""
    mx = np.maximum(np.maximum(r, g), b)
    mn = np.minimum(np.minimum(r, g), b)
    delta = mx - mn
    sat = delta / np.maximum(mx, 1e-6)
    safe = np.maximum(delta, 1e-6)
    # hue in [0, 6): the standard hexcone formula, branch-free
    hue = np.where(mx == r, (g - b) / safe, np.where(mx == g, (b - r) / safe + 2.0, (r - g) / safe + 4.0))
    hue = np.mod(hue, 6.0) * np.float32(1.0 / 6.0)
    h_bin = np.minimum((hue * cfg.hue_bins).astype(np.int32), cfg.hue_bins - 1)
    s_norm = (sat - cfg.min_saturation) / (1.0 - cfg.min_saturation)
    s_bin = np.clip((s_norm * cfg.saturation_bins).astype(np.int32), 0, cfg.saturation_bins - 1)
    v_bin = np.minimum((mx * cfg.value_bins).astype(np.int32), cfg.value_bins - 1)
    chroma = (h_bin * cfg.saturation_bins + s_bin) * cfg.value_bins + v_bin
    grey_bin = np.minimum((mx * cfg.grey_bins).astype(np.int32), cfg.grey_bins - 1)
    is_grey = (sat < cfg.min_saturation) | (mx < cfg.min_value)
    n_chroma = cfg.hue_bins * cfg.saturation_bins * cfg.value_bins
    bins = np.where(is_grey, n_chroma + grey_bin, chroma)
    return bins.astype(np.int32)


def _cells(levels: Sequence[int]) -> int:
    return sum(c * c for c in levels)
