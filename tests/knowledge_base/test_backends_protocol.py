"""The VectorIndex seam: the core's indexes implement it, and the pipeline asks only what it says."""

from __future__ import annotations

import numpy as np

from kira import _core
from kira.backends import VectorIndex, search_options
from kira.retrieval.search import search


def _rows(n: int, dim: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_the_core_indexes_are_vector_indexes_and_only_the_graph_takes_ef():
    flat, graph = _core.FlatIndex(8), _core.HNSWIndex(8)
    assert isinstance(flat, VectorIndex) and isinstance(graph, VectorIndex)
    assert search_options(flat, ef=64) == {} and search_options(graph, ef=64) == {"ef": 64}
    assert search_options(graph) == {}


class _ListIndex:
    """A second backend: brute force over a dict, no ef, no groups (what a remote store might offer)."""

    def __init__(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.ids, self.vectors = ids, vectors
        self.calls: list[dict] = []

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, queries, k, *, allow=None, groups=None, per_group=1, **options):
        self.calls.append(options)
        keep = np.isin(self.ids, allow) if allow is not None else np.ones(len(self.ids), bool)
        scores = queries @ self.vectors[keep].T
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return self.ids[keep][order], np.take_along_axis(scores, order, axis=1)

    def contains(self, id):
        return id in set(self.ids.tolist())

    def get_vectors(self, ids):
        return self.vectors[np.searchsorted(self.ids, ids)]


def test_the_pipeline_search_runs_on_any_vector_index_and_matches_the_core():
    vectors = _rows(200, 16)
    ids = np.arange(200, dtype=np.int64) * 3
    other = _ListIndex(ids, vectors)
    core = _core.FlatIndex(16)
    core.add(ids, vectors)
    assert isinstance(other, VectorIndex)
    queries = _rows(4, 16, seed=1)
    allow = ids[::2]
    got = search(other, queries, 5, allow, ef=96)
    want = search(core, queries, 5, allow, ef=96)
    assert other.calls == [{}]  # an index without a candidate list is never handed ef
    for (a_ids, a_scores), (b_ids, b_scores) in zip(got, want):
        assert a_ids.tolist() == b_ids.tolist()
        np.testing.assert_allclose(a_scores, b_scores, atol=1e-5)
