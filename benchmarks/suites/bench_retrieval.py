"""pytest-benchmark suites for kira's retrieval core: rrf_fuse, residual_hops, extract_regions,
expand_compound. CI runs them with --benchmark-disable as a correctness pass, so the data is
small; run `python -m pytest benchmarks/suites/bench_retrieval.py --benchmark-enable` for timings and
`python -m benchmarks.peers.compare_retrieval` for the side-by-side comparison with numpy/scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from kira import CompoundGroups, FlatIndex, expand_compound, extract_regions, residual_hops, rrf_fuse

DIM, N = 64, 5_000


def attention_grid(side: int, seed: int = 0) -> np.ndarray:
    """Smooth random attention: blobs like a ViT's CLS-to-patch map."""
    rng = np.random.default_rng(seed)
    return ndimage.gaussian_filter(rng.random((side, side)), 2).astype(np.float32)


@pytest.fixture(scope="module")
def flat() -> tuple[FlatIndex, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    index = FlatIndex(DIM)
    index.add(np.arange(N, dtype=np.int64), x)
    return index, x


@pytest.fixture(scope="module")
def rankings() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.permutation(10_000)[:50].astype(np.int64) for _ in range(2)]


def test_rrf_two_paths_of_50(benchmark, rankings):
    ids, scores = benchmark(rrf_fuse, rankings, [0.6, 0.4], 60)
    assert len(ids) == len(set(ids.tolist())) and np.all(np.diff(scores) <= 0)


@pytest.mark.parametrize("side", [28, 64])
def test_extract_regions(benchmark, side):
    a = attention_grid(side)
    boxes, scores, labels = benchmark(extract_regions, a, (224, 224))
    _, n = ndimage.label(a > a.mean() + 0.5 * a.std(), structure=np.ones((3, 3)))
    assert len(scores) == n and labels.max() == n


def test_residual_hops_flat(benchmark, flat):
    index, x = flat
    trace = benchmark(residual_hops, index, x[0], 10, confidence=2.0)
    assert trace.stop_reason in {"max_hops", "no_new"} and trace.ids[0] == 0


def test_expand_compound_50(benchmark):
    groups = CompoundGroups()
    for g in range(200):
        groups.add_temporal(list(range(10 * g, 10 * g + 5)))
        groups.add_multiview(list(range(10 * g + 5, 10 * g + 10)))
    ids = np.arange(0, 2000, 40, dtype=np.int64)
    scores = np.linspace(1, 0.5, len(ids)).astype(np.float32)
    out_ids, out_scores, origin = benchmark(expand_compound, groups, ids, scores)
    assert len(out_ids) == 5 * len(ids) and np.all(np.diff(out_scores) <= 0)
