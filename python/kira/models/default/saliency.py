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
image, float32 and deterministic. The computation runs in the compiled core
(`kira._core.saliency_maps`, cpp/src/saliency_map.cpp, GIL released); the numpy
implementation it replaced is the specification in benchmarks/peers/pixel_reference.py. The
KIRA threshold (mean + 0.5 std) and connected components are then the core's job
(`extract_regions`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kira import _core
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

        Returns float32 (n, grid, grid), each as `propose` gives it. Raises ValueError for
        another shape or dtype.
        """
        cfg = self.config
        s = cfg.work_size
        if small.dtype != np.uint8 or small.ndim != 4 or small.shape[1:] != (s, s, 3):
            raise ValueError(f"expected uint8 (n, {s}, {s}, 3), got {small.dtype} {small.shape}")
        return _core.saliency_maps(
            np.ascontiguousarray(small), grid=cfg.grid, residual_filter=cfg.residual_filter,
            residual_sigma=cfg.residual_sigma, centre_sigma=cfg.centre_sigma, surround_sigma=cfg.surround_sigma,
            residual_weight=cfg.residual_weight,
        )
