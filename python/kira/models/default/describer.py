"""Measurable attributes of an image, as numbers and as a sentence.

The default stack has no captioning model, so a chunk's description is the user's
caption and tags plus what can be measured honestly from the pixels: brightness,
contrast, colourfulness and dominant named colours, texture (edge density and the
dominant orientation of structures) and the layout of salient regions. Every figure is
deterministic, and the sentence says only what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kira.images import ImageLike, load_image
from kira.models.default.saliency import SaliencyProposer
from kira.models.protocols import RegionProposer

# Hue sectors (degrees, upper bound exclusive) -> colour name, for chromatic pixels.
_HUE_NAMES = ((15, "red"), (45, "orange"), (70, "yellow"), (165, "green"), (195, "cyan"), (255, "blue"),
              (290, "purple"), (345, "magenta"), (361, "red"))
_LOCATIONS = (("top-left", "top", "top-right"), ("left", "centre", "right"), ("bottom-left", "bottom", "bottom-right"))


@dataclass(frozen=True)
class SalientRegion:
    """One connected salient area on the saliency grid, in image pixels."""

    box: tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive), pixels of the original image
    area: float  # fraction of the image covered by the box
    score: float  # mean saliency inside the region
    location: str  # "top-left", "centre", ... (3 x 3 layout of the box centre)


@dataclass(frozen=True)
class ImageAttributes:
    """What the describer measured; `to_text()` turns it into one sentence."""

    width: int
    height: int
    brightness: float  # mean luminance in [0, 1]
    contrast: float  # standard deviation of luminance in [0, 1]
    colourfulness: float  # Hasler & Suesstrunk (2003) metric on [0, 1] RGB; < 0.05 reads as greyscale
    dominant_colours: tuple[tuple[str, float], ...]  # (name, fraction of pixels), largest first
    edge_density: float  # fraction of pixels with a strong gradient
    orientation: str  # "horizontal", "vertical", "diagonal" or "mixed" (dominant structure direction)
    regions: tuple[SalientRegion, ...] = field(default=())

    @property
    def is_greyscale(self) -> bool:
        return self.colourfulness < 0.05

    @property
    def brightness_word(self) -> str:
        return _bucket(self.brightness, ((0.2, "very dark"), (0.4, "dark"), (0.6, "medium-brightness"), (0.8, "bright")), "very bright")

    @property
    def contrast_word(self) -> str:
        return _bucket(self.contrast, ((0.08, "low-contrast"), (0.18, "moderate-contrast")), "high-contrast")

    @property
    def texture_word(self) -> str:
        return _bucket(self.edge_density, ((0.03, "smooth"), (0.12, "moderately textured")), "highly textured")

    @property
    def keywords(self) -> tuple[str, ...]:
        """Short tags for concept matching, e.g. ("dark", "greyscale", "gray", "smooth")."""
        words = [self.brightness_word, self.contrast_word, "greyscale" if self.is_greyscale else "colour"]
        words += [name for name, _ in self.dominant_colours]
        words.append(self.texture_word)
        if self.orientation != "mixed":
            words.append(f"{self.orientation} structures")
        return tuple(dict.fromkeys(words))

    def to_text(self) -> str:
        """One sentence, e.g. 'A dark, high-contrast greyscale image (512x512) dominated by ...'."""
        kind = "greyscale" if self.is_greyscale else "colour"
        shape = _shape_word(self.width, self.height)
        text = f"A {self.brightness_word}, {self.contrast_word} {kind} image ({self.width}x{self.height}, {shape})"
        if self.dominant_colours:
            parts = [f"{name} ({frac:.0%})" for name, frac in self.dominant_colours]
            text += " dominated by " + _join(parts)
        text += f"; {self.texture_word}"
        if self.orientation != "mixed":
            text += f" with mostly {self.orientation} structures"
        if self.regions:
            count = len(self.regions)
            parts = [f"{_size_word(r.area)} one at the {r.location} ({r.area:.0%})" for r in self.regions]
            text += f"; {count} salient region{'s' if count > 1 else ''}: " + _join(parts)
        return text + "."


class Describer:
    """Image -> ImageAttributes (and a sentence via `describe(...).to_text()`).

    Parameters: proposer (the saliency model used for region layout; default
    SaliencyProposer()), work_size (pixels per side the statistics are measured at),
    max_regions (regions mentioned), k_sigma (saliency threshold mean + k_sigma * std,
    the KIRA rule; default read from ChunkingConfig).
    """

    def __init__(
        self,
        proposer: RegionProposer | None = None,
        *,
        work_size: int = 96,
        max_regions: int = 3,
        k_sigma: float | None = None,
    ) -> None:
        from kira.config import ChunkingConfig

        self.proposer = proposer or SaliencyProposer()
        self.work_size = work_size
        self.max_regions = max_regions
        self.k_sigma = ChunkingConfig().region_k_sigma if k_sigma is None else k_sigma

    def describe(self, image: ImageLike, *, saliency: np.ndarray | None = None) -> ImageAttributes:
        """Measure one image (array, PIL image or path).

        `saliency` may pass a grid already computed by the proposer to avoid recomputing it.
        Raises kira.images.ImageError for unusable input.
        """
        from PIL import Image
        from scipy import ndimage

        pixels = load_image(image)
        h, w = pixels.shape[:2]
        s = self.work_size
        small = pixels if max(h, w) <= s else np.asarray(
            Image.fromarray(pixels).resize((s, max(1, round(h * s / w))) if w >= h else (max(1, round(w * s / h)), s),
                                           Image.Resampling.BILINEAR, reducing_gap=2.0)
        )
        rgb = small.astype(np.float32) / 255.0
        grey = 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]
        r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
        rg, yb = r - g, 0.5 * (r + g) - b
        colourfulness = float(np.hypot(rg.std(), yb.std()) + 0.3 * np.hypot(rg.mean(), yb.mean()))

        padded = np.pad(grey, 1, mode="edge")  # central differences that work down to 1 x 1
        gx = 0.5 * (padded[1:-1, 2:] - padded[1:-1, :-2])
        gy = 0.5 * (padded[2:, 1:-1] - padded[:-2, 1:-1])
        mag = np.hypot(gx, gy)
        strong = mag > 0.08
        edge_density = float(strong.mean())
        orientation = _orientation(gx[strong], gy[strong], mag[strong])

        if saliency is None:
            saliency = self.proposer.propose(pixels)
        regions = _regions(saliency, w, h, self.k_sigma, self.max_regions, ndimage)
        return ImageAttributes(
            width=w,
            height=h,
            brightness=float(grey.mean()),
            contrast=float(grey.std()),
            colourfulness=colourfulness,
            dominant_colours=_dominant_colours(rgb),
            edge_density=edge_density,
            orientation=orientation,
            regions=regions,
        )


_COLOUR_NAMES = tuple(dict.fromkeys([n for _, n in _HUE_NAMES] + ["brown", "pink", "black", "dark gray", "gray",
                                                                 "light gray", "white"]))
_CODE = {name: i for i, name in enumerate(_COLOUR_NAMES)}


def _colour_codes(rgb: np.ndarray) -> np.ndarray:
    """Per-pixel colour-name codes (indexes into _COLOUR_NAMES) from HSV rules."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    mx = np.maximum(np.maximum(r, g), b)
    mn = np.minimum(np.minimum(r, g), b)
    delta = mx - mn
    sat = delta / np.maximum(mx, 1e-6)
    safe = np.maximum(delta, 1e-6)
    hue = np.where(mx == r, (g - b) / safe, np.where(mx == g, (b - r) / safe + 2.0, (r - g) / safe + 4.0))
    hue = np.mod(hue * 60.0, 360.0)
    bounds = np.array([hb for hb, _ in _HUE_NAMES])
    hue_codes = np.array([_CODE[n] for _, n in _HUE_NAMES], dtype=np.int32)
    codes = hue_codes[np.searchsorted(bounds, hue, side="right")]
    warm = (hue < 45) | (hue >= 345)
    codes[warm & (mx < 0.6) & (sat > 0.3)] = _CODE["brown"]
    codes[((hue < 15) | (hue >= 290)) & (sat < 0.5) & (mx > 0.7)] = _CODE["pink"]
    grey = (sat < 0.18) | (mx < 0.12)
    codes[grey & (mx < 0.15)] = _CODE["black"]
    codes[grey & (mx >= 0.15) & (mx < 0.4)] = _CODE["dark gray"]
    codes[grey & (mx >= 0.4) & (mx < 0.75)] = _CODE["gray"]
    codes[grey & (mx >= 0.75) & (mx < 0.92)] = _CODE["light gray"]
    codes[grey & (mx >= 0.92)] = _CODE["white"]
    return codes


def _dominant_colours(rgb: np.ndarray, top: int = 3, min_fraction: float = 0.1) -> tuple[tuple[str, float], ...]:
    counts = np.bincount(_colour_codes(rgb).ravel(), minlength=len(_COLOUR_NAMES))
    fractions = counts / max(int(counts.sum()), 1)
    order = sorted(range(len(_COLOUR_NAMES)), key=lambda i: (-fractions[i], _COLOUR_NAMES[i]))
    return tuple((_COLOUR_NAMES[i], round(float(fractions[i]), 3)) for i in order[:top] if fractions[i] >= min_fraction)


def _orientation(gx: np.ndarray, gy: np.ndarray, mag: np.ndarray) -> str:
    """Direction of the dominant structures (edges run perpendicular to the gradient)."""
    if mag.size < 16:
        return "mixed"
    theta = np.mod(np.degrees(np.arctan2(gy, gx)), 180.0)
    # gradient near 0/180 deg = vertical edges; near 90 deg = horizontal edges
    vertical = mag[(theta < 22.5) | (theta >= 157.5)].sum()
    horizontal = mag[(theta >= 67.5) & (theta < 112.5)].sum()
    diagonal = mag.sum() - vertical - horizontal
    total = float(mag.sum())
    shares = {"horizontal": horizontal / total, "vertical": vertical / total, "diagonal": diagonal / total / 2.0}
    best = max(shares, key=lambda k: shares[k])
    return best if shares[best] > 0.45 else "mixed"


def _regions(
    saliency: np.ndarray, width: int, height: int, k_sigma: float, limit: int, ndimage, min_area: float = 0.01
) -> tuple[SalientRegion, ...]:
    sal = np.asarray(saliency, dtype=np.float32)
    if sal.ndim != 2 or sal.size == 0 or float(sal.std()) < 1e-6:
        return ()
    mask = sal > sal.mean() + k_sigma * sal.std()
    labels, count = ndimage.label(mask, structure=np.ones((3, 3), dtype=bool))
    gh, gw = sal.shape
    found = []
    for idx, sl in enumerate(ndimage.find_objects(labels), start=1):
        if sl is None:
            continue
        cells = labels[sl] == idx
        score = float(sal[sl][cells].mean())
        y0, y1, x0, x1 = sl[0].start, sl[0].stop, sl[1].start, sl[1].stop
        box = (x0 * width // gw, y0 * height // gh, -(-x1 * width // gw), -(-y1 * height // gh))
        area = (box[2] - box[0]) * (box[3] - box[1]) / float(width * height)
        cy, cx = (y0 + y1) / 2.0 / gh, (x0 + x1) / 2.0 / gw
        location = _LOCATIONS[min(int(cy * 3), 2)][min(int(cx * 3), 2)]
        found.append(SalientRegion(box=box, area=round(area, 3), score=round(score, 4), location=location))
    found = [r for r in found if r.area >= min_area]
    found.sort(key=lambda r: (-r.score, r.box))
    return tuple(found[:limit])


def _bucket(value: float, edges: tuple[tuple[float, str], ...], last: str) -> str:
    for edge, word in edges:
        if value < edge:
            return word
    return last


def _shape_word(w: int, h: int) -> str:
    ratio = w / h
    return "square" if 0.9 <= ratio <= 1.1 else ("landscape" if ratio > 1 else "portrait")


def _size_word(area: float) -> str:
    return "a large" if area >= 0.2 else ("a medium" if area >= 0.05 else "a small")


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
