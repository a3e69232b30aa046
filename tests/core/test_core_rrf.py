"""rrf_fuse against a pure-Python reference of weighted reciprocal rank fusion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kira import rrf_fuse


def reference_rrf(rankings, weights, k):
    """score = sum_i w_i / (k + rank_i), first occurrence per ranking, -1 skipped."""
    scores: dict[int, float] = {}
    for ranking, w in zip(rankings, weights):
        seen = set()
        for pos, i in enumerate(ranking, start=1):
            i = int(i)
            if i == -1 or i in seen:
                continue
            seen.add(i)
            scores[i] = scores.get(i, 0.0) + w / (k + pos)
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return order, [scores[i] for i in order]


rankings_st = st.lists(
    st.lists(st.integers(min_value=-1, max_value=30), max_size=25).map(lambda r: np.array(r, dtype=np.int64)),
    max_size=5,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rankings=rankings_st,
    data=st.data(),
    k=st.one_of(st.just(60.0), st.floats(min_value=0.01, max_value=1000.0)),
)
def test_matches_python_reference(rankings, data, k):
    weights = data.draw(
        st.lists(st.floats(min_value=0.0, max_value=5.0), min_size=len(rankings), max_size=len(rankings))
    )
    ids, scores = rrf_fuse(rankings, weights, k)
    want_ids, want_scores = reference_rrf(rankings, weights, k)
    assert ids.dtype == np.int64 and scores.dtype == np.float64
    # Same summation order as the reference, so the scores agree to the last bit.
    assert ids.tolist() == want_ids
    assert scores.tolist() == want_scores


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rankings=rankings_st, limit=st.integers(min_value=0, max_value=40))
def test_limit_is_a_prefix_of_the_full_fusion(rankings, limit):
    full_ids, full_scores = rrf_fuse(rankings)
    ids, scores = rrf_fuse(rankings, limit=limit)
    assert ids.tolist() == full_ids[:limit].tolist()
    assert scores.tolist() == full_scores[:limit].tolist()


def test_paper_weights_and_k():
    visual = np.array([10, 20, 30], dtype=np.int64)
    text = np.array([30, 10, 40], dtype=np.int64)
    ids, scores = rrf_fuse([visual, text], [0.6, 0.4], 60)
    assert ids.tolist() == [10, 30, 20, 40]
    assert scores[0] == pytest.approx(0.6 / 61 + 0.4 / 62)
    assert scores[1] == pytest.approx(0.6 / 63 + 0.4 / 61)
    assert scores[3] == pytest.approx(0.4 / 63)


def test_ties_go_to_the_smaller_id_and_duplicates_count_once():
    ids, scores = rrf_fuse([np.array([7, 3], dtype=np.int64), np.array([3, 7], dtype=np.int64)])
    assert ids.tolist() == [3, 7]
    assert scores[0] == scores[1]
    ids, scores = rrf_fuse([np.array([5, 5, 5, 2], dtype=np.int64)], k=1)
    assert ids.tolist() == [5, 2]
    assert scores.tolist() == [1 / 2, 1 / 5]  # the repeats still take positions 2 and 3


def test_padding_and_empty_inputs():
    ids, scores = rrf_fuse([])
    assert ids.shape == (0,) and scores.shape == (0,)
    ids, _ = rrf_fuse([np.array([-1, 4, -1], dtype=np.int64), np.array([], dtype=np.int64)])
    assert ids.tolist() == [4]


def test_is_deterministic():
    rng = np.random.default_rng(0)
    rankings = [rng.permutation(5000)[:1000].astype(np.int64) for _ in range(4)]
    first = rrf_fuse(rankings, [0.1, 0.2, 0.3, 0.4])
    for _ in range(3):
        again = rrf_fuse(rankings, [0.1, 0.2, 0.3, 0.4])
        assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rankings": [np.array([1, 2], dtype=np.int32)]}, "int64"),
        ({"rankings": [np.array([1.0, 2.0])]}, "int64"),
        ({"rankings": [[1, 2]]}, "numpy array"),
        ({"rankings": [np.arange(6, dtype=np.int64)[::2]]}, "contiguous"),
        ({"rankings": [np.zeros((2, 2), dtype=np.int64)]}, "1-d"),
        ({"rankings": np.array([1, 2], dtype=np.int64)}, "wrap it"),
        ({"rankings": [np.array([1], dtype=np.int64)], "weights": [0.5, 0.5]}, "one weight per ranking"),
        ({"rankings": [np.array([1], dtype=np.int64)], "weights": [-0.1]}, ">= 0"),
        ({"rankings": [np.array([1], dtype=np.int64)], "weights": [math.nan]}, "finite"),
        ({"rankings": [np.array([1], dtype=np.int64)], "k": 0}, "k must be"),
        ({"rankings": [np.array([1], dtype=np.int64)], "k": -5}, "k must be"),
        ({"rankings": [np.array([1], dtype=np.int64)], "k": math.nan}, "k must be"),
        ({"rankings": [np.array([1], dtype=np.int64)], "limit": -1}, "limit"),
    ],
)
def test_bad_input_raises_value_error_with_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rrf_fuse(**kwargs)
