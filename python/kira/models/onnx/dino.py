"""DINO's last-layer CLS attention as a region proposer, run by onnxruntime."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from kira.images import ImageLike, load_image
from kira.models.manifest import Manifest, load_manifest
from kira.models.onnx._run import l2_normalise, run, run_chunked
from kira.models.preprocess import preprocess_batch
from kira.models.runtime import open_session


class OnnxDinoRegionProposer:
    """Image -> (grid_h, grid_w) attention map for kira._core.extract_regions (RegionProposer).

    The map is the last layer's attention from the CLS token to every patch, averaged
    over heads and reshaped to the patch grid (DINO ViT-S/8 at 224 px: 28 x 28).
    Thread safety: safe to call from several threads.
    """

    def __init__(self, source: Manifest | str | os.PathLike, *, prefer_cuda: bool = True,
                 batch_size: int = 32, threads: int | None = None) -> None:
        self.manifest = source if isinstance(source, Manifest) else load_manifest(source)
        if self.manifest.kind != "dino":
            raise ValueError(f"{self.manifest.root}: this is a {self.manifest.kind} export, not dino")
        if self.manifest.preprocess is None:
            raise ValueError(f"{self.manifest.root}: DINO manifest has no preprocessing section")
        self.preprocess = self.manifest.preprocess
        self.session = open_session(self.manifest.path("model"), prefer_cuda=prefer_cuda, threads=threads)
        self.provider = self.session.provider
        self.grid = (int(self.manifest.dims["grid_h"]), int(self.manifest.dims["grid_w"]))
        self.dim = int(self.manifest.dims["hidden"])
        self.batch_size = batch_size

    def _outputs(self, images: list[ImageLike]) -> tuple[np.ndarray, np.ndarray]:
        def one(s: slice) -> np.ndarray:
            cls, attn = run(self.session, {"pixel_values": preprocess_batch(images[s], self.preprocess)})
            return np.concatenate([cls, attn.mean(axis=1)], axis=1)  # type: ignore[arg-type]

        out, self.batch_size = run_chunked(one, len(images), self.batch_size)
        return out[:, : self.dim], out[:, self.dim :]

    def attention(self, images: Sequence[ImageLike]) -> np.ndarray:
        """float32 (n, grid_h, grid_w): head-averaged CLS-to-patch attention per image."""
        _, attn = self._outputs(list(images))
        return np.ascontiguousarray(attn.reshape(len(attn), *self.grid), dtype=np.float32)

    def propose(self, image: np.ndarray) -> np.ndarray:
        """float32 (grid_h, grid_w) attention map of one image (uint8 RGB)."""
        return self.attention([load_image(image)])[0]

    def encode(self, images: Sequence[ImageLike]) -> np.ndarray:
        """float32 (n, hidden) unit CLS embeddings (DINO as an image encoder)."""
        cls, _ = self._outputs(list(images))
        return l2_normalise(cls)
