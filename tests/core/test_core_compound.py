"""CompoundGroups registration rules and expand_compound against a Python reference."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kira import CompoundGroups, expand_compound


def ids(*values):
    return np.array(values, dtype=np.int64)


def f32(*values):
    return np.array(values, dtype=np.float32)


def reference_expand(temporal, multiview, retrieved, scores, td, md):
    """Retrieved keep their (best) score; others take the best decayed offer; one level."""
    own: dict[int, float] = {}
    for i, s in zip(retrieved.tolist(), scores.tolist()):
        if i != -1:
            own[i] = max(own.get(i, -math.inf), s)
    best: dict[int, tuple[float, int]] = {i: (s, i) for i, s in own.items()}
    for i, s in own.items():
        for groups, decay in ((temporal, td), (multiview, md)):
            for g in groups:
                if i not in g:
                    continue
                offer = float(np.float32(s) * np.float32(decay))
                for m in g:
                    if m == i or m in own:
                        continue
                    cur = best.get(m)
                    if cur is None or offer > cur[0] or (offer == cur[0] and i < cur[1]):
                        best[m] = (offer, i)
    order = sorted(best, key=lambda m: (-best[m][0], m))
    return order, [best[m][0] for m in order], [best[m][1] for m in order]


def test_paper_example_temporal_and_multiview():
    groups = CompoundGroups()
    assert groups.add_temporal([1, 2, 3]) == 0
    assert groups.add_multiview(ids(3, 4)) == 0
    out_ids, out_scores, origin = expand_compound(groups, ids(3, 9), f32(1.0, 0.5))
    assert out_ids.tolist() == [3, 1, 2, 4, 9]
    assert out_scores.tolist() == pytest.approx([1.0, 0.8, 0.8, 0.7, 0.5])
    assert origin.tolist() == [3, 3, 3, 3, 9]
    assert out_ids.dtype == np.int64 and out_scores.dtype == np.float32 and origin.dtype == np.int64


def test_originals_keep_their_score_and_the_best_offer_wins():
    groups = CompoundGroups()
    groups.add_temporal([1, 2, 3])
    groups.add_multiview([3, 5])
    # 2 was retrieved at 0.1: 1 would offer it 0.8 but originals keep their own score.
    out_ids, out_scores, origin = expand_compound(groups, ids(1, 2, 5), f32(1.0, 0.1, 0.9))
    got = dict(zip(out_ids.tolist(), zip(out_scores.tolist(), origin.tolist())))
    assert got[2] == (pytest.approx(0.1), 2)
    # 3 is offered 0.8 by 1 (temporal) and 0.63 by 5 (multiview): the better offer wins.
    assert got[3] == (pytest.approx(0.8), 1)


def test_custom_decays_and_ties_to_the_smaller_origin():
    groups = CompoundGroups()
    groups.add_multiview([4, 7, 9])
    out_ids, out_scores, origin = expand_compound(
        groups, ids(9, 4), f32(0.5, 0.5), temporal_decay=0.5, multiview_decay=0.5
    )
    assert out_ids.tolist() == [4, 9, 7]
    assert origin.tolist() == [4, 9, 4]
    assert out_scores.tolist() == [0.5, 0.5, 0.25]


def test_padding_is_skipped_and_ungrouped_ids_pass_through():
    groups = CompoundGroups()
    out_ids, out_scores, origin = expand_compound(groups, ids(5, -1), f32(0.3, -math.inf))
    assert out_ids.tolist() == [5] and origin.tolist() == [5]
    empty = expand_compound(groups, ids(), f32())
    assert all(a.shape == (0,) for a in empty)


def test_lookups_and_len():
    groups = CompoundGroups()
    assert len(groups) == 0 and not groups.contains(1)
    groups.add_temporal([1, 2, 3])
    groups.add_temporal([10, 11])
    groups.add_multiview([2, 20])
    assert len(groups) == 3 and groups.temporal_count == 2 and groups.multiview_count == 1
    assert groups.temporal_of(2).tolist() == [1, 2, 3]
    assert groups.multiview_of(2).tolist() == [2, 20]
    assert groups.multiview_of(1).tolist() == [] and groups.temporal_of(99).dtype == np.int64
    assert groups.contains(20) and not groups.contains(99)
    assert "temporal=2" in repr(groups)


def test_registration_rules():
    groups = CompoundGroups()
    groups.add_temporal([1, 2])
    groups.add_multiview([1, 2])  # one group of each kind is allowed
    with pytest.raises(ValueError, match="already in temporal sequence 0"):
        groups.add_temporal([3, 2])
    assert groups.temporal_of(3).tolist() == []  # the failed call registered nothing
    with pytest.raises(ValueError, match="appears twice"):
        groups.add_multiview([5, 5])
    with pytest.raises(ValueError, match="at least one"):
        groups.add_temporal([])
    with pytest.raises(ValueError, match="padding"):
        groups.add_temporal([-1, 8])
    with pytest.raises(ValueError, match="int64"):
        groups.add_temporal(np.array([8, 9], dtype=np.int32))
    with pytest.raises(ValueError, match="non-integer"):
        groups.add_temporal([8, 9.5])
    assert len(groups) == 2


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((ids(1, 2), f32(1.0)), {}, "one score per id"),
        ((ids(1), np.array([1.0])), {}, "float32"),
        ((np.array([1], dtype=np.int32), f32(1.0)), {}, "int64"),
        ((ids(1), f32(math.nan)), {}, "NaN or inf"),
        ((ids(1), f32(1.0)), {"temporal_decay": 1.5}, r"\[0, 1\]"),
        ((ids(1), f32(1.0)), {"multiview_decay": -0.1}, r"\[0, 1\]"),
    ],
)
def test_expand_bad_input(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        expand_compound(CompoundGroups(), *args, **kwargs)


@st.composite
def scenario(draw):
    universe = list(range(30))
    perm = draw(st.permutations(universe))
    cuts = sorted(draw(st.lists(st.integers(0, 30), max_size=6)))
    temporal = [perm[a:b] for a, b in zip([0, *cuts], [*cuts, 30]) if b - a >= 1][:4]
    perm2 = draw(st.permutations(universe))
    cuts2 = sorted(draw(st.lists(st.integers(0, 30), max_size=6)))
    multiview = [perm2[a:b] for a, b in zip([0, *cuts2], [*cuts2, 30]) if b - a >= 1][:4]
    retrieved = draw(st.lists(st.integers(-1, 29), max_size=12))
    scores = draw(
        st.lists(st.sampled_from([0.25, 0.5, 1.0, 0.9, 0.3]), min_size=len(retrieved), max_size=len(retrieved))
    )
    return temporal, multiview, np.array(retrieved, dtype=np.int64), np.array(scores, dtype=np.float32)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_matches_python_reference(case):
    temporal, multiview, retrieved, scores = case
    groups = CompoundGroups()
    for g in temporal:
        groups.add_temporal(g)
    for g in multiview:
        groups.add_multiview(g)
    got = expand_compound(groups, retrieved, scores)
    want = reference_expand(temporal, multiview, retrieved, scores, 0.8, 0.7)
    assert got[0].tolist() == want[0]
    assert got[1].tolist() == want[1]
    assert got[2].tolist() == want[2]


def test_concurrent_registration_and_expansion():
    groups = CompoundGroups()
    errors: list[BaseException] = []

    def register(offset):
        try:
            for g in range(200):
                base = offset + 3 * g
                groups.add_temporal([base, base + 1, base + 2])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def expand():
        try:
            for _ in range(300):
                expand_compound(groups, ids(0, 1, 100000), f32(1.0, 0.5, 0.2))
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=register, args=(o,)) for o in (0, 100000)]
    threads += [threading.Thread(target=expand) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert groups.temporal_count == 400
    out_ids, _, _ = expand_compound(groups, ids(0, 100000), f32(1.0, 0.2))
    assert out_ids.tolist() == [0, 1, 2, 100000, 100001, 100002]
