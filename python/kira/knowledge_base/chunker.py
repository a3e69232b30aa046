"""Stage 1, hierarchical chunking: document -> region -> patch, with parent links.

* document: the whole image.
* region: salient areas. The region proposer (DINO CLS attention, or the default
  saliency map) gives a grid; `kira._core.extract_regions` thresholds it at
  mean + k_sigma * std, labels connected components and scales boxes to pixels.
  The best `max_regions` are kept. Parent: the document chunk.
* patch: a fixed `patch_grid` x `patch_grid` grid over the image. Parent: the region
  that contains the patch's centre, else the document chunk.

Crops are gathered for a whole batch of images and encoded in one call per encoder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np

from kira.config import ChunkingConfig

if TYPE_CHECKING:
    from kira.models.protocols import Captioner, RegionProposer


class LineRead(Protocol):
    """A line of text read from the image (kira.models.ocr.TextLine): its text and (x0, y0, x1, y1) box."""

    @property
    def text(self) -> str: ...

    @property
    def box(self) -> tuple[int, int, int, int]: ...

LEVELS = ("document", "region", "patch")


def levels_arg(levels: Any, choices: Sequence[str] = LEVELS) -> tuple[str, ...]:
    """`levels` as a tuple of level names: a list (or tuple) of names as given, one name alone
    ("region") as that one level, never as its letters. Raises ValueError naming the unknown
    levels and the choices, TypeError for what is neither a name nor a list of names."""
    if isinstance(levels, str):
        levels = [levels]
    elif isinstance(levels, (bytes, dict)) or not hasattr(levels, "__iter__"):
        raise TypeError(f"levels must be a list of level names, e.g. ['document', 'region']; got "
                        f"{type(levels).__name__}")
    out = tuple(levels)
    bad = [lvl for lvl in out if not isinstance(lvl, str) or lvl not in choices]
    if bad:
        raise ValueError(f"unknown levels {bad}; choose from {tuple(choices)} (levels is a list of "
                         "names, e.g. ['document', 'region'])")
    return out


@dataclass
class ChunkPlan:
    """One chunk to be stored: where it is and what describes it (vectors come later)."""

    level: str
    box: tuple[int, int, int, int] | None  # x0, y0, x1, y1 (x1, y1 exclusive); None for the document
    parent: int | None  # index into the same image's plan list; None for the document
    description: str = ""  # stored and shown as evidence
    embed_text: str = ""  # what the sentence encoder embeds (the description without the location)
    score: float = 1.0  # region saliency; 1.0 for document/patch


@dataclass
class ImagePlan:
    """Every chunk of one image."""

    image: np.ndarray = field(repr=False)
    chunks: list[ChunkPlan]

    def crops(self) -> list[np.ndarray]:
        """The pixels of each chunk, in plan order."""
        out = []
        for chunk in self.chunks:
            if chunk.box is None:
                out.append(self.image)
            else:
                x0, y0, x1, y1 = chunk.box
                out.append(np.ascontiguousarray(self.image[y0:y1, x0:x1]))
        return out


def region_boxes(image: np.ndarray, proposer: RegionProposer, config: ChunkingConfig) -> list[tuple[tuple[int, int, int, int], float]]:
    """Salient boxes of `image` (uint8 (h, w, 3)) via the proposer and the core's extract_regions.

    Returns up to `config.max_regions` (box, score) pairs, best first; boxes smaller than
    2x2 pixels are dropped.
    """
    from kira import _core

    h, w = image.shape[:2]
    grid = np.ascontiguousarray(proposer.propose(image), dtype=np.float32)
    if grid.ndim != 2 or grid.size == 0 or not np.isfinite(grid).all():
        return []
    boxes, scores, _labels = _core.extract_regions(
        grid,
        (w, h),
        k_sigma=config.region_k_sigma,
        connectivity=config.region_connectivity,
        min_cells=config.region_min_cells,
    )
    out = []
    for box, score in zip(boxes[: config.max_regions], scores[: config.max_regions]):
        x0, y0, x1, y1 = (int(v) for v in box)
        x0, y0 = max(0, x0), max(0, y0)
        x1, y1 = min(w, x1), min(h, y1)
        if x1 - x0 >= 2 and y1 - y0 >= 2:
            out.append(((x0, y0, x1, y1), float(score)))
    return out


def patch_boxes(width: int, height: int, grid: int) -> list[tuple[int, int, int, int]]:
    """A grid x grid tiling of the image (row-major); tiles thinner than 2 px are skipped."""
    xs = np.linspace(0, width, grid + 1).round().astype(int)
    ys = np.linspace(0, height, grid + 1).round().astype(int)
    out = []
    for r in range(grid):
        for c in range(grid):
            box = (int(xs[c]), int(ys[r]), int(xs[c + 1]), int(ys[r + 1]))
            if box[2] - box[0] >= 2 and box[3] - box[1] >= 2:
                out.append(box)
    return out


def plan_image(
    image: np.ndarray, proposer: RegionProposer | None, config: ChunkingConfig, levels: Sequence[str] = LEVELS
) -> ImagePlan:
    """The chunk plan of one image at the requested `levels` (document is always included)."""
    unknown = set(levels) - set(LEVELS)
    if unknown:
        raise ValueError(f"unknown chunk levels {sorted(unknown)}; choose from {LEVELS}")
    h, w = image.shape[:2]
    chunks = [ChunkPlan("document", None, None)]
    regions: list[tuple[int, tuple[int, int, int, int]]] = []
    if "region" in levels and proposer is not None and min(h, w) >= 4:
        for box, score in region_boxes(image, proposer, config):
            chunks.append(ChunkPlan("region", box, 0, score=score))
            regions.append((len(chunks) - 1, box))
    if "patch" in levels and config.patch_grid > 1:
        for box in patch_boxes(w, h, config.patch_grid):
            cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
            parent = 0
            for idx, (x0, y0, x1, y1) in regions:  # regions are best first: the best container wins
                if x0 <= cx < x1 and y0 <= cy < y1:
                    parent = idx
                    break
            chunks.append(ChunkPlan("patch", box, parent))
    return ImagePlan(image=image, chunks=chunks)


def describe(plan: ImagePlan, caption: str | None, tags: Sequence[str], captioner: Captioner | None, *,
             caption_children: bool, lines: Sequence[LineRead] = ()) -> None:
    """Fill every chunk's description and embedded text in place.

    The document's description is the user's caption and tags first, then the text read from
    the image (`lines`: OCR results with `.text` and `.box`, as "text: ..."), then the
    captioner's description of the image. Regions and patches get the document's text (the
    user's caption and tags, else the captioner's description), the lines read inside them,
    where they are and, when `caption_children`, the captioner's description of the crop.

    The embedded text (what the sentence encoder embeds, `embedded_text`) is what the chunk
    shows, without the location: what a person wrote (caption, tags) or OCR read, else what a
    model says it shows (classifier labels, `kira.models.caption_parts`) backed by how it looks
    in words, else how it looks. So children without their own caption or text share the
    document's text vector (encoded once), and a question such as "a cup of coffee" meets a
    caption undiluted by brightness and colour measurements, which the stored description keeps
    (the card, the lexical index, questions about appearance).
    """
    from kira.models.caption_parts import CaptionParts, caption_parts

    head = caption.strip() if caption else ""
    if tags:
        head = f"{head}; tags: {', '.join(tags)}" if head else f"tags: {', '.join(tags)}"
    whole = caption_parts(captioner, plan.image) if captioner is not None else CaptionParts()
    read = _read_text(lines)
    document = plan.chunks[0]
    document.description = "; ".join(p for p in (head, read, whole.text()) if p)
    document.embed_text = embedded_text((head, read), (whole.shows,), (whole.looks,))
    h, w = plan.image.shape[:2]
    crops = plan.crops()
    for chunk, crop in zip(plan.chunks[1:], crops[1:]):
        assert chunk.box is not None  # every chunk but the document has its box
        x0, y0, x1, y1 = chunk.box
        where = f"{chunk.level} at x {x0}-{x1}, y {y0}-{y1} of {w}x{h}"
        inside = _read_text([ln for ln in lines if _centre_in(ln.box, chunk.box)])
        own = caption_parts(captioner, crop) if caption_children and captioner is not None else CaptionParts()
        chunk.description = "; ".join(p for p in (head or whole.text(), inside, where, own.text()) if p)
        chunk.embed_text = embedded_text((head, inside), ("" if head else whole.shows, own.shows),
                                         (whole.looks, own.looks)) or where


def embedded_text(said: Sequence[str], guessed: Sequence[str], looks: Sequence[str]) -> str:
    """What the sentence encoder embeds for a chunk, from what a person wrote or OCR read (`said`), what a
    model says it shows (`guessed`: classifier labels, a captioning model's sentence) and how it looks
    (`looks`: the describer's measurements), each a list of parts ("" for none):

    * something `said`: it and what is `guessed`, nothing of how it looks;
    * only something `guessed`: it and how the image looks in words, without figures
      (`kira.text.pieces.appearance_words`): a classifier's labels are often wrong outside its
      classes, and the look then still says something ("very dark, dominated by black");
    * nothing known of what it shows: how it looks, as measured.

    Parts are joined by '; '; "" when all are empty."""
    from kira.text.pieces import appearance_words

    said_text = "; ".join(p for p in said if p)
    guessed_text = "; ".join(p for p in guessed if p)
    if said_text:
        return "; ".join(p for p in (said_text, guessed_text) if p)
    if guessed_text:
        words = [appearance_words(part.strip()) for text in looks for part in text.split(";")]
        return "; ".join([guessed_text, *(w for w in words if w)])
    return "; ".join(p for p in looks if p)


def _read_text(lines: Sequence[LineRead]) -> str:
    words = " ".join(ln.text for ln in lines if ln.text)
    return f"text: {words}" if words else ""


def _centre_in(box: tuple[int, int, int, int], outer: tuple[int, int, int, int]) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return outer[0] <= cx < outer[2] and outer[1] <= cy < outer[3]
