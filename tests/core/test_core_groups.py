"""GroupMap and capped search (`search(..., groups=, per_group=)`): at most n results per group."""

from __future__ import annotations

import numpy as np
import pytest

from kira import _core
from kira.eval.synthetic import clustered_vectors


def capped_reference(x: np.ndarray, ids: np.ndarray, group: np.ndarray, q: np.ndarray, k: int, cap: int,
                     allow: np.ndarray | None = None) -> list[np.ndarray]:
    """Exact top-k under the cap by brute force: rank all rows (score desc, id asc), keep each
    row while its group holds fewer than `cap` kept rows."""
    units = x / np.linalg.norm(x, axis=1, keepdims=True)
    out = []
    for row in q:
        s = units @ (row / np.linalg.norm(row))
        held: dict[int, int] = {}
        kept = []
        for i in np.lexsort((ids, -s)):
            if allow is not None and ids[i] not in allow:
                continue
            if held.get(group[i], 0) < cap:
                held[group[i]] = held.get(group[i], 0) + 1
                kept.append(ids[i])
                if len(kept) == k:
                    break
        out.append(np.array(kept, dtype=np.int64))
    return out


@pytest.fixture(scope="module")
def data():
    """4,000 x 48 clustered rows in groups of 8 (consecutive ids), one group made of 8 copies of a row."""
    x = clustered_vectors(4000, 48, sample=0)
    x[800:808] = x[800]  # a document whose chunks all share one vector (captions repeated by regions)
    ids = np.arange(5, 4005, dtype=np.int64)
    group = (ids - 5) // 8
    q = clustered_vectors(12, 48, sample=1)
    q[0] = x[800]
    return x, ids, group, q


def test_group_map_labels_and_own_groups():
    g = _core.GroupMap(np.array([3, 4, 9], np.int64), np.array([3, 3, 7], np.int64))
    assert len(g) == 3
    np.testing.assert_array_equal(g.group_of([3, 4, 9, 5, 1_000_000]), [3, 3, 7, -6, -1_000_001])
    sparse = _core.GroupMap(np.array([10**12, 5], np.int64), np.array([1, 1], np.int64))  # hash-map storage
    np.testing.assert_array_equal(sparse.group_of([10**12, 5, 6]), [1, 1, -7])


@pytest.mark.parametrize(
    "ids, groups, message",
    [
        ([1, 2], [1], "2 ids but 1 groups"),
        ([1, -2], [1, 1], "ids must be non-negative"),
        ([1, 2], [1, -1], "groups must be non-negative"),
        ([1, 1], [1, 2], "id 1 appears twice"),
        ([1.5], [1], "must be integers"),
    ],
)
def test_group_map_rejects_bad_labels(ids, groups, message):
    with pytest.raises(ValueError, match=message):
        _core.GroupMap(np.asarray(ids), np.asarray(groups))


@pytest.mark.parametrize("dtype", ["f32", "f16", "i8"])
@pytest.mark.parametrize("cap", [1, 2, 3])
def test_flat_capped_search_is_the_exact_capped_top_k(data, dtype, cap):
    x, ids, group, q = data
    index = _core.FlatIndex(48, dtype=dtype)
    index.add(ids, x)
    gm = _core.GroupMap(ids, group)
    found, scores = index.search(q, 30, groups=gm, per_group=cap)
    if dtype == "f32":
        for row, want in zip(found, capped_reference(x, ids, group, q, 30, cap)):
            np.testing.assert_array_equal(row, want)
    for row, row_scores in zip(found, scores):
        assert np.bincount(gm.group_of(row)).max() <= cap
        assert np.all(np.diff(row_scores) <= 0)
    # The copies' group holds the best `cap` results of query 0 and no more.
    assert np.sum((found[0] >= 805) & (found[0] < 813)) == cap


def test_flat_capped_search_threaded_paths_agree(data):
    """Rows split over threads (few queries) and queries split over threads give the 1-thread answer."""
    x, ids, group, _ = data
    big = np.tile(x, (6, 1))  # 24k x 48 x 4 B x 8 queries crosses the 16 MiB threading threshold
    big_ids = np.arange(len(big), dtype=np.int64)
    gm = _core.GroupMap(big_ids, big_ids % 4000 // 8)  # the tiles' copies of a row share its group
    index = _core.FlatIndex(48)
    index.add(big_ids, big)
    for m in (2, 16):
        q = clustered_vectors(m, 48, sample=2)
        one, _ = index.search(q, 20, groups=gm, per_group=2, threads=1)
        many, _ = index.search(q, 20, groups=gm, per_group=2, threads=2)
        np.testing.assert_array_equal(one, many)
        want = capped_reference(big, big_ids, big_ids % 4000 // 8, q, 20, 2)
        for row, w in zip(one, want):
            np.testing.assert_array_equal(row, w)


def test_capped_search_with_allow(data):
    x, ids, group, q = data
    gm = _core.GroupMap(ids, group)
    rng = np.random.default_rng(0)
    for size in (200, 3000):  # the small-allow scan and the filtered scan / graph search
        allow = np.sort(rng.choice(ids, size, replace=False))
        want = capped_reference(x, ids, group, q, 15, 1, allow=set(allow.tolist()))
        for cls in (_core.FlatIndex, _core.HNSWIndex):
            index = cls(48)
            index.add(ids, x)
            if cls is _core.HNSWIndex:
                index.ef_search = 400
            found, _ = index.search(q, 15, allow=allow, groups=gm, per_group=1)
            for row, w in zip(found, want):
                assert set(row) <= set(allow.tolist())
                assert len(set(gm.group_of(row).tolist())) == len(row)
                if cls is _core.FlatIndex or size == 200:  # exact paths
                    np.testing.assert_array_equal(row, w)


def test_hnsw_capped_search_recall_and_cap(data):
    x, ids, group, q = data
    gm = _core.GroupMap(ids, group)
    index = _core.HNSWIndex(48, M=16, ef_construction=100, seed=1)
    index.add(ids, x)
    for cap in (1, 2):
        found, _ = index.search(q, 30, groups=gm, per_group=cap)
        want = capped_reference(x, ids, group, q, 30, cap)
        for row in found:
            assert np.bincount(gm.group_of(row)).max() <= cap
        recall = np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, want)])
        assert recall >= 0.95, recall
    # Without the cap the copies fill the top 8; with cap 1 one of them comes back, then other groups.
    plain, _ = index.search(q[:1], 8)
    assert set(plain[0]) == set(range(805, 813))
    capped, _ = index.search(q[:1], 8, groups=gm, per_group=1)
    assert np.sum((capped[0] >= 805) & (capped[0] < 813)) == 1
    assert np.all(capped[0] >= 0)


def test_capped_search_pads_when_groups_run_out():
    ids = np.arange(6, dtype=np.int64)
    x = np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32)
    gm = _core.GroupMap(ids, np.array([0, 0, 0, 1, 1, 1], np.int64))
    for cls in (_core.FlatIndex, _core.HNSWIndex):
        index = cls(8)
        index.add(ids, x)
        found, scores = index.search(x[:1], 5, groups=gm, per_group=2)
        assert list(found[0][4:]) == [-1] and np.isneginf(scores[0][4])
        assert sorted(np.bincount(found[0][:4] // 3)) == [2, 2]


def test_capped_search_rejects_bad_per_group(data):
    x, ids, group, q = data
    index = _core.FlatIndex(48)
    index.add(ids, x)
    with pytest.raises(ValueError, match="per_group must be a positive integer"):
        index.search(q, 5, groups=_core.GroupMap(ids, group), per_group=0)
    with pytest.raises(TypeError):
        index.search(q, 5, groups=np.zeros(3))


def test_clustered_vectors_are_seeded_and_share_a_distribution():
    a = clustered_vectors(500, 16, sample=0)
    np.testing.assert_array_equal(a, clustered_vectors(500, 16, sample=0))  # same seed and sample, same draw
    b = clustered_vectors(500, 16, sample=1)
    assert not np.array_equal(a, b) and a.dtype == np.float32 and a.shape == (500, 16)
    unit = clustered_vectors(500, 16, sample=0, unit=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(unit, a / np.linalg.norm(a, axis=1, keepdims=True), rtol=1e-6)
    # queries of sample 1 sit nearer the base set of sample 0 (one distribution) than uniform directions do
    base = clustered_vectors(2000, 64, sample=0, unit=True)
    queries = clustered_vectors(200, 64, sample=1, unit=True)
    uniform = np.random.default_rng(0).normal(size=(200, 64))
    uniform /= np.linalg.norm(uniform, axis=1, keepdims=True)
    assert np.median((queries @ base.T).max(axis=1)) > np.median((uniform @ base.T).max(axis=1)) + 0.1
