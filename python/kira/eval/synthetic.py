"""Seeded synthetic vectors for the index tests and benchmarks (no model, no download).

`clustered_vectors` is the faiss SyntheticDataset idea: Gaussian clusters in a few
intrinsic dimensions mapped non-linearly into `d`, so nearest-neighbour structure is
realistic (low intrinsic dimension, uneven density) rather than the uniform sphere where
every index looks alike.
"""

from __future__ import annotations

import numpy as np


def clustered_vectors(n: int, d: int, *, sample: int, seed: int = 0, intrinsic: int = 10, centers: int = 64,
                      unit: bool = False) -> np.ndarray:
    """(n, d) float32 vectors. `seed` fixes the distribution, `sample` the draw, so a base set
    (sample 0) and its queries (sample 1) share one distribution; `unit` normalises the rows."""
    g = np.random.default_rng(seed)
    proj = g.standard_normal((intrinsic, d)) / np.sqrt(intrinsic)
    scale = g.uniform(0.5, 2.0, d)
    mu = g.standard_normal((centers, intrinsic)) * 2.0
    s = np.random.default_rng([seed, sample + 1])
    z = mu[s.integers(0, centers, n)] + s.standard_normal((n, intrinsic))
    x = np.sin((z @ proj) * scale).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True) if unit else x
