"""Reading the text printed in an image: RapidOCR's PP-OCRv4 ONNX models, pre/post-processing in numpy.

The `rapidocr-onnxruntime` wheel (Apache-2.0) ships the detection (DB) and recognition
(CRNN + CTC) models; kira locates its files and never imports the package (which needs
OpenCV, Shapely and pyclipper). The steps follow PaddleOCR's published pipeline:

1. detection: the image (BGR, (x/255 - 0.5)/0.5) is scaled so its short side is at least
   `det_min_side` (and its long side at most `det_max_side`), rounded to multiples of 32;
   the DB probability map is thresholded at `det_threshold`, dilated by a 2x2 square and
   split into connected components (scipy.ndimage); a component scores the mean
   probability of its pixels (under `box_threshold` it is dropped), and its rectangle
   along its principal axis is grown by DB's unclip distance (area * `unclip_ratio` /
   perimeter), so a slanted line is read along its slant.
2. recognition: each rectangle is cut out straightened (Pillow's QUAD transform; turned
   90 degrees when at least 1.5 times taller than wide), resized to height 48 keeping its aspect
   ratio, padded to the batch's widest crop and decoded by CTC greedy decoding with the
   character list stored in the model's metadata (index 0 is the blank, the last a space).
   Lines whose mean character probability is under `text_threshold` are dropped.

Result: `TextLine`s (text, score, axis-aligned bounding box of the line in image pixels),
read top to bottom, left to right. The angle classifier (upside-down text) is not used.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from kira.images import ImageLike, load_image

logger = logging.getLogger(__name__)

PACKAGE = "rapidocr_onnxruntime"
INSTALL_HINT = "pip install --no-deps rapidocr-onnxruntime"


@dataclass(frozen=True)
class OcrConfig:
    """The OCR models and the thresholds of their pre/post-processing (PaddleOCR's defaults)."""

    name: str = "rapidocr-ppocrv4"  # identity stored with a knowledge base
    det_model: str = "models/ch_PP-OCRv4_det_infer.onnx"  # inside the rapidocr-onnxruntime package
    rec_model: str = "models/ch_PP-OCRv4_rec_infer.onnx"
    det_min_side: int = 736  # short side scaled up to this before detection
    det_max_side: int = 2000  # long side capped at this
    det_threshold: float = 0.3  # DB probability threshold
    box_threshold: float = 0.5  # a box's mean probability must reach this
    unclip_ratio: float = 1.6  # DB unclip: grow each box by area * ratio / perimeter
    min_box_side: int = 3  # boxes thinner than this (detection pixels) are noise
    rec_height: int = 48  # recognition input height
    rec_min_width: int = 320  # recognition input width at least (PaddleOCR's 3 x 48 x 320)
    rec_batch: int = 8  # crops per recognition call
    text_threshold: float = 0.5  # mean character probability a line needs


@dataclass(frozen=True)
class TextLine:
    """One line of text read from an image."""

    text: str
    score: float  # mean probability of its characters
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive) in image pixels


class OcrNotInstalled(ImportError):
    """The wheel with RapidOCR's ONNX models is not installed."""


def model_dir() -> Path:
    """The rapidocr_onnxruntime package directory (located, not imported).

    Raises OcrNotInstalled naming the pip command when it is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise OcrNotInstalled(f"the OCR models are not installed; run `{INSTALL_HINT}` (--no-deps: kira reads only "
                              "its ONNX files, without OpenCV)")
    return Path(next(iter(spec.submodule_search_locations)))


class OcrReader:
    """Image -> the lines of text printed in it (RapidOCR's detection and recognition models).

    Parameters: config (OcrConfig), prefer_cuda, threads (onnxruntime intra-op threads).
    Raises OcrNotInstalled (an ImportError) naming the wheel when its models are missing.
    Thread safety: `read` may run in several threads.
    """

    def __init__(self, config: OcrConfig | None = None, *, prefer_cuda: bool = True, threads: int | None = None) -> None:
        from kira.models.runtime import open_session

        self.config = cfg = config or OcrConfig()
        root = model_dir()
        for rel in (cfg.det_model, cfg.rec_model):
            if not (root / rel).is_file():
                raise OcrNotInstalled(f"{root / rel} is missing; reinstall with `{INSTALL_HINT} --force-reinstall`")
        self._det = open_session(root / cfg.det_model, prefer_cuda=prefer_cuda, threads=threads)
        self._rec = open_session(root / cfg.rec_model, prefer_cuda=prefer_cuda, threads=threads)
        self.provider = self._det.provider
        meta = self._rec.session.get_modelmeta().custom_metadata_map
        if "character" not in meta:
            raise ValueError(f"{root / cfg.rec_model} has no character list in its metadata; reinstall with `{INSTALL_HINT}`")
        self.characters = ["", *meta["character"].splitlines(), " "]  # CTC blank first, space last

    # ---- detection ----------------------------------------------------------------------
    def _det_input(self, bgr: np.ndarray) -> np.ndarray:
        from PIL import Image

        h, w = bgr.shape[:2]
        cfg = self.config
        ratio = cfg.det_min_side / min(h, w) if min(h, w) < cfg.det_min_side else 1.0
        ratio = min(ratio, cfg.det_max_side / max(h, w)) if max(h, w) * ratio > cfg.det_max_side else ratio
        rh, rw = (max(32, int(round(v * ratio / 32)) * 32) for v in (h, w))
        img = np.asarray(Image.fromarray(bgr).resize((rw, rh), Image.Resampling.BILINEAR), dtype=np.float32)
        return ((img / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]

    def detect(self, image: ImageLike) -> list[tuple[np.ndarray, float]]:
        """Text quadrilaterals in image pixels with their detection scores, top to bottom.

        Each quad is float (4, 2): the corners (x, y) upper-left, upper-right, lower-right,
        lower-left of the line's minimum-area rectangle along its principal axis (so a
        slanted line is read along its slant), grown by DB's unclip distance.
        """
        from scipy import ndimage

        rgb = load_image(image)
        h, w = rgb.shape[:2]
        x = self._det_input(np.ascontiguousarray(rgb[..., ::-1]))
        (prob,) = self._det.run({self._det.input_names[0]: x})
        prob = prob[0, 0]
        ph, pw = prob.shape
        cfg = self.config
        mask = ndimage.binary_dilation(prob > cfg.det_threshold, structure=np.ones((2, 2), bool))
        labels, count = ndimage.label(mask, structure=np.ones((3, 3), bool))
        if count == 0:
            return []
        scores = ndimage.mean(prob, labels, np.arange(1, count + 1))
        out: list[tuple[np.ndarray, float]] = []
        for k, sl in enumerate(ndimage.find_objects(labels)):
            if sl is None or scores[k] < cfg.box_threshold:
                continue
            if min(sl[0].stop - sl[0].start, sl[1].stop - sl[1].start) < cfg.min_box_side:
                continue
            ys, xs = np.nonzero(labels[sl] == k + 1)
            pts = np.stack([xs + sl[1].start + 0.5, ys + sl[0].start + 0.5], axis=1).astype(np.float64)
            quad = _min_rect(pts)
            side_u, side_v = np.linalg.norm(quad[1] - quad[0]), np.linalg.norm(quad[3] - quad[0])
            if min(side_u, side_v) < cfg.min_box_side:
                continue
            d = side_u * side_v * cfg.unclip_ratio / (2.0 * (side_u + side_v))
            quad = _grow(quad, float(d))
            quad[:, 0] = np.clip(quad[:, 0] / pw * w, 0, w)
            quad[:, 1] = np.clip(quad[:, 1] / ph * h, 0, h)
            if min(np.linalg.norm(quad[1] - quad[0]), np.linalg.norm(quad[3] - quad[0])) > 3:
                out.append((quad, float(scores[k])))
        return _reading_order(out)

    # ---- recognition --------------------------------------------------------------------
    def recognise(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, mean character probability) of each RGB crop of one text line."""
        from PIL import Image

        cfg = self.config
        out: list[tuple[str, float]] = [("", 0.0)] * len(crops)
        ready = []
        for c in crops:
            c = np.ascontiguousarray(c[..., ::-1])  # the models were trained on BGR
            if c.shape[0] >= 1.5 * c.shape[1]:
                c = np.ascontiguousarray(np.rot90(c))
            ready.append(c)
        order = np.argsort([c.shape[1] / max(c.shape[0], 1) for c in ready], kind="stable")
        for start in range(0, len(order), cfg.rec_batch):
            idx = order[start : start + cfg.rec_batch]
            ratios = [ready[i].shape[1] / max(ready[i].shape[0], 1) for i in idx]
            width = max(cfg.rec_min_width, int(np.ceil(cfg.rec_height * max(ratios))))
            batch = np.zeros((len(idx), 3, cfg.rec_height, width), np.float32)
            for j, i in enumerate(idx):
                rw = min(width, max(1, int(np.ceil(cfg.rec_height * ratios[j]))))
                img = np.asarray(Image.fromarray(ready[i]).resize((rw, cfg.rec_height), Image.Resampling.BILINEAR), np.float32)
                batch[j, :, :, :rw] = ((img / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)
            (probs,) = self._rec.run({self._rec.input_names[0]: batch})
            for j, i in enumerate(idx):
                out[int(i)] = self._ctc(probs[j])
        return out

    def _ctc(self, probs: np.ndarray) -> tuple[str, float]:
        best = probs.argmax(axis=1)
        conf = probs.max(axis=1)
        keep = best != 0
        keep[1:] &= best[1:] != best[:-1]
        if not keep.any():
            return "", 0.0
        text = "".join(self.characters[k] for k in best[keep] if k < len(self.characters))
        return text.strip(), float(conf[keep].mean())

    def read(self, image: ImageLike) -> list[TextLine]:
        """The lines of text in `image` that pass both thresholds, top to bottom, left to right.

        Raises kira.images.ImageError for input that is not an image.
        """
        rgb = load_image(image)
        quads = self.detect(rgb)
        if not quads:
            return []
        crops = [_crop_quad(rgb, q) for q, _ in quads]
        lines = []
        for (quad, _), (text, score) in zip(quads, self.recognise(crops)):
            if text and score >= self.config.text_threshold:
                x0, y0 = np.floor(quad.min(axis=0)).astype(int)
                x1, y1 = np.ceil(quad.max(axis=0)).astype(int)
                lines.append(TextLine(text, score, (int(x0), int(y0), int(x1), int(y1))))
        return lines

    def text(self, image: ImageLike) -> str:
        """Every line read from `image`, joined by spaces ('' when none)."""
        return " ".join(line.text for line in self.read(image))


def _min_rect(pts: np.ndarray) -> np.ndarray:
    """The rectangle along the points' principal axis that holds them all: corners (4, 2) UL, UR, LR, LL."""
    centre = pts.mean(axis=0)
    if len(pts) < 3:
        u = np.array([1.0, 0.0])
    else:
        evals, evecs = np.linalg.eigh(np.cov((pts - centre).T))
        u = evecs[:, int(np.argmax(evals))]
    if u[0] < 0:
        u = -u  # reading direction: left to right
    v = np.array([-u[1], u[0]])  # downwards when u points right (image y grows downwards)
    a, b = (pts - centre) @ u, (pts - centre) @ v
    (a0, a1), (b0, b1) = (a.min() - 0.5, a.max() + 0.5), (b.min() - 0.5, b.max() + 0.5)
    return np.array([centre + a0 * u + b0 * v, centre + a1 * u + b0 * v, centre + a1 * u + b1 * v,
                     centre + a0 * u + b1 * v])


def _grow(quad: np.ndarray, d: float) -> np.ndarray:
    """The rectangle `quad` (UL, UR, LR, LL) grown by d on every side."""
    u = quad[1] - quad[0]
    v = quad[3] - quad[0]
    u = u / max(np.linalg.norm(u), 1e-9) * d
    v = v / max(np.linalg.norm(v), 1e-9) * d
    return np.array([quad[0] - u - v, quad[1] + u - v, quad[2] + u + v, quad[3] - u + v])


def _crop_quad(rgb: np.ndarray, quad: np.ndarray) -> np.ndarray:
    """The rectangle `quad` (UL, UR, LR, LL) of the image, straightened (PIL's QUAD transform, bilinear)."""
    from PIL import Image

    width = max(1, int(round(np.linalg.norm(quad[1] - quad[0]))))
    height = max(1, int(round(np.linalg.norm(quad[3] - quad[0]))))
    ul, ur, lr, ll = quad
    data = (*ul, *ll, *lr, *ur)  # PIL's QUAD: upper-left, lower-left, lower-right, upper-right
    img = Image.fromarray(rgb).transform((width, height), Image.Transform.QUAD, data=tuple(float(v) for v in data),
                                         resample=Image.Resampling.BILINEAR)
    return np.asarray(img)


def _reading_order(quads: list[tuple[np.ndarray, float]]) -> list[tuple[np.ndarray, float]]:
    """Top to bottom by centre; lines whose centres are within half a line height form one row, left to right."""
    quads = sorted(quads, key=lambda q: q[0][:, 1].mean())
    rows: list[list[tuple[np.ndarray, float]]] = []
    for q in quads:
        height = np.linalg.norm(q[0][3] - q[0][0])
        if rows and abs(q[0][:, 1].mean() - rows[-1][-1][0][:, 1].mean()) < 0.5 * height:
            rows[-1].append(q)
        else:
            rows.append([q])
    return [q for row in rows for q in sorted(row, key=lambda q: q[0][:, 0].min())]
