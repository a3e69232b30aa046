"""pytest-benchmark suites for kira's indexes. CI runs them with --benchmark-disable as a
correctness pass, so the data is small; run `python -m pytest benchmarks/suites/bench_index.py
--benchmark-enable` for timings, and benchmarks/peers/compare_indexes.py for the peer comparison."""

from __future__ import annotations

import numpy as np
import pytest

from kira import _core
from kira.eval.synthetic import clustered_vectors

N, DIM, K = 5_000, 64, 10


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = clustered_vectors(N, DIM, sample=0)
    q = clustered_vectors(200, DIM, sample=1)
    flat = _core.FlatIndex(DIM)
    flat.add(np.arange(N), x)
    return x, q, flat.search(q, K)[0]


@pytest.fixture(scope="module")
def hnsw(data) -> _core.HNSWIndex:
    x, _, _ = data
    index = _core.HNSWIndex(DIM, M=16, ef_construction=100)
    index.add(np.arange(N), x)
    index.ef_search = 64
    return index


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(np.intersect1d(a, b)) / K for a, b in zip(found, truth)]))


@pytest.mark.parametrize("dtype", ["f32", "f16", "i8"])
def test_flat_single_query(benchmark, data, dtype):
    x, q, truth = data
    index = _core.FlatIndex(DIM, dtype=dtype)
    index.add(np.arange(N), x)
    ids, _ = benchmark(index.search, q[0], K)
    assert len(np.intersect1d(ids[0], truth[0])) >= 9


@pytest.mark.parametrize("dtype", ["f32", "f16", "i8"])
def test_flat_batch(benchmark, data, dtype):
    x, q, truth = data
    index = _core.FlatIndex(DIM, dtype=dtype)
    index.add(np.arange(N), x)
    ids, _ = benchmark(index.search, q, K)
    assert recall(ids, truth) >= 0.95


def test_hnsw_single_query(benchmark, data, hnsw):
    _, q, truth = data
    ids, _ = benchmark(hnsw.search, q[0], K)
    assert len(np.intersect1d(ids[0], truth[0])) >= 8


def test_hnsw_batch(benchmark, data, hnsw):
    _, q, truth = data
    ids, _ = benchmark(hnsw.search, q, K)
    assert recall(ids, truth) >= 0.95


def test_hnsw_build(benchmark, data):
    x, _, _ = data
    sub = x[:1000]

    def build() -> _core.HNSWIndex:
        index = _core.HNSWIndex(DIM, M=16, ef_construction=100)
        index.add(np.arange(len(sub)), sub)
        return index

    index = benchmark.pedantic(build, rounds=1, iterations=1)
    assert len(index) == 1000


def test_save_load(benchmark, data, tmp_path):
    x, q, _ = data
    index = _core.FlatIndex(DIM)
    index.add(np.arange(N), x)
    path = tmp_path / "flat.kira"

    def round_trip() -> _core.FlatIndex:
        index.save(path)
        return _core.FlatIndex.load(path)

    loaded = benchmark(round_trip)
    np.testing.assert_array_equal(loaded.search(q, K)[0], index.search(q, K)[0])


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_capped_batch(benchmark, data, hnsw, kind):
    """Top 50 with at most 2 per group of 10 consecutive ids (benchmarks/peers/compare_capped.py compares peers)."""
    x, q, _ = data
    ids = np.arange(N, dtype=np.int64)
    groups = _core.GroupMap(ids, ids // 10)
    flat = _core.FlatIndex(DIM)
    flat.add(ids, x)
    exact, _ = flat.search(q, 50, groups=groups, per_group=2)
    index = flat if kind == "flat" else hnsw
    found, _ = benchmark(index.search, q, 50, groups=groups, per_group=2)
    assert all(np.bincount(groups.group_of(row[row >= 0])).max() <= 2 for row in found)
    documents = np.mean([len(set(a // 10) & set(b // 10)) / len(set(b // 10)) for a, b in zip(found, exact)])
    assert documents >= (1.0 if kind == "flat" else 0.95)


def test_hnsw_build_spread_reports_one_recall_per_seed_and_ef():
    from benchmarks.peers.hnsw_build_spread import run

    results = run(n=3000, d=32, seeds=[0, 1], efs=[10, 200], queries=50)
    for name, by_ef in results.items():
        assert set(by_ef) == {10, 200} and all(len(v) == 2 for v in by_ef.values()), name
        assert all(0.0 <= r <= 1.0 for v in by_ef.values() for r in v)
        assert min(by_ef[200]) >= 0.98  # 3,000 points at ef 200: all but exact
    assert "kira" in results


def test_incremental_add_times_one_row_adds_of_every_contender():
    from benchmarks.peers.incremental_add import run

    results = run(n=2000, dim=32, adds=20)
    assert {"kira FlatIndex", "kira HNSWIndex"} <= set(results)
    for name, r in results.items():
        assert r["add_median_ms"] <= r["add_p99_ms"] and r["build_per_row_ms"] > 0, name
