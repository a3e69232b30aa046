"""Concurrent use from Python threads: searches in parallel equal serial ones, and
writers interleaved with searches never expose a half-applied add."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kira import _core


@pytest.fixture(scope="module", params=["flat", "hnsw"])
def index_and_queries(request):
    rng = np.random.default_rng(21)
    x = rng.standard_normal((6000, 32)).astype(np.float32)
    index = _core.FlatIndex(32) if request.param == "flat" else _core.HNSWIndex(32, M=8, ef_construction=60)
    index.add(np.arange(len(x)), x)
    return index, rng.standard_normal((64, 32)).astype(np.float32)


def test_concurrent_searches_equal_serial(index_and_queries):
    index, q = index_and_queries
    serial = [index.search(q[i], 10, threads=1) for i in range(len(q))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda i: index.search(q[i], 10, threads=1), range(len(q))))
    for (a_ids, a_scores), (b_ids, b_scores) in zip(serial, parallel):
        np.testing.assert_array_equal(a_ids, b_ids)
        np.testing.assert_array_equal(a_scores, b_scores)
    batch_ids, _ = index.search(q, 10, threads=2)
    np.testing.assert_array_equal(batch_ids, np.vstack([s[0] for s in serial]))


def test_concurrent_capped_searches_share_one_group_map(index_and_queries):
    index, q = index_and_queries
    ids = np.arange(6000, dtype=np.int64)
    groups = _core.GroupMap(ids, ids // 7)
    serial = [index.search(q[i], 20, groups=groups, per_group=2, threads=1)[0] for i in range(len(q))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda i: index.search(q[i], 20, groups=groups, per_group=2, threads=1)[0],
                                 range(len(q))))
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)
        assert np.bincount(groups.group_of(a[0])).max() <= 2
    batch, _ = index.search(q, 20, groups=groups, per_group=2, threads=2)  # the batch split over threads too
    np.testing.assert_array_equal(batch, np.vstack(serial))


def test_writers_and_readers_interleave_safely():
    """Each add is seen whole or not at all: a reader never sees half of a batch."""
    index = _core.FlatIndex(8)
    index.add(np.arange(10), np.ones((10, 8), np.float32))
    stop = threading.Event()
    sizes: list[int] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                ids, _ = index.search(np.ones(8, np.float32), 2000)
                sizes.append(int((ids >= 0).sum()))
        except BaseException as e:  # noqa: BLE001 - surfaced by the assert below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for b in range(1, 40):
        index.add(np.arange(b * 50, b * 50 + 50) + 1000, np.ones((50, 8), np.float32))
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert sizes and all((s - 10) % 50 == 0 for s in sizes)
    assert len(index) == 10 + 39 * 50
