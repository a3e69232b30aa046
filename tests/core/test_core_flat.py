"""FlatIndex against a numpy reference, for every storage dtype, plus its validation."""

from __future__ import annotations

import numpy as np
import pytest

from kira import _core

DIM = 48
# Tolerances on scores against float64 numpy: f32 rounding, f16 (11-bit mantissa) and i8
# (both sides quantised to 127 levels of their max |component|).
SCORE_TOL = {"f32": 1e-5, "f16": 2e-3, "i8": 2.5e-2}
# Fraction of the exact top-10 that each dtype must find on clustered data.
RECALL = {"f32": 1.0, "f16": 0.99, "i8": 0.95}


def clustered(n: int, d: int, seed: int, centers: int = 20) -> np.ndarray:
    """Seeded clustered float32 vectors (unnormalised), like faiss' SyntheticDataset."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centers, d))
    x = c[rng.integers(0, centers, n)] + 0.6 * rng.standard_normal((n, d))
    return (x * rng.uniform(0.5, 3.0, (n, 1))).astype(np.float32)


def unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = clustered(3000, DIM, 1)
    q = clustered(40, DIM, 2)
    ids = np.arange(3000, dtype=np.int64) * 7 + 3  # ids are not slots
    return ids, x, q


def reference(ids, x, q, k, allow=None):
    sims = unit(q) @ unit(x).T
    if allow is not None:
        sims[:, ~np.isin(ids, allow)] = -np.inf
    order = np.lexsort((np.broadcast_to(ids, sims.shape), -sims), axis=1)[:, :k]
    return ids[order], np.take_along_axis(sims, order, 1)


@pytest.mark.parametrize("dtype", ["f32", "f16", "i8"])
@pytest.mark.parametrize("threads", [1, 2])
def test_search_matches_numpy(data, dtype, threads):
    ids, x, q = data
    index = _core.FlatIndex(DIM, dtype=dtype)
    index.add(ids, x)
    got_ids, got_scores = index.search(q, 10, threads=threads)
    ref_ids, ref_scores = reference(ids, x, q, 10)
    assert got_ids.shape == (40, 10) and got_ids.dtype == np.int64 and got_scores.dtype == np.float32
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got_ids, ref_ids)])
    assert recall >= RECALL[dtype]
    # the score reported for each returned id is that id's true cosine within tolerance
    sims = unit(q) @ unit(x).T
    slot = {int(i): s for s, i in enumerate(ids)}
    true = np.array([[sims[r, slot[int(i)]] for i in row] for r, row in enumerate(got_ids)])
    assert np.abs(got_scores - true).max() <= SCORE_TOL[dtype]
    assert np.all(np.diff(got_scores, axis=1) <= 0)
    if dtype == "f32":
        np.testing.assert_array_equal(got_ids, ref_ids)


def test_batch_equals_single_queries(data):
    ids, x, q = data
    index = _core.FlatIndex(DIM)
    index.add(ids, x)
    batch_ids, batch_scores = index.search(q, 5)
    for r in range(len(q)):
        one_ids, one_scores = index.search(q[r], 5)
        np.testing.assert_array_equal(one_ids[0], batch_ids[r])
        np.testing.assert_allclose(one_scores[0], batch_scores[r], atol=1e-6)


@pytest.mark.parametrize("fraction", [0.01, 0.5])
def test_allow_restricts_results(data, fraction):
    ids, x, q = data
    index = _core.FlatIndex(DIM)
    index.add(ids, x)
    rng = np.random.default_rng(5)
    allow = rng.choice(ids, int(len(ids) * fraction), replace=False)
    allow_with_unknown = np.concatenate([allow, [10**12]])
    got_ids, got_scores = index.search(q, 10, allow=allow_with_unknown)
    ref_ids, ref_scores = reference(ids, x, q, 10, allow)
    np.testing.assert_array_equal(got_ids, ref_ids)
    np.testing.assert_allclose(got_scores, ref_scores, atol=1e-5)


def test_padding_when_fewer_than_k():
    index = _core.FlatIndex(4)
    index.add([5, 9], np.eye(4, dtype=np.float32)[:2])
    got_ids, got_scores = index.search(np.ones(4, np.float32), 4)
    assert list(got_ids[0]) == [5, 9, -1, -1]  # equal scores: smaller id first
    assert np.isneginf(got_scores[0, 2:]).all()
    empty = _core.FlatIndex(4)
    e_ids, e_scores = empty.search(np.ones((2, 4), np.float32), 3)
    assert (e_ids == -1).all() and np.isneginf(e_scores).all()


def test_remove_get_vectors_contains(data):
    ids, x, q = data
    index = _core.FlatIndex(DIM)
    index.add(ids, x)
    gone = ids[::3]
    index.remove(gone)
    assert len(index) == len(ids) - len(gone)
    assert not index.contains(int(gone[0])) and index.contains(int(ids[1]))
    kept = np.setdiff1d(ids, gone)
    np.testing.assert_array_equal(index.ids(), kept)
    got_ids, _ = index.search(q, 20)
    assert not np.isin(got_ids, gone).any()
    ref_ids, _ = reference(kept, x[np.isin(ids, kept)], q, 20)
    np.testing.assert_array_equal(got_ids, ref_ids)
    vec = index.get_vectors(ids[[1, 2]])
    np.testing.assert_allclose(vec, unit(x[[1, 2]]), atol=1e-6)
    with pytest.raises(ValueError, match="not in the index"):
        index.get_vectors([int(gone[0])])
    index.add(gone[:2], x[:2])  # removed ids may be added again
    assert index.contains(int(gone[0]))


def test_float64_and_layout_are_refused():
    index = _core.FlatIndex(8)
    x = np.ones((3, 8))
    with pytest.raises(ValueError, match="float32"):
        index.add([1, 2, 3], x)
    with pytest.raises(ValueError, match="float32"):
        index.search(x, 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        index.add([1, 2, 3], np.ones((8, 3), np.float32).T)
    with pytest.raises(ValueError, match="8 columns"):
        index.add([1, 2, 3], np.ones((3, 7), np.float32))
    with pytest.raises(ValueError, match="numpy float32 array"):
        index.add([1], [[1.0] * 8])
    with pytest.raises(ValueError, match="integers"):
        index.add(np.array([1.5]), np.ones((1, 8), np.float32))
    with pytest.raises(ValueError, match="one id per row"):
        index.add([1, 2], np.ones((3, 8), np.float32))
    assert len(index) == 0


@pytest.mark.parametrize(
    ("ids", "row", "message"),
    [
        ([1, 2, 3], (1, np.nan), "NaN or inf"),
        ([1, 2, 3], (2, np.inf), "NaN or inf"),
        ([1, 2, 3], (0, 0.0), "all zeros"),
        ([1, 2, 2], None, "appears twice"),
        ([1, 2, 7], None, "already in the index"),
        ([1, -4, 3], None, "non-negative"),
    ],
)
def test_failed_add_leaves_index_unchanged(ids, row, message):
    index = _core.FlatIndex(8)
    index.add([7], np.ones((1, 8), np.float32))
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    if row is not None:
        x[row[0]] = row[1]
    with pytest.raises(ValueError, match=message):
        index.add(ids, x)
    assert len(index) == 1 and list(index.ids()) == [7]


def test_bad_search_and_remove_arguments():
    index = _core.FlatIndex(8)
    index.add([1, 2], np.ones((2, 8), np.float32))
    q = np.ones(8, np.float32)
    for k in (0, -1):
        with pytest.raises(ValueError, match="k must be a positive"):
            index.search(q, k)
    with pytest.raises(ValueError, match="threads"):
        index.search(q, 1, threads=0)
    with pytest.raises(ValueError, match="all zeros"):
        index.search(np.zeros(8, np.float32), 1)
    with pytest.raises(ValueError, match="not in the index"):
        index.remove([1, 99])
    with pytest.raises(ValueError, match="appears twice"):
        index.remove([1, 1])
    assert len(index) == 2
    with pytest.raises(ValueError, match="dtype"):
        _core.FlatIndex(8, dtype="f64")
    with pytest.raises(ValueError, match="dim"):
        _core.FlatIndex(0)


def test_reports_simd_level_and_attributes():
    assert _core.simd_level() in {"avx512", "avx2", "scalar"}
    index = _core.FlatIndex(16, dtype="f16")
    assert index.dim == 16 and index.dtype == "f16" and len(index) == 0
    assert isinstance(index, _core.CosineIndex)


@pytest.mark.parametrize("dtype", ["f32", "f16", "i8"])
def test_one_row_adds_give_the_index_a_batch_add_gives(data, dtype, tmp_path):
    """Capacity grows geometrically across one-row adds (growth.hpp), also after a load;
    the rows, ids and searches are what one batch add gives."""
    ids, x, q = data
    batch = _core.FlatIndex(DIM, dtype=dtype)
    batch.add(ids, x)
    grown = _core.FlatIndex(DIM, dtype=dtype)
    grown.add(ids[:1000], x[:1000])
    grown.save(str(tmp_path / "part.index"))
    grown = _core.FlatIndex.load(str(tmp_path / "part.index"))  # a loaded index holds exactly its rows
    for i in range(1000, len(ids)):
        grown.add(ids[i : i + 1], x[i : i + 1])
    assert len(grown) == len(batch) and np.array_equal(np.sort(grown.ids()), np.sort(batch.ids()))
    np.testing.assert_array_equal(grown.get_vectors(ids[::97]), batch.get_vectors(ids[::97]))
    got, got_s = grown.search(q, 10)
    want, want_s = batch.search(q, 10)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-6)
    with pytest.raises(ValueError):  # a failed add after the growth still leaves the index as it was
        grown.add(ids[:1], x[:1])
    assert len(grown) == len(batch)
