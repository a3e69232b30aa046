"""rrf_fuse(documents=...): each document counted once per ranking, against the numpy version
(benchmarks/peers/fusion_reference.py) that kira.retrieval.fusion ran before the core took it over."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.peers.fusion_reference import lookup, numpy_per_document
from kira import rrf_fuse

CHUNKS = 30  # chunk ids 0..29; documents share the id space (a document chunk is its own document)


def core_per_document(rankings, weights, k, table, limit=None):
    document_of = lookup(table)
    return rrf_fuse(rankings, weights, k, limit=limit, documents=[document_of(r) for r in rankings])


def assert_same(got, want):
    ids, scores = got
    assert ids.dtype == np.int64 and scores.dtype == np.float64
    assert ids.tolist() == want[0].tolist()
    np.testing.assert_allclose(scores, want[1], rtol=1e-12, atol=0)


rankings_st = st.lists(
    st.lists(st.integers(min_value=-1, max_value=CHUNKS - 1), max_size=25).map(lambda r: np.array(r, np.int64)),
    max_size=6,
)
# Each chunk's document: -1 (its own) or one of a few ids, so documents collect several chunks.
table_st = st.dictionaries(st.integers(0, CHUNKS - 1), st.integers(0, 8), max_size=CHUNKS)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rankings=rankings_st, table=table_st, data=st.data(),
       k=st.one_of(st.just(60.0), st.floats(min_value=0.01, max_value=1000.0)),
       limit=st.one_of(st.none(), st.integers(min_value=0, max_value=40)))
def test_matches_the_numpy_version(rankings, table, data, k, limit):
    # zero weights, repeats, -1 padding anywhere, empty rankings and ties all come up
    weights = data.draw(st.lists(st.sampled_from([0.0, 0.4, 0.6, 1.0]) | st.floats(0.0, 5.0),
                                 min_size=len(rankings), max_size=len(rankings)))
    assert_same(core_per_document(rankings, weights, k, table, limit),
                numpy_per_document(rankings, weights, k, lookup(table), limit))


@pytest.mark.parametrize("size", [200, 5_000])
def test_matches_the_numpy_version_at_the_size_of_an_ask_and_larger(size):
    rng = np.random.default_rng(size)
    n_chunks = 3 * size
    table = {c: c - c % 18 for c in range(n_chunks)}  # documents of 18 chunks, led by their first
    rankings = [rng.choice(n_chunks, size, replace=False).astype(np.int64) for _ in range(6)]
    rankings[2][-7:] = -1  # a short search, padded
    weights = [0.6, 0.4, 0.24, 0.3, 0.0, 0.12]
    for limit in (None, 150):
        assert_same(core_per_document(rankings, weights, 60.0, table, limit),
                    numpy_per_document(rankings, weights, 60.0, lookup(table), limit))


def test_a_document_counts_once_per_ranking_and_its_chunks_share_its_score():
    ranking = np.array([20, 21, 22, 23, 10], np.int64)
    ids, scores = rrf_fuse([ranking], k=60, documents=[np.array([20, 20, 20, 20, 10], np.int64)])
    # document 10 is second among documents, and its only chunk carries all of it
    assert ids.tolist() == [20, 21, 10, 22, 23]  # 21 ties 10 and goes first: chunk-level order
    assert scores.tolist() == [1 / 61, (1 / 61) * ((1 / 62) / (1 / 61)), 1 / 62,
                               (1 / 61) * ((1 / 63) / (1 / 61)), (1 / 61) * ((1 / 64) / (1 / 61))]


def test_minus_one_makes_a_chunk_its_own_document_and_padding_takes_one_document_rank():
    ids, scores = rrf_fuse([np.array([7, -1, -1, 8], np.int64)], k=1,
                           documents=[np.array([-1, 5, 5, -1], np.int64)])
    # 7 is document 7 (rank 1); the padding takes rank 2 once; 8 is document 8 at rank 3
    assert ids.tolist() == [7, 8] and scores.tolist() == [1 / 2, 1 / 4]


def test_without_rankings_or_with_only_padding_nothing_is_fused():
    for rankings in ([], [np.array([], np.int64)], [np.array([-1, -1], np.int64)]):
        ids, scores = rrf_fuse(rankings, documents=[np.full(len(r), -1, np.int64) for r in rankings])
        assert ids.shape == (0,) and scores.shape == (0,)


ONE = [np.array([1, 2], np.int64)]


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ([np.array([1, 1], np.int32)], "int64"),
        ([[1, 1]], "numpy array"),
        ([np.array([1], np.int64)], r"documents\[0\] has 1 entries for the 2 ids of rankings\[0\]"),
        ([np.array([1, 1], np.int64)] * 2, "2 arrays for 1 rankings"),
        (np.array([1, 1], np.int64), "sequence of int64 1-d arrays"),
        ([np.zeros((2, 1), np.int64)], "1-d"),
        ([np.arange(4, dtype=np.int64)[::2]], "contiguous"),
        ([np.array([1, -2], np.int64)], "-1 for a chunk that is a document of its own"),
    ],
)
def test_bad_documents_raise_value_error_with_the_fix(documents, message):
    with pytest.raises(ValueError, match=message):
        rrf_fuse(ONE, documents=documents)


def test_a_chunk_given_two_documents_is_refused():
    rankings = [np.array([1, 2], np.int64), np.array([2], np.int64)]
    with pytest.raises(ValueError, match="chunk 2 is given document 5 and, in rankings\\[1\\], document 6"):
        rrf_fuse(rankings, documents=[np.array([1, 5], np.int64), np.array([6], np.int64)])
    # -1 and the chunk's own id name the same document
    ids, _ = rrf_fuse(rankings, documents=[np.array([1, -1], np.int64), np.array([2], np.int64)])
    assert ids.tolist() == [2, 1]  # chunk 2, listed twice, leads
