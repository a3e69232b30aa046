"""Local-difference scores: how well each class's stored patches cover every patch of an image.

A document-level vector pools the whole image, so a difference that covers a few percent
of it is averaged away. Patch-based anomaly detection (PatchCore and its kin) keeps a
memory of patch vectors and scores an image by its worst-covered patch: the patch whose
nearest neighbour in the memory is farthest. Here the memory is per class (every patch
vector of that class's labelled images, as kira stores them at ingest), and an image's
local score for a class is the mean, over its least-covered `WORST_SHARE` of patches, of
each patch's cosine to its nearest patch of that class. The class whose patches leave no
part of the image uncovered scores highest, even when the images agree everywhere else.

Applying is numpy only; memory is (patches of the labelled images, dim) per knowledge base.
"""

from __future__ import annotations

import numpy as np

WORST_SHARE = 0.25  # the least-covered quarter of an image's patches decides its local score
BLOCK = 256  # images scored per block: memory (BLOCK * patches, memory rows) float32


def unit_rows(x: np.ndarray) -> np.ndarray:
    """float32 copy of `x` with its last axis scaled to unit length (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    return (x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)).astype(np.float32)


def check_patches(patches: np.ndarray, n: int, dim: int) -> np.ndarray:
    """`patches` as float32 (n, p, dim) with unit rows.

    Raises ValueError naming the expected shape when it is not (n, p, dim) with p >= 1.
    """
    p = np.asarray(patches, dtype=np.float32)
    if p.ndim != 3 or p.shape[0] != n or p.shape[2] != dim or p.shape[1] < 1:
        raise ValueError(f"patches must be (n_images, n_patches, dim) = ({n}, p, {dim}); got {p.shape}: pass "
                         "the same number of patch vectors for every image, from the encoder of the features")
    return unit_rows(p)


def patch_coverage(patches: np.ndarray, memory: np.ndarray, memory_class: np.ndarray, n_classes: int,
                   *, worst_share: float = WORST_SHARE) -> np.ndarray:
    """Local scores (n, n_classes): per image and class, the mean cosine of its least-covered patches
    to their nearest patch of that class in `memory`.

    `patches` (n, p, dim) unit rows; `memory` (m, dim) unit rows; `memory_class` (m,) class index
    per memory row. A class with no memory row scores -1. Raises ValueError on mismatched shapes.
    """
    patches = np.asarray(patches, dtype=np.float32)
    memory = np.asarray(memory, dtype=np.float32)
    memory_class = np.asarray(memory_class, dtype=np.int64)
    if patches.ndim != 3 or memory.ndim != 2 or patches.shape[2] != memory.shape[1] or len(memory_class) != len(memory):
        raise ValueError(f"patches (n, p, dim) and memory (m, dim) with one class per memory row; got "
                         f"{patches.shape}, {memory.shape}, {memory_class.shape}")
    n, p, _ = patches.shape
    keep = max(1, int(np.ceil(worst_share * p)))
    out = np.full((n, n_classes), -1.0, dtype=np.float32)
    members = [np.flatnonzero(memory_class == c) for c in range(n_classes)]
    for start in range(0, n, BLOCK):
        block = patches[start : start + BLOCK]
        sims = block.reshape(-1, block.shape[2]) @ memory.T  # (b * p, m)
        for c, rows in enumerate(members):
            if not len(rows):
                continue
            nearest = sims[:, rows].max(axis=1).reshape(len(block), p)  # each patch's best match in class c
            worst = np.partition(nearest, keep - 1, axis=1)[:, :keep] if keep < p else nearest
            out[start : start + len(block), c] = worst.mean(axis=1)
    return out
