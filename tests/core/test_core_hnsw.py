"""HNSWIndex: recall against FlatIndex on clustered data, determinism, tombstones, filters."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kira import _core
from kira.eval.synthetic import clustered_vectors


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / truth.shape[1] for a, b in zip(found, truth)]))


@pytest.fixture(scope="session")
def big():
    """50k x 128 clustered, HNSW (M=16, ef_construction=100) and the exact top-10."""
    x = clustered_vectors(50_000, 128, sample=0)
    q = clustered_vectors(300, 128, sample=1)
    ids = np.arange(len(x), dtype=np.int64)
    flat = _core.FlatIndex(128)
    flat.add(ids, x)
    truth, _ = flat.search(q, 10)
    hnsw = _core.HNSWIndex(128, M=16, ef_construction=100, seed=1)
    hnsw.add(ids, x)
    return hnsw, q, truth


@pytest.fixture(scope="module")
def medium():
    x = clustered_vectors(8_000, 64, sample=2)
    q = clustered_vectors(100, 64, sample=3)
    ids = np.arange(len(x), dtype=np.int64) * 3 + 1
    flat = _core.FlatIndex(64)
    flat.add(ids, x)
    return ids, x, q, flat


@pytest.fixture(scope="module")
def medium_hnsw(medium) -> _core.HNSWIndex:
    """An HNSW over `medium` that tests only read."""
    ids, x, _, _ = medium
    index = _core.HNSWIndex(64, M=16, ef_construction=100)
    index.add(ids, x)
    return index


def test_recall_at_ef64_against_flat(big):
    hnsw, q, truth = big
    hnsw.ef_search = 64
    found, scores = hnsw.search(q, 10)
    assert recall(found, truth) >= 0.95
    assert np.all(np.diff(scores, axis=1) <= 0)
    hnsw.ef_search = 8
    low = recall(hnsw.search(q, 10)[0], truth)
    hnsw.ef_search = 64
    assert low < recall(found, truth)  # ef_search really changes the search


def test_per_call_ef_matches_the_setting_and_leaves_it_alone(big):
    hnsw, q, truth = big
    hnsw.ef_search = 8
    low_ids, low_scores = hnsw.search(q, 10)
    hnsw.ef_search = 64
    high_ids, high_scores = hnsw.search(q, 10)
    for ef, ids, scores in ((8, low_ids, low_scores), (64, high_ids, high_scores)):
        got_ids, got_scores = hnsw.search(q, 10, ef=ef, threads=2)
        np.testing.assert_array_equal(got_ids, ids)
        np.testing.assert_array_equal(got_scores, scores)
    assert hnsw.ef_search == 64  # the per-call ef did not change the shared setting
    assert recall(hnsw.search(q, 10, ef=8)[0], truth) < recall(hnsw.search(q, 10, ef=200)[0], truth)
    # below k the list is k long, as with ef_search
    np.testing.assert_array_equal(hnsw.search(q, 10, ef=1)[0], hnsw.search(q, 10, ef=10)[0])


def test_concurrent_searches_each_keep_their_own_ef(big):
    hnsw, q, _ = big
    expected = {ef: hnsw.search(q[:40], 10, ef=ef)[0] for ef in (8, 200)}
    with ThreadPoolExecutor(4) as pool:
        futures = [(ef, pool.submit(hnsw.search, q[:40], 10, ef=ef, threads=1)) for _ in range(6) for ef in (8, 200)]
        for ef, future in futures:
            np.testing.assert_array_equal(future.result()[0], expected[ef])


@pytest.mark.parametrize("ef", [0, -3])
def test_per_call_ef_must_be_positive(medium_hnsw, ef):
    with pytest.raises(ValueError, match="ef must be a positive integer"):
        medium_hnsw.search(np.ones(64, np.float32), 5, ef=ef)


def test_flat_index_takes_no_ef():
    flat = _core.FlatIndex(4)
    flat.add(np.arange(3), np.eye(3, 4, dtype=np.float32))
    with pytest.raises(TypeError):
        flat.search(np.ones(4, np.float32), 2, ef=10)


def test_batch_threads_equal_single_queries(big):
    hnsw, q, _ = big
    batch_ids, batch_scores = hnsw.search(q[:50], 10, threads=2)
    for r in range(50):
        ids, scores = hnsw.search(q[r], 10, threads=1)
        np.testing.assert_array_equal(ids[0], batch_ids[r])
        np.testing.assert_array_equal(scores[0], batch_scores[r])


@pytest.mark.parametrize(("dtype", "minimum"), [("f16", 0.97), ("i8", 0.93)])
def test_quantised_storage_recall(medium, dtype, minimum):
    ids, x, q, flat = medium
    truth, _ = flat.search(q, 10)
    index = _core.HNSWIndex(64, M=16, ef_construction=100, dtype=dtype)
    index.add(ids, x)
    index.ef_search = 64
    found, scores = index.search(q, 10)
    assert index.dtype == dtype
    assert recall(found, truth) >= minimum
    # quantisation error: each returned score against the exact cosine of the id it was returned with (comparing
    # with the exact top-1 score instead mixed in the graph's occasional rank-1 miss, a flaky failure)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    qu = q / np.linalg.norm(q, axis=1, keepdims=True)
    exact = np.einsum("qkd,qd->qk", unit[(found - 1) // 3], qu)
    assert np.abs(scores - exact).max() < (2e-3 if dtype == "f16" else 2.5e-2)


def test_deterministic_for_a_seed_with_one_thread(medium, tmp_path):
    ids, x, q, _ = medium

    def build(seed: int) -> _core.HNSWIndex:
        index = _core.HNSWIndex(64, M=8, ef_construction=40, seed=seed)
        index.add(ids[:3000], x[:3000], threads=1)
        return index

    a, b, c = build(7), build(7), build(8)
    a.save(tmp_path / "a.kira")
    b.save(tmp_path / "b.kira")
    c.save(tmp_path / "c.kira")
    assert (tmp_path / "a.kira").read_bytes() == (tmp_path / "b.kira").read_bytes()
    assert (tmp_path / "a.kira").read_bytes() != (tmp_path / "c.kira").read_bytes()
    np.testing.assert_array_equal(a.search(q, 10)[0], b.search(q, 10)[0])


def test_removed_ids_never_come_back(medium):
    ids, x, q, flat = medium
    index = _core.HNSWIndex(64, M=16, ef_construction=100)
    index.add(ids, x)
    truth, _ = flat.search(q, 10)
    gone = np.unique(truth[:, :5])  # remove the best answers, the ones most likely to resurface
    index.remove(gone)
    assert len(index) == len(ids) - len(gone)
    assert not any(index.contains(int(i)) for i in gone)
    index.ef_search = 200
    found, _ = index.search(q, 50)
    assert not np.isin(found, gone).any()
    kept = np.setdiff1d(ids, gone)
    np.testing.assert_array_equal(index.ids(), kept)
    exact = _core.FlatIndex(64)
    exact.add(kept, index.get_vectors(kept))
    assert recall(index.search(q, 10)[0], exact.search(q, 10)[0]) >= 0.95
    with pytest.raises(ValueError, match="not in the index"):
        index.remove(gone[:1])
    with pytest.raises(ValueError, match="not in the index"):
        index.get_vectors(gone[:1])
    index.add(gone[:1], x[:1])  # a removed id can be added again, as a new vector
    assert index.contains(int(gone[0]))
    np.testing.assert_allclose(index.get_vectors(gone[:1])[0], x[0] / np.linalg.norm(x[0]), atol=1e-6)


@pytest.mark.parametrize("fraction", [0.02, 0.6])
def test_allow_filters_results(medium, medium_hnsw, fraction):
    ids, x, q, flat = medium
    index = medium_hnsw
    allow = np.random.default_rng(3).choice(ids, int(len(ids) * fraction), replace=False)
    found, _ = index.search(q, 10, allow=allow)
    assert np.isin(found[found >= 0], allow).all()
    truth, _ = flat.search(q, 10, allow=allow)
    assert recall(found, truth) >= (1.0 if fraction < 0.1 else 0.9)


def test_padding_small_index_and_validation():
    index = _core.HNSWIndex(4, M=4, ef_construction=10)
    found, scores = index.search(np.ones(4, np.float32), 3)
    assert (found == -1).all() and np.isneginf(scores).all()
    index.add([3, 1, 2], np.eye(4, dtype=np.float32)[:3])
    found, scores = index.search(np.array([1, 0.5, 0.5, 0], np.float32), 5)
    assert list(found[0]) == [3, 1, 2, -1, -1]
    assert np.isneginf(scores[0, 3:]).all()
    with pytest.raises(ValueError, match="already in the index"):
        index.add([3], np.ones((1, 4), np.float32))
    with pytest.raises(ValueError, match="appears twice"):
        index.add([8, 8], np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="float32"):
        index.add([9], np.ones((1, 4)))
    with pytest.raises(ValueError, match="all zeros"):
        index.add([9, 10], np.array([[1, 0, 0, 0], [0, 0, 0, 0]], np.float32))
    assert len(index) == 3 and not index.contains(9)
    with pytest.raises(ValueError, match="ef_search"):
        index.ef_search = 0
    with pytest.raises(ValueError, match="k must be"):
        index.search(np.ones(4, np.float32), 0)
    with pytest.raises(ValueError, match="M must be"):
        _core.HNSWIndex(4, M=1)
    with pytest.raises(ValueError, match="threads"):
        index.add([11], np.ones((1, 4), np.float32), threads=-2)
    assert (index.M, index.ef_construction, index.seed, index.dim, index.dtype) == (4, 10, 0, 4, "f32")


def test_one_row_adds_after_a_load_keep_the_graph_searchable(medium, tmp_path):
    """Capacity grows geometrically across one-row adds (growth.hpp), also after a load
    that holds exactly its rows; every added row is found and recall stays at the batch's."""
    ids, x, q, flat = medium
    part = _core.HNSWIndex(64, M=16, ef_construction=100, seed=3)
    part.add(ids[:4000], x[:4000])
    part.save(str(tmp_path / "part.index"))
    grown = _core.HNSWIndex.load(str(tmp_path / "part.index"))
    for i in range(4000, len(ids)):
        grown.add(ids[i : i + 1], x[i : i + 1])
    assert len(grown) == len(ids) and np.array_equal(np.sort(grown.ids()), np.sort(ids))
    top, _ = grown.search(np.ascontiguousarray(x[4000::400]), 1, ef=64)  # an added row finds itself
    np.testing.assert_array_equal(top[:, 0], ids[4000::400])
    truth, _ = flat.search(q, 10)
    found, _ = grown.search(q, 10, ef=64)
    assert recall(found, truth) >= 0.9
    with pytest.raises(ValueError):  # a duplicate id is refused and changes nothing
        grown.add(ids[:1], x[:1])
    assert len(grown) == len(ids)
