"""The default region proposer: a saliency grid for kira._core.extract_regions, no DINO needed.

Two classical, training-free cues, each scaled to [0, 1] and averaged:

- **spectral residual** (Hou & Zhang, CVPR 2007): the log-amplitude spectrum minus its
  local average keeps what is "unexpected" in the image; transformed back with the
  original phase and smoothed, it lights up objects against repetitive background.
- **centre-surround colour contrast** (in the spirit of Itti-Koch and Achanta's
  frequency-tuned saliency): the distance of each smoothed pixel's colour (an
  opponent-colour space with luminance) from a heavily blurred surround.

Both run on a small working image (64 x 64 by default) and are pooled to the output
grid (32 x 32 by default) by block means, so the result is the same shape for every
image, float32 and deterministic. The KIRA threshold (mean + 0.5 std) and connected
components are then the core's job (`extract_regions`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kira.images import ImageLike, load_image


@dataclass(frozen=True)
class SaliencyConfig:
    """Working and output sizes and the smoothing of the two saliency cues."""

    name: str = "kira-saliency-sr-cs-v1"
    grid: int = 32  # output grid side: the attention map handed to extract_regions
    work_size: int = 64  # the image is resized to work_size x work_size first
    residual_filter: int = 3  # side of the box filter averaging the log spectrum
    residual_sigma: float = 3.0  # Gaussian blur of the spectral-residual map (working pixels)
    centre_sigma: float = 1.0  # centre: light blur of the colour image
    surround_sigma: float = 8.0  # surround: heavy blur of the colour image
    residual_weight: float = 0.35  # mix of the two cues; colour contrast gets 1 - this


class SaliencyProposer:
    """Image -> float32 (grid, grid) saliency in [0, 1] (a RegionProposer).

    Thread safety: stateless; `propose` may run in several threads.
    """

    def __init__(self, config: SaliencyConfig | None = None) -> None:
        self.config = cfg = config or SaliencyConfig()
        if cfg.work_size % cfg.grid != 0:
            raise ValueError(f"work_size {cfg.work_size} must be a multiple of grid {cfg.grid}")
        if not 0.0 <= cfg.residual_weight <= 1.0:
            raise ValueError(f"residual_weight must be in [0, 1], got {cfg.residual_weight}")

    def propose(self, image: ImageLike) -> np.ndarray:
        """Saliency grid of one image (array, PIL image or path).

        Returns float32 (grid, grid) in [0, 1], higher = more salient; all zeros for a
        perfectly uniform image. Raises kira.images.ImageError for unusable input.
        """
        from PIL import Image

        cfg = self.config
        pixels = load_image(image)
        s = cfg.work_size
        small = np.asarray(Image.fromarray(pixels).resize((s, s), Image.Resampling.BILINEAR, reducing_gap=2.0))
        return self.propose_prepared(small[None])[0]

    def propose_prepared(self, small: np.ndarray) -> np.ndarray:
        """Saliency grids of a batch already at the working size: uint8 (n, work_size, work_size, 3).

        Returns float32 (n, grid, grid), each as `propose` gives it; the whole batch goes
        through one FFT and one filter pass per cue (the pixel encoder's salience block).
        Raises ValueError for another shape or dtype.
        """
        from scipy import ndimage

        cfg = self.config
        s = cfg.work_size
        if small.dtype != np.uint8 or small.ndim != 4 or small.shape[1:] != (s, s, 3):
            raise ValueError(f"expected uint8 (n, {s}, {s}, 3), got {small.dtype} {small.shape}")
        n = small.shape[0]
        flat = small.reshape(n, -1)
        uniform = flat.max(axis=1) == flat.min(axis=1)  # nothing stands out
        rgb = small.astype(np.float32) / 255.0
        grey = 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]

        spectrum = np.fft.fft2(grey, axes=(1, 2))
        log_amp = np.log(np.abs(spectrum) + 1e-8)
        f = cfg.residual_filter
        residual = log_amp - ndimage.uniform_filter(log_amp, size=(1, f, f), mode="wrap")
        sr = np.abs(np.fft.ifft2(np.exp(residual + 1j * np.angle(spectrum)), axes=(1, 2))) ** 2
        sr = ndimage.gaussian_filter(sr, (0, cfg.residual_sigma, cfg.residual_sigma), mode="nearest")

        # opponent colours: luminance, red-green, blue-yellow
        r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
        opp = np.stack([grey, r - g, 0.5 * (r + g) - b], axis=-1)
        centre = ndimage.gaussian_filter(opp, (0, cfg.centre_sigma, cfg.centre_sigma, 0), mode="nearest")
        surround = ndimage.gaussian_filter(opp, (0, cfg.surround_sigma, cfg.surround_sigma, 0), mode="nearest")
        cs = np.sqrt(((centre - surround) ** 2).sum(axis=-1))

        w = cfg.residual_weight
        sal = w * _unit_range(sr) + (1.0 - w) * _unit_range(cs)
        k = s // cfg.grid
        grid = _unit_range(sal.reshape(n, cfg.grid, k, cfg.grid, k).mean(axis=(2, 4)))
        grid[uniform] = 0.0
        return grid.astype(np.float32, copy=False)


def _unit_range(x: np.ndarray) -> np.ndarray:
    """Each batch item (axis 0) scaled to [0, 1] on its own; a constant item becomes zeros."""
    axes = tuple(range(1, x.ndim))
    lo, hi = x.min(axis=axes, keepdims=True), x.max(axis=axes, keepdims=True)
    span = hi - lo
    flat = span < 1e-12
    return np.where(flat, 0.0, (x - lo) / np.where(flat, 1.0, span)).astype(np.float32)
