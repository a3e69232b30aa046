"""Seeded synthetic vectors shared by the core index tests."""

from __future__ import annotations

import numpy as np


def clustered(n: int, d: int, *, sample: int, seed: int = 0, intrinsic: int = 10, centers: int = 64) -> np.ndarray:
    """Seeded clustered vectors of low intrinsic dimension (the faiss SyntheticDataset idea):
    Gaussian clusters in `intrinsic` dims mapped non-linearly into d dims. `seed` fixes the
    distribution, `sample` the draw, so base and queries share one distribution."""
    g = np.random.default_rng(seed)
    proj = g.standard_normal((intrinsic, d)) / np.sqrt(intrinsic)
    scale = g.uniform(0.5, 2.0, d)
    mu = g.standard_normal((centers, intrinsic)) * 2.0
    s = np.random.default_rng([seed, sample + 1])
    z = mu[s.integers(0, centers, n)] + s.standard_normal((n, intrinsic))
    return np.sin((z @ proj) * scale).astype(np.float32)
