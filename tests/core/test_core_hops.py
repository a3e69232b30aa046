"""residual_hops against a numpy implementation of the same residual update."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from kira import FlatIndex, HNSWIndex, residual_hops


def unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def clustered(n, dim, clusters, seed):
    """Low-intrinsic-dimension data: points scattered around a few centres."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((clusters, dim)))
    x = centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim)) / math.sqrt(dim)
    return unit(x).astype(np.float32)


def reference_hops(vectors, q, k, beta, max_hops, confidence, allow=None):
    """Exact top-k by float64 matmul and the residual update written out in numpy."""
    ids = np.arange(len(vectors))
    if allow is not None:
        mask = np.isin(ids, allow)
        vectors, ids = vectors[mask], ids[mask]
    x = vectors.astype(np.float64)
    q = unit(q)
    seen: set[int] = set()
    hops = []
    best: dict[int, float] = {}
    reason = None
    for h in range(max_hops):
        s = x @ q
        order = np.lexsort((ids, -s))[:k]
        hop_ids, hop_scores = ids[order], s[order]
        conf = float(hop_scores.mean()) if len(order) else 0.0
        new = [i for i in hop_ids.tolist() if i not in seen]
        seen.update(hop_ids.tolist())
        for i, sc in zip(hop_ids.tolist(), hop_scores.tolist()):
            best[i] = max(best.get(i, -math.inf), sc)
        hops.append({"ids": hop_ids, "scores": hop_scores, "confidence": conf, "query": q, "new": len(new)})
        if len(order) and conf >= confidence:
            reason = "confidence"
            break
        if not new:
            reason = "no_new"
            break
        if h + 1 == max_hops:
            reason = "max_hops"
            break
        r = q - beta * x[order].mean(axis=0)
        q = r / np.linalg.norm(r)
    merged = sorted(best, key=lambda i: (-best[i], i))
    return hops, reason, merged, [best[i] for i in merged]


@pytest.fixture(scope="module")
def data():
    vectors = clustered(3000, 48, 12, seed=7)
    index = FlatIndex(48)
    index.add(np.arange(len(vectors), dtype=np.int64), vectors)
    return vectors, index


def assert_trace_matches(trace, want, reason):
    hops, want_reason, merged, merged_scores = want
    assert trace.stop_reason == want_reason == reason
    assert len(trace.hops) == len(hops)
    for got, exp in zip(trace.hops, hops):
        assert got.ids.tolist() == exp["ids"].tolist()
        np.testing.assert_allclose(got.scores, exp["scores"], atol=2e-5)
        assert got.confidence == pytest.approx(exp["confidence"], abs=2e-5)
        np.testing.assert_allclose(got.query, exp["query"], atol=2e-5)
        assert got.new_ids == exp["new"]
    assert trace.ids.tolist() == merged
    np.testing.assert_allclose(trace.scores, merged_scores, atol=2e-5)


@pytest.mark.parametrize("seed", range(6))
def test_matches_numpy_reference_until_max_hops(data, seed):
    vectors, index = data
    q = np.random.default_rng(seed).standard_normal(48).astype(np.float32)
    trace = residual_hops(index, q, 8, confidence=2.0)
    assert_trace_matches(trace, reference_hops(vectors, q, 8, 0.3, 3, 2.0), "max_hops")
    assert trace.scores.dtype == np.float32 and trace.ids.dtype == np.int64
    assert trace.hops[0].query.dtype == np.float32
    # first_hop names the hop that first returned each merged id.
    first = {}
    for h, hop in enumerate(trace.hops):
        for i in hop.ids.tolist():
            first.setdefault(i, h)
    assert trace.first_hop.tolist() == [first[i] for i in trace.ids.tolist()]


@pytest.mark.parametrize(("beta", "max_hops"), [(0.5, 5), (0.9, 4), (0.1, 2)])
def test_matches_numpy_reference_for_other_settings(data, beta, max_hops):
    vectors, index = data
    q = vectors[11] + 0.2 * vectors[2000]
    want = reference_hops(vectors, q, 5, beta, max_hops, 0.97)
    trace = residual_hops(index, q, 5, beta=beta, max_hops=max_hops, confidence=0.97)
    assert_trace_matches(trace, want, want[1])


def test_stops_on_confidence(data):
    vectors, index = data
    trace = residual_hops(index, vectors[42], 1)
    assert trace.stop_reason == "confidence"
    assert len(trace.hops) == 1 and trace.hops[0].ids.tolist() == [42]
    assert trace.hops[0].confidence == pytest.approx(1.0, abs=1e-5)


def test_stops_when_nothing_new(data):
    vectors, index = data
    trace = residual_hops(index, vectors[3], 6, beta=0.0, confidence=2.0)
    assert trace.stop_reason == "no_new"
    assert len(trace.hops) == 2 and trace.hops[1].new_ids == 0
    assert trace.hops[0].ids.tolist() == trace.hops[1].ids.tolist()


def test_zero_residual_stops_cleanly():
    index = FlatIndex(4)
    index.add(np.array([5, 6], dtype=np.int64), np.array([[1, 0, 0, 0], [0, 1, 0, 0]], dtype=np.float32))
    trace = residual_hops(index, np.array([2, 0, 0, 0], dtype=np.float32), 1, beta=1.0, confidence=2.0)
    assert trace.stop_reason == "zero_residual"
    assert len(trace.hops) == 1 and trace.ids.tolist() == [5]


def test_allow_restricts_every_hop(data):
    vectors, index = data
    allow = np.arange(0, 3000, 7, dtype=np.int64)
    q = vectors[100]
    trace = residual_hops(index, q, 6, allow=allow, confidence=2.0)
    assert_trace_matches(trace, reference_hops(vectors, q, 6, 0.3, 3, 2.0, allow=allow), "max_hops")
    assert set(trace.ids.tolist()) <= set(allow.tolist())
    listed = residual_hops(index, q, 6, allow=allow.tolist(), confidence=2.0)
    assert listed.ids.tolist() == trace.ids.tolist()


def test_small_and_empty_indexes():
    empty = FlatIndex(8)
    trace = residual_hops(empty, np.ones(8, dtype=np.float32), 3)
    assert trace.stop_reason == "no_new" and len(trace.hops) == 1
    assert trace.hops[0].ids.shape == (0,) and trace.hops[0].confidence == 0.0
    assert trace.ids.shape == (0,)
    two = FlatIndex(8)
    two.add(np.array([1, 2], dtype=np.int64), np.eye(8, dtype=np.float32)[:2])
    trace = residual_hops(two, np.ones(8, dtype=np.float32), 5, confidence=2.0)
    assert trace.hops[0].ids.shape == (2,)  # padding is not reported
    assert trace.stop_reason == "no_new" and sorted(trace.ids.tolist()) == [1, 2]


def test_concurrent_calls_equal_serial(data):
    vectors, index = data
    queries = [vectors[i] + vectors[i + 1] for i in range(0, 40, 2)]
    serial = [residual_hops(index, q, 10, confidence=2.0).ids.tolist() for q in queries]
    results: dict[int, list[int]] = {}

    def run(j):
        results[j] = residual_hops(index, queries[j], 10, confidence=2.0).ids.tolist()

    threads = [threading.Thread(target=run, args=(j,)) for j in range(len(queries))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[j] for j in range(len(queries))] == serial


def test_takes_an_hnsw_index_too(data):
    vectors, flat = data
    hnsw = HNSWIndex(48, M=16, ef_construction=100)
    hnsw.add(np.arange(len(vectors), dtype=np.int64), vectors)
    hnsw.ef_search = 200
    q = vectors[5] + vectors[6]
    exact = residual_hops(flat, q, 5, confidence=2.0)
    approx = residual_hops(hnsw, q, 5, confidence=2.0)
    assert approx.stop_reason == exact.stop_reason
    # High ef on 3000 points: the approximate chain should find (nearly) the same ids.
    assert len(set(approx.ids.tolist()) & set(exact.ids.tolist())) >= 0.9 * len(exact.ids)


def test_per_call_ef_reaches_the_hnsw_search_and_a_flat_index_ignores_it(data):
    vectors, flat = data
    hnsw = HNSWIndex(48, M=16, ef_construction=100)
    hnsw.add(np.arange(len(vectors), dtype=np.int64), vectors)
    q = vectors[5] + vectors[6]
    for ef in (4, 200):
        hnsw.ef_search = ef
        by_setting = residual_hops(hnsw, q, 20, confidence=2.0)
        hnsw.ef_search = 64
        by_call = residual_hops(hnsw, q, 20, confidence=2.0, ef=ef)
        assert hnsw.ef_search == 64
        assert by_call.ids.tolist() == by_setting.ids.tolist()
        assert [h.ids.tolist() for h in by_call.hops] == [h.ids.tolist() for h in by_setting.hops]
    assert residual_hops(flat, q, 20, ef=4).ids.tolist() == residual_hops(flat, q, 20).ids.tolist()


def test_repr_names_the_stop_reason(data):
    vectors, index = data
    trace = residual_hops(index, vectors[0], 1)
    assert "confidence" in repr(trace) and "Hop(" in repr(trace.hops[0])


@pytest.mark.parametrize(
    ("query", "kwargs", "message"),
    [
        (np.ones(48), {}, "float32"),
        (np.ones(47, dtype=np.float32), {}, "dim 48"),
        (np.ones((1, 48), dtype=np.float32), {}, "1-d"),
        (np.zeros(48, dtype=np.float32), {}, "zero vector"),
        (np.full(48, np.nan, dtype=np.float32), {}, "NaN or inf"),
        (np.ones(96, dtype=np.float32)[::2], {}, "contiguous"),
        (np.ones(48, dtype=np.float32), {"k": 0}, "k must be"),
        (np.ones(48, dtype=np.float32), {"max_hops": 0}, "max_hops"),
        (np.ones(48, dtype=np.float32), {"beta": -0.1}, "beta"),
        (np.ones(48, dtype=np.float32), {"beta": math.inf}, "beta"),
        (np.ones(48, dtype=np.float32), {"confidence": math.nan}, "confidence"),
        (np.ones(48, dtype=np.float32), {"allow": np.array([1], dtype=np.int32)}, "int64"),
        (np.ones(48, dtype=np.float32), {"ef": 0}, "ef must be"),
    ],
)
def test_bad_input_raises_value_error_with_the_fix(data, query, kwargs, message):
    _, index = data
    k = kwargs.pop("k", 5)
    with pytest.raises(ValueError, match=message):
        residual_hops(index, query, k, **kwargs)
