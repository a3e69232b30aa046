"""Small, fast, deterministic model doubles for the knowledge-base and pipeline tests.

They follow the kira.models.protocols shapes; the real default stack is exercised by
the tests marked for it (test_pipeline_default_stack.py) and by the demo test.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

from kira.images import load_image


def _unit(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float32)
    return a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)


class GridColourEncoder:
    """Image -> mean colour of a 4x4 grid (48-d), centred, unit length."""

    dim = 48

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, images):
        self.calls += 1
        out = []
        for im in images:
            a = load_image(im).astype(np.float32) / 255.0
            h, w = a.shape[:2]
            ys = np.linspace(0, h, 5).astype(int)
            xs = np.linspace(0, w, 5).astype(int)
            cells = [a[ys[i]:max(ys[i + 1], ys[i] + 1), xs[j]:max(xs[j + 1], xs[j] + 1)].mean(axis=(0, 1))
                     for i in range(4) for j in range(4)]
            v = np.concatenate(cells) - 0.5
            out.append(v)
        return _unit(np.stack(out)) if out else np.zeros((0, self.dim), np.float32)


class HashingTextEncoder:
    """Text -> hashed bag of words (64-d), unit length."""

    dim = 64

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for n, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                h = int(hashlib.md5(word.encode()).hexdigest(), 16)
                out[n, h % self.dim] += 1.0 if (h >> 8) & 1 else -1.0
            if not out[n].any():
                out[n, 0] = 1.0
        return _unit(out)


class ColourWordImageText:
    """Text -> image space: colour words map to the grid-colour vector of a flat image of that colour."""

    dim = 48
    COLOURS = {"red": (1, 0, 0), "green": (0, 1, 0), "blue": (0, 0, 1), "orange": (1, 0.5, 0), "white": (1, 1, 1),
               "black": (0, 0, 0), "yellow": (1, 1, 0)}

    def encode(self, texts):
        out = []
        for text in texts:
            rgb = np.zeros(3, np.float32)
            hits = [self.COLOURS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in self.COLOURS]
            rgb = np.mean(hits, axis=0) if hits else np.full(3, 0.5)
            out.append(np.tile(np.asarray(rgb, np.float32) - 0.5 + 1e-3, 16))
        return _unit(np.stack(out))


class VarianceProposer:
    """Saliency: per-cell distance of the cell's mean colour from the image mean, on an 8x8 grid."""

    def propose(self, image):
        a = image.astype(np.float32) / 255.0
        h, w = a.shape[:2]
        ys = np.linspace(0, h, 9).astype(int)
        xs = np.linspace(0, w, 9).astype(int)
        mean = a.mean(axis=(0, 1))
        g = np.zeros((8, 8), np.float32)
        for i in range(8):
            for j in range(8):
                cell = a[ys[i]:max(ys[i + 1], ys[i] + 1), xs[j]:max(xs[j + 1], xs[j] + 1)]
                g[i, j] = float(np.linalg.norm(cell.mean(axis=(0, 1)) - mean))
        return g


class AttributeCaptioner:
    """A measurement of how an image looks (as the default describer's): "mean colour R G B"."""

    def caption(self, image, prompt=None):
        r, g, b = (image.reshape(-1, 3).mean(axis=0)).round().astype(int)
        return f"mean colour {r} {g} {b}"

    def caption_parts(self, image, prompt=None):
        from kira.models.caption_parts import CaptionParts

        return CaptionParts(looks=self.caption(image, prompt))

    def hypotheses(self, image, question, n):
        return [f"{question} hypothesis"][:n] if question else []


@dataclass
class FakeStack:
    image: object = field(default_factory=GridColourEncoder)
    text: object = field(default_factory=HashingTextEncoder)
    regions: object = field(default_factory=VarianceProposer)
    captioner: object = field(default_factory=AttributeCaptioner)
    reranker: object = None
    critic: object = None
    lm: object = None
    image_text: object = field(default_factory=ColourWordImageText)
    notes: list = field(default_factory=list)
    providers: dict = field(default_factory=dict)


def flat(colour, size=(48, 64), spot=None):
    """A (h, w, 3) uint8 image of one colour, optionally with a square `spot` = (colour, x, y, side)."""
    h, w = size
    a = np.zeros((h, w, 3), np.uint8)
    a[:] = np.asarray(colour, np.float32) * 255
    if spot is not None:
        c, x, y, s = spot
        a[y:y + s, x:x + s] = np.asarray(c, np.float32) * 255
    return a


OPACITY_GROUND, OPACITY_RED = (0.45, 0.5, 0.6), (0.9, 0.1, 0.1)  # the ground is not the encoder's centre


def opacity(rows: int) -> np.ndarray:
    """A grey image whose bottom `rows` rows are red: a finding that grows with more rows."""
    image = flat(OPACITY_GROUND)
    if rows:
        image[-rows:] = np.asarray(OPACITY_RED, np.float32) * 255
    return image


def document_items(kb, *doc_ids):
    """Evidence items of the documents' document chunks, each at score 1, in the order given."""
    from kira.grounding.evidence import build_items

    chunks = kb.store.document_chunk_ids(doc_ids)
    return build_items(kb, [chunks[d] for d in doc_ids], [1.0] * len(doc_ids), {}, {}, thumbnails=False)


def photo(n: int) -> np.ndarray:
    """A small crop of a real photograph (skimage.data), different for each n."""
    from skimage import data

    source = (data.astronaut, data.chelsea, data.coffee, data.rocket)[n % 4]()
    y, x = 40 * (n // 4), 50 * (n // 4)
    return np.ascontiguousarray(source[y : y + 48, x : x + 64])


def photo_kb(tmp_path, *, checkpoint: bool = False):
    """The path of a closed three-photo knowledge base (astronaut, cat, coffee) on the fake stack."""
    from kira.knowledge_base import KnowledgeBase

    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        for n, name in enumerate(("astronaut", "cat", "coffee")):
            kb.add_image(photo(n), doc_id=name, caption=f"a photo of {name}")
        if checkpoint:
            kb.commit(checkpoint=True)
    return path

