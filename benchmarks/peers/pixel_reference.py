"""The numpy pixel descriptor and saliency map: the reference the C++ core is checked against.

This is the implementation `PixelEncoder.encode_prepared` and `SaliencyProposer.propose_prepared`
ran before issue 33.1 moved them into kira._core (cpp/src/pixel_descriptor.cpp), kept verbatim
so the parity tests compare the core with the specification, not with itself.

The parity tests (tests/models/test_models_pixel_core.py) and the benchmark
benchmarks/suites/pixel_core.py import it by its full name, ``benchmarks.peers.pixel_reference``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from kira.models.default.pixel_encoder import PixelEncoder, _colour_table  # the table stays in the library
from kira.models.default.saliency import SaliencyConfig

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_CHUNK = 128


def reference_encode_prepared(encoder: PixelEncoder, rgb: np.ndarray) -> np.ndarray:
    """What encoder.encode_prepared(rgb) returned in numpy: float32 (n, dim) unit rows."""
    return _ReferenceEncoder(encoder).encode_prepared(rgb)


def reference_saliency(config: SaliencyConfig, small: np.ndarray) -> np.ndarray:
    """What SaliencyProposer(config).propose_prepared(small) returned in numpy."""
    return _ReferenceProposer(config).propose_prepared(small)


class _ReferenceProposer:
    def __init__(self, config: SaliencyConfig) -> None:
        self.config = config

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




class _ReferenceEncoder:
    def __init__(self, encoder: PixelEncoder) -> None:
        self.config = encoder.config
        self.colour_bins = encoder.colour_bins
        self._proposer = _ReferenceProposer(encoder.saliency_config)

    def encode_prepared(self, rgb: np.ndarray) -> np.ndarray:
        """Encode uint8 (n, size, size, 3) pixels (the output of `prepare`)."""
        cfg = self.config
        if rgb.dtype != np.uint8 or rgb.ndim != 4 or rgb.shape[1:] != (cfg.size, cfg.size, 3):
            raise ValueError(f"expected uint8 (n, {cfg.size}, {cfg.size}, 3) from prepare(), got {rgb.dtype} {rgb.shape}")
        if rgb.shape[0] > _CHUNK:  # keep the temporaries cache-sized: 2-4x faster on large batches
            return np.concatenate([self.encode_prepared(rgb[i : i + _CHUNK]) for i in range(0, rgb.shape[0], _CHUNK)])
        # luminance in [0, 1] by an elementwise sum: no BLAS call (BLAS threads thrash on a busy machine)
        w = _LUMA / np.float32(255.0)
        grey = w[0] * rgb[..., 0] + w[1] * rgb[..., 1] + w[2] * rgb[..., 2]  # (n, s, s) float32
        blocks = [
            (self._colour(rgb), cfg.colour_weight),
            (self._texture(grey), cfg.texture_weight),
            (self._gradient(grey), cfg.gradient_weight),
            (self._layout(grey), cfg.layout_weight),
            (self._salience(rgb), cfg.salience_weight),
        ]
        parts = [_l2(b) * np.float32(w) for b, w in blocks]
        return _l2(np.concatenate(parts, axis=1))

    def _colour(self, rgb: np.ndarray) -> np.ndarray:
        cfg = self.config
        # RGB quantised to 5 bits per channel indexes a precomputed bin table (32^3 entries).
        q = rgb >> np.uint8(3)
        idx = (q[..., 0].astype(np.int32) << 10) | (q[..., 1].astype(np.int32) << 5) | q[..., 2]
        bins = _colour_table(cfg)[idx]
        return _pyramid_histogram(bins, None, self.colour_bins, cfg.colour_levels, per_cell=True, mirror=cfg.mirror_weight)

    def _layout(self, grey: np.ndarray) -> np.ndarray:
        g = self.config.layout_grid
        n, s, _ = grey.shape
        k = s // g
        thumb = grey.reshape(n, g, k, g, k).mean(axis=(2, 4))
        thumb = _mirror_mix(thumb, self.config.mirror_weight, col_axis=2)
        thumb = thumb.reshape(n, g * g)
        return thumb - thumb.mean(axis=1, keepdims=True)

    def _salience(self, rgb: np.ndarray) -> np.ndarray:
        g = self.config.salience_grid
        n, s = rgb.shape[0], rgb.shape[1] // 2
        wide = rgb.astype(np.uint16)  # 2 x 2 box average, rounded, by slices (a strided mean is 10x slower)
        half = ((wide[:, 0::2, 0::2] + wide[:, 1::2, 0::2] + wide[:, 0::2, 1::2] + wide[:, 1::2, 1::2] + 2) >> 2)
        half = half.astype(np.uint8)
        maps = self._proposer.propose_prepared(half)  # (n, size/2, size/2) in [0, 1]
        k = s // g
        cells = maps.reshape(n, g, k, g, k).mean(axis=(2, 4))
        cells = _mirror_mix(cells, self.config.salience_mirror_weight, col_axis=2).reshape(n, g * g)
        return cells - cells.mean(axis=1, keepdims=True)

    def _texture(self, grey: np.ndarray) -> np.ndarray:
        cfg = self.config
        # Quantise so that tiny float noise does not flip comparisons.
        q = np.rint(grey * 255.0).astype(np.int16)
        parts = [
            _pyramid_histogram(_lbp_riu2(q, r), None, 10, cfg.texture_levels, per_cell=True, mirror=cfg.mirror_weight)
            for r in cfg.lbp_radii
        ]
        return np.concatenate(parts, axis=1)

    def _gradient(self, grey: np.ndarray) -> np.ndarray:
        cfg = self.config
        gx = np.zeros_like(grey)
        gy = np.zeros_like(grey)
        gx[:, :, 1:-1] = grey[:, :, 2:] - grey[:, :, :-2]
        gy[:, 1:-1, :] = grey[:, 2:, :] - grey[:, :-2, :]
        mag = np.sqrt(gx * gx + gy * gy)
        nb = cfg.orientation_bins
        # unsigned orientation in bin units, [0, nb): theta mod pi, scaled; bin centres at k + 0.5
        pos = np.arctan2(gy, gx) * np.float32(nb / np.pi)
        pos += np.float32(nb) * (pos < 0)
        pos -= np.float32(0.5)
        lo = (pos + np.float32(nb)).astype(np.int32) - nb  # floor for pos > -nb
        frac = pos - lo.astype(np.float32)
        lo += nb * (lo < 0)
        hi = lo + 1
        hi[hi >= nb] = 0
        upper = mag * frac
        # A left-right flip maps orientation bin k to nb - 1 - k (theta -> pi - theta).
        hist = _pyramid_histogram(
            (lo, hi), (mag - upper, upper), nb, cfg.gradient_levels, per_cell=False, mirror=cfg.mirror_weight,
            reverse_bins=True,
        )
        # Normalise by the image's mean gradient energy per cell, so flat cells stay small.
        out = np.empty_like(hist)
        start = 0
        for c in cfg.gradient_levels:
            width = c * c * nb
            block = hist[:, start : start + width]
            total = block.sum(axis=1, keepdims=True) / (c * c) + 1e-6
            out[:, start : start + width] = np.sqrt(block / total) / np.float32(c)
            start += width
        return out


def _cells(levels: Sequence[int]) -> int:
    return sum(c * c for c in levels)


def _l2(x: np.ndarray) -> np.ndarray:
    norm = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
    return (x / np.maximum(norm, 1e-12)).astype(np.float32, copy=False)


@functools.lru_cache(maxsize=64)
def _cell_map(h: int, w: int, cells: int) -> np.ndarray:
    """int32 (h, w): which of the cells x cells grid cells each pixel falls into."""
    rows = np.minimum(np.arange(h) * cells // h, cells - 1)
    cols = np.minimum(np.arange(w) * cells // w, cells - 1)
    return (rows[:, None] * cells + cols[None, :]).astype(np.int32)


def _mirror_mix(x: np.ndarray, weight: float, *, col_axis: int, reverse_bins: bool = False) -> np.ndarray:
    """((1 + w) x + (1 - w) mirror(x)) / 2: the symmetric part plus w times the antisymmetric part.

    mirror() is the descriptor of the left-right flipped image (columns reversed, and
    orientation bins reversed when reverse_bins). Since |x| = |mirror(x)|, the two parts
    are orthogonal and cos(f(image), f(flipped image)) = (|s|^2 - w^2 |d|^2) / (|s|^2 + w^2 |d|^2).
    """
    if weight >= 1.0:
        return x
    m = np.flip(x, axis=col_axis)
    if reverse_bins:
        m = np.flip(m, axis=-1)
    return np.float32((1.0 + weight) / 2.0) * x + np.float32((1.0 - weight) / 2.0) * m


def _pyramid_histogram(
    bins: np.ndarray | tuple[np.ndarray, ...],
    weights: np.ndarray | tuple[np.ndarray, ...] | None,
    n_bins: int,
    levels: Sequence[int],
    *,
    per_cell: bool,
    mirror: float = 1.0,
    reverse_bins: bool = False,
) -> np.ndarray:
    """Histograms of `bins` (n, h, w) over a spatial pyramid, float32 (n, sum(c*c) * n_bins).

    `bins` and `weights` may be tuples of same-shape arrays (votes of a soft assignment),
    counted together. The finest level is counted with one bincount; coarser levels are sums of it (every
    level must divide the finest). per_cell=True turns each cell into a distribution,
    applies the Hellinger map and scales each level to unit length.
    """
    parts = bins if isinstance(bins, tuple) else (bins,)
    n, h, w = parts[0].shape
    finest = max(levels)
    cell = _cell_map(h, w, finest)
    base = ((np.arange(n, dtype=np.int32)[:, None, None] * (finest * finest) + cell[None]) * n_bins).ravel()
    flat = np.concatenate([base + b.ravel() for b in parts]) if len(parts) > 1 else base + parts[0].ravel()
    if weights is not None:
        wparts = weights if isinstance(weights, tuple) else (weights,)
        weights = np.concatenate([x.ravel() for x in wparts]) if len(wparts) > 1 else wparts[0].ravel()
    counts = np.bincount(flat, weights=weights, minlength=n * finest * finest * n_bins).astype(np.float32)
    counts = counts.reshape(n, finest, finest, n_bins)
    out = []
    for c in levels:
        f = finest // c
        hist = counts.reshape(n, c, f, c, f, n_bins).sum(axis=(2, 4))  # (n, c, c, bins)
        if per_cell:
            hist = np.sqrt(hist / np.maximum(hist.sum(axis=3, keepdims=True), 1e-6)) / np.float32(c)
        hist = _mirror_mix(hist, mirror, col_axis=2, reverse_bins=reverse_bins)
        out.append(hist.reshape(n, c * c * n_bins))
    return np.concatenate(out, axis=1)


def _lbp_riu2(q: np.ndarray, radius: int) -> np.ndarray:
    """Rotation-invariant uniform LBP codes (0..9) of int images (n, h, w) -> (n, h-2r, w-2r)."""
    r = radius
    _, h, w = q.shape
    centre = q[:, r : h - r, r : w - r]
    # 8 neighbours on the square of side 2r + 1, in circular order
    offsets = [(-r, -r), (-r, 0), (-r, r), (0, r), (r, r), (r, 0), (r, -r), (0, -r)]
    bits = [q[:, r + dy : h - r + dy, r + dx : w - r + dx] >= centre for dy, dx in offsets]
    ones = np.zeros(centre.shape, dtype=np.int8)
    transitions = np.zeros(centre.shape, dtype=np.int8)
    for k in range(8):
        ones += bits[k]
        transitions += bits[k] != bits[(k + 1) % 8]
    return np.where(transitions <= 2, ones, 9).astype(np.int32)


def _unit_range(x: np.ndarray) -> np.ndarray:
    """Each batch item (axis 0) scaled to [0, 1] on its own; a constant item becomes zeros."""
    axes = tuple(range(1, x.ndim))
    lo, hi = x.min(axis=axes, keepdims=True), x.max(axis=axes, keepdims=True)
    span = hi - lo
    flat = span < 1e-12
    return np.where(flat, 0.0, (x - lo) / np.where(flat, 1.0, span)).astype(np.float32)


def real_images() -> list[np.ndarray]:
    """What the parity tests and benchmarks/suites/pixel_core.py compare on: photos, random crops of many
    sizes and aspect ratios, 1-pixel-wide strips, upscaled digits, CT/MR greyscale and a uniform image."""
    import pydicom
    from pydicom.data import get_testdata_file
    from sklearn.datasets import load_digits
    from skimage import data

    rng = np.random.default_rng(33)
    out = []
    for name in ("astronaut", "chelsea", "coffee", "camera", "rocket", "hubble_deep_field",
                 "immunohistochemistry", "coins", "page", "text", "moon", "horse"):
        img = getattr(data, name)()
        img = img.astype(np.uint8) * 255 if img.dtype == bool else img
        out.append(img)
        h, w = img.shape[:2]
        for _ in range(5):
            ch, cw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
            y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
            out.append(img[y : y + ch, x : x + cw])
    astronaut, coffee = data.astronaut(), data.coffee()
    out += [astronaut[:, 200:201], astronaut[300:301, :], coffee[10:11, :], coffee[:, 5:6]]
    digits = load_digits().images
    out += [np.kron((digits[i] * 16).clip(0, 255).astype(np.uint8), np.ones((8, 8), np.uint8)) for i in range(8)]
    for file in ("MR_small.dcm", "CT_small.dcm"):
        px = pydicom.dcmread(get_testdata_file(file)).pixel_array.astype(np.float64)
        out.append(((px - px.min()) / (px.max() - px.min()) * 255).astype(np.uint8))
    out.append(np.full((50, 70, 3), 120, np.uint8))
    return out
