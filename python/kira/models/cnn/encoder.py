"""The ImageNet CNN image encoder: one forward pass per image gives every vector kira stores for it.

For an image the graph yields the last feature map F (C, fh, fw), its global mean and the
classifier's logits. From that one pass:

- the document vector is the global mean of F (L2-normalised);
- a region or patch vector is the mean of F over the box, each grid cell weighted by
  how much of it the box covers, so a whole image's ~20 chunks cost one pass, not twenty;
- the activation energy sum_c F_c^2, upsampled to a finer grid, is the attention map the
  region proposer hands to the core's `extract_regions` (`ActivationProposer`);
- softmax(logits) are the ImageNet class probabilities the tagger reads.

Images are converted explicitly to RGB (grey, palette, 16-bit and alpha images go
through `kira.images.load_image`) and resized with Pillow (bilinear, antialiased) to
`size` x `size`, so an image smaller than the input is upsampled, never refused.
Forward results are kept in a small content-keyed cache, so the proposer, the encoder
and the tagger share one pass during ingestion.

The ONNX graph is built from the checkpoint's arrays (no torch) into the cache
directory (`KIRA_CACHE_DIR`, else ~/.cache/kira) under a name keyed by the weights'
SHA-256 and the builder version.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kira.images import ImageLike, load_image
from kira.models.cnn import weights as W

logger = logging.getLogger(__name__)

BUILDER_VERSION = 1  # bump when a graph builder changes; part of the cache key


@dataclass(frozen=True)
class CnnConfig:
    """Identity and preprocessing of an ImageNet CNN encoder; travels with the knowledge base."""

    name: str = "mobilenet_v2-imagenet-224"  # identity stored with a knowledge base
    arch: str = "mobilenet_v2"  # "mobilenet_v2" or "efficientnet_lite0"
    size: int = 224  # input side: every image (and crop) is resized to size x size
    attention_upsample: int = 4  # the activation grid is upsampled this many times for extract_regions
    batch_size: int = 16  # images per onnxruntime call
    cache_items: int = 64  # forward results kept (content-keyed) so chunking, encoding and tagging share one pass


MOBILENET_V2_224 = CnnConfig()
EFFICIENTNET_LITE0_224 = CnnConfig(name="efficientnet_lite0-imagenet-224", arch="efficientnet_lite0")


@dataclass(frozen=True)
class Forward:
    """One image's forward pass: the last feature map, its global mean and the class logits."""

    feature_map: np.ndarray  # float32 (C, fh, fw)
    pooled: np.ndarray  # float32 (C,)
    logits: np.ndarray  # float32 (classes,)
    width: int  # the original image's size, for mapping boxes onto the grid
    height: int

    def probabilities(self) -> np.ndarray:
        """softmax(logits), float64 (classes,)."""
        z = self.logits.astype(np.float64)
        e = np.exp(z - z.max())
        return e / e.sum()

    def box_vector(self, box: tuple[int, int, int, int] | None) -> np.ndarray:
        """The mean of the feature map over `box` (x0, y0, x1, y1 in image pixels; None: the whole image),
        each cell weighted by its overlap with the box. float32 (C,), not normalised."""
        return self.box_vectors([box])[0]

    def box_vectors(self, boxes: Sequence[tuple[int, int, int, int] | None]) -> np.ndarray:
        """`box_vector` of several boxes at once, float32 (len(boxes), C)."""
        c, fh, fw = self.feature_map.shape
        whole = np.array([[0, 0, self.width, self.height]], np.float64)
        b = np.array([whole[0] if box is None else box for box in boxes], np.float64).reshape(-1, 4)
        ex = np.linspace(0.0, float(self.width), fw + 1)
        ey = np.linspace(0.0, float(self.height), fh + 1)
        wx = np.clip(np.minimum(ex[None, 1:], b[:, 2:3]) - np.maximum(ex[None, :-1], b[:, 0:1]), 0.0, None)
        wy = np.clip(np.minimum(ey[None, 1:], b[:, 3:4]) - np.maximum(ey[None, :-1], b[:, 1:2]), 0.0, None)
        empty_x, empty_y = wx.sum(1) <= 0, wy.sum(1) <= 0
        if empty_x.any() or empty_y.any():  # a degenerate box: the cell holding its centre
            cx = np.clip(((b[:, 0] + b[:, 2]) / 2 / max(self.width, 1) * fw).astype(int), 0, fw - 1)
            cy = np.clip(((b[:, 1] + b[:, 3]) / 2 / max(self.height, 1) * fh).astype(int), 0, fh - 1)
            wx[empty_x] = np.eye(fw)[cx[empty_x]]
            wy[empty_y] = np.eye(fh)[cy[empty_y]]
        wx /= wx.sum(1, keepdims=True)
        wy /= wy.sum(1, keepdims=True)
        weights = (wy[:, :, None] * wx[:, None, :]).reshape(len(b), fh * fw).astype(np.float32)
        cells = np.ascontiguousarray(self.feature_map.reshape(c, fh * fw).T)  # (cells, C)
        # (boxes, cells) x (cells, C) by numpy's own loop, not BLAS: a product this small would wake
        # OpenBLAS's worker threads, which then spin for a while and take the cores from the next
        # onnxruntime call (measured: ingest CPU per image 0.07 -> 0.05 s on 2 cores)
        out = np.einsum("bk,kc->bc", weights, cells, optimize=False)
        for i, box in enumerate(boxes):
            if box is None:
                out[i] = self.pooled  # exactly the graph's global mean
        return np.ascontiguousarray(out, dtype=np.float32)

    def energy(self, upsample: int = 1) -> np.ndarray:
        """Activation energy sum_c F_c^2 on the grid (upsampled bilinearly `upsample` times), float32."""
        e = np.square(self.feature_map).sum(axis=0)
        if upsample > 1:
            from scipy.ndimage import zoom

            e = zoom(e, upsample, order=1, mode="nearest", grid_mode=True)
        return np.ascontiguousarray(e, dtype=np.float32)


def _build(config: CnnConfig, cache: Path | None) -> tuple[Path, W.WeightSource]:
    from kira.models.torch_checkpoint import CheckpointError, load_state_dict

    if config.arch == "mobilenet_v2":
        from kira.models.cnn.mobilenet_v2 import build_graph

        source = W.MOBILENET_V2
    elif config.arch == "efficientnet_lite0":
        from kira.models.cnn.efficientnet_lite import build_graph  # type: ignore[no-redef, assignment]

        source = W.EFFICIENTNET_LITE0
    else:
        raise ValueError(f"unknown CNN architecture {config.arch!r}; choose 'mobilenet_v2' or 'efficientnet_lite0'")
    path = W.weight_file(source)
    digest = W.check_digest(path, source)
    out_dir = (Path(cache) if cache is not None else W.cache_dir()) / "cnn"
    target = out_dir / f"{config.arch}-{digest[:16]}-b{BUILDER_VERSION}.onnx"
    if target.is_file():
        return target, source
    logger.info("building the %s ONNX graph from %s into %s", config.arch, path, target)
    try:
        sd = load_state_dict(path)
    except CheckpointError as exc:
        raise ValueError(f"{path} cannot be read ({exc}); reinstall with `{source.install_hint} --force-reinstall`") from exc
    return W.write_atomic(target, build_graph(sd).SerializeToString()), source


@functools.lru_cache(maxsize=8)
def _session(path: str, mtime_ns: int, prefer_cuda: bool, threads: int | None) -> Any:
    from kira.models.runtime import open_session

    return open_session(path, prefer_cuda=prefer_cuda, threads=threads)


class CnnImageEncoder:
    """ImageNet CNN (MobileNetV2 by default) -> float32 (n, 1280) unit vectors (an ImageEncoder).

    Parameters: config (CnnConfig; MobileNetV2 at 224 px by default), cache (directory
    for the built graph; default KIRA_CACHE_DIR or ~/.cache/kira), prefer_cuda, threads
    (onnxruntime intra-op threads). Raises WeightsNotInstalled (an ImportError) naming
    the wheel to install when the weights are missing, ValueError when they are corrupt.
    Thread safety: `encode`, `forward` and `encode_boxes` may run in several threads
    (onnxruntime sessions are thread-safe; the cache is locked).
    """

    def __init__(self, config: CnnConfig | None = None, *, cache: str | os.PathLike | None = None,
                 prefer_cuda: bool = True, threads: int | None = None) -> None:
        self.config = config or MOBILENET_V2_224
        if self.config.size < 32:
            raise ValueError(f"size must be at least 32 pixels, got {self.config.size}")
        self.onnx_path, self.source = _build(self.config, None if cache is None else Path(cache))
        self._session = _session(str(self.onnx_path), self.onnx_path.stat().st_mtime_ns, prefer_cuda, threads)
        self.provider = self._session.provider
        shape = self._session.session.get_outputs()[1].shape
        self.dim = int(shape[1])
        self._cache: collections.OrderedDict[bytes, Forward] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._pinned: dict[int, tuple[np.ndarray, bytes]] = {}  # id -> (the array, its content key); see `pinned`

    # ---- preprocessing ------------------------------------------------------------------
    def preprocess(self, image: np.ndarray) -> np.ndarray:
        """uint8 RGB (h, w, 3) -> float32 (3, size, size) in [0, 1] (the graph normalises further)."""
        from PIL import Image

        s = self.config.size
        pil = Image.fromarray(image)
        if pil.size != (s, s):
            pil = pil.resize((s, s), Image.Resampling.BILINEAR, reducing_gap=None)
        return np.asarray(pil, dtype=np.float32).transpose(2, 0, 1) / 255.0

    # ---- forward passes -----------------------------------------------------------------
    @staticmethod
    def _key(image: np.ndarray) -> bytes:
        h = hashlib.blake2b(np.ascontiguousarray(image).data.cast("B"), digest_size=16)
        h.update(np.asarray(image.shape, np.int64).tobytes())
        return h.digest()

    def _key_of(self, image: np.ndarray) -> bytes:
        with self._lock:
            pin = self._pinned.get(id(image))
        return pin[1] if pin is not None and pin[0] is image else self._key(image)

    @contextlib.contextmanager
    def pinned(self, images: Sequence[np.ndarray]) -> Iterator[None]:
        """Within the block, each of `images` (uint8 RGB arrays the caller does not change meanwhile) is
        known by identity: its content key is computed once here, not again by every `forward` that the
        region proposer, the tagger and `encode_boxes` make for it (hashing a photo costs about 0.5 ms,
        six times per image at ingest). Arrays are held, so an id is not reused while pinned."""
        mine = {id(a): (a, self._key(a)) for a in images}
        with self._lock:
            fresh = {k: v for k, v in mine.items() if k not in self._pinned}
            self._pinned.update(fresh)
        try:
            yield
        finally:
            with self._lock:
                for k in fresh:
                    self._pinned.pop(k, None)

    def forward(self, images: Sequence[ImageLike]) -> list[Forward]:
        """One forward pass per image (cached by content): feature map, pooled vector and logits.

        Raises kira.images.ImageError for input that is not an image.
        """
        arrays = [load_image(im) for im in images]
        keys = [self._key_of(a) for a in arrays]
        out: list[Forward | None] = []
        with self._lock:
            for k in keys:
                hit = self._cache.get(k)
                if hit is not None:
                    self._cache.move_to_end(k)
                out.append(hit)
        todo = [i for i, f in enumerate(out) if f is None]
        bs = self.config.batch_size
        for start in range(0, len(todo), bs):
            idx = todo[start : start + bs]
            batch = np.stack([self.preprocess(arrays[i]) for i in idx])
            fmap, pooled, logits = self._session.run({"pixels": batch}, ["feature_map", "pooled", "logits"])
            for j, i in enumerate(idx):
                h, w = arrays[i].shape[:2]
                out[i] = Forward(fmap[j], pooled[j], logits[j], w, h)
        with self._lock:
            for i in todo:
                self._cache[keys[i]] = out[i]  # type: ignore[assignment]
                self._cache.move_to_end(keys[i])
            while len(self._cache) > self.config.cache_items:
                self._cache.popitem(last=False)
        return out  # type: ignore[return-value]

    def encode(self, images: Sequence[ImageLike]) -> np.ndarray:
        """Global-pooled features of each image, float32 (n, dim) with unit rows; (0, dim) for []."""
        if isinstance(images, np.ndarray) and images.ndim == 3:
            raise ValueError("encode takes a sequence of images; wrap a single image in a list")
        images = list(images)
        if not images:
            return np.zeros((0, self.dim), np.float32)
        return _unit(np.stack([f.pooled for f in self.forward(images)]))

    def encode_boxes(self, image: ImageLike, boxes: Sequence[tuple[int, int, int, int] | None]) -> np.ndarray:
        """Vectors of several boxes of one image from a single forward pass, float32 (len(boxes), dim), unit rows.

        A box is (x0, y0, x1, y1) in the image's pixels (x1, y1 exclusive); None is the
        whole image (the document vector, equal to `encode([image])[0]`).
        """
        (f,) = self.forward([image])
        if not boxes:
            return np.zeros((0, self.dim), np.float32)
        return _unit(f.box_vectors(list(boxes)))

    def probabilities(self, image: ImageLike) -> np.ndarray:
        """ImageNet class probabilities of one image, float64 (classes,)."""
        return self.forward([image])[0].probabilities()


class ActivationProposer:
    """Region proposer from the CNN's last feature map: its activation energy (a RegionProposer).

    The grid (fh * upsample, fw * upsample) goes to the core's extract_regions, which
    thresholds it at mean + k_sigma * std. Shares the encoder's cached forward pass.
    """

    def __init__(self, encoder: CnnImageEncoder) -> None:
        self.encoder = encoder
        self.config = encoder.config

    def propose(self, image: np.ndarray) -> np.ndarray:
        """float32 activation-energy grid over the image; higher = more activated."""
        (f,) = self.encoder.forward([image])
        return f.energy(self.encoder.config.attention_upsample)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return np.ascontiguousarray(x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12), dtype=np.float32)
