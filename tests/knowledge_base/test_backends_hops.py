"""kira.backends.hops: residual hops over any VectorIndex give what the core's residual_hops gives."""

from __future__ import annotations

import numpy as np
import pytest
from milvus_fixtures import unit_rows

from kira import _core
from kira.backends.hops import residual_hops


class PythonIndex:
    """A core FlatIndex seen only through the VectorIndex protocol (search, get_vectors), as a Milvus index is."""

    def __init__(self, index) -> None:
        self.index, self.dim = index, index.dim

    def __len__(self) -> int:
        return len(self.index)

    def search(self, queries, k, *, allow=None, **_):
        return self.index.search(queries, k, allow=allow)

    def get_vectors(self, ids):
        return self.index.get_vectors(ids)


@pytest.mark.parametrize(("beta", "confidence", "allow_every"), [(0.3, 0.85, 0), (0.3, 0.99, 0), (0.6, 0.99, 3),
                                                                 (1.0, 0.999, 0)])
def test_residual_hops_on_any_index_equal_the_cores(beta, confidence, allow_every):
    vectors = unit_rows(400, 24, seed=7)
    core = _core.FlatIndex(24)
    core.add(np.arange(1, 401, dtype=np.int64), vectors)
    allow = np.arange(1, 401, allow_every, dtype=np.int64) if allow_every else None
    rng = np.random.default_rng(3)
    for query in rng.standard_normal((5, 24)).astype(np.float32):
        want = _core.residual_hops(core, query, 20, beta=beta, max_hops=3, confidence=confidence, allow=allow)
        got = residual_hops(PythonIndex(core), query, 20, beta=beta, max_hops=3, confidence=confidence, allow=allow)
        assert got.stop_reason == str(want.stop_reason) and len(got.hops) == len(want.hops)
        for mine, theirs in zip(got.hops, want.hops):
            assert mine.ids.tolist() == list(theirs.ids) and mine.new_ids == theirs.new_ids
            np.testing.assert_allclose(mine.scores, theirs.scores, atol=1e-6)
            assert mine.confidence == pytest.approx(theirs.confidence, abs=1e-6)
        assert got.ids.tolist() == list(want.ids)
        np.testing.assert_allclose(got.scores, want.scores, atol=1e-6)


def test_bad_hop_arguments_are_refused():
    index = PythonIndex(_core.FlatIndex(4))
    with pytest.raises(ValueError, match="zero vector"):
        residual_hops(index, np.zeros(4, np.float32), 3)
    with pytest.raises(ValueError, match="beta"):
        residual_hops(index, np.ones(4, np.float32), 3, beta=-1)
    with pytest.raises(ValueError, match="k and max_hops"):
        residual_hops(index, np.ones(4, np.float32), 0)
