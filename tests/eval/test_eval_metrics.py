"""DomainVQA-R metrics against hand-computed values; bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pytest

from kira.eval.metrics import (
    bootstrap_ci,
    domain_correctness,
    faithfulness,
    precision_at_k,
    ranked_unique,
    recall_at_k,
    score_question,
    token_f1,
)


def test_precision_and_recall_by_hand():
    ranked = ["a", "x", "a", "b", "y", "c", "z"]  # duplicates count once, at the first rank
    assert ranked_unique(ranked) == ["a", "x", "b", "y", "c", "z"]
    relevant = {"a", "b", "c", "d", "e", "f"}
    assert precision_at_k(ranked, relevant, 5) == pytest.approx(3 / 5)  # a, b, c in [a x b y c]
    assert recall_at_k(ranked, relevant, 1) == 1.0
    assert recall_at_k(ranked, relevant, 3) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, relevant, 10) == pytest.approx(3 / 6)
    # two relevant documents: capped at |R|
    assert recall_at_k(["x", "p", "y", "q"], {"p", "q"}, 5) == 1.0
    assert precision_at_k(["x", "p", "y", "z", "w"], {"p", "q"}, 5) == 0.5
    assert precision_at_k(["x"], set(), 5) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(ranked, relevant, 0)


def test_token_f1_by_hand():
    # content tokens: pred {consolidation, right, lower, lobe}, ref {consolidation, left, lower, lobe, pneumonia}
    pred = "Consolidation in the right lower lobe [Evidence 1]."
    ref = "Consolidation in the left lower lobe: pneumonia."
    p, r = 3 / 4, 3 / 5
    assert token_f1(pred, ref) == pytest.approx(2 * p * r / (p + r))
    assert domain_correctness(ref, ref) == 1.0
    assert token_f1("the of and", "") == 1.0
    assert token_f1("pneumonia", "effusion") == 0.0


def test_faithfulness_by_hand():
    answer = "Pleural effusion with meniscus [Evidence 2]."
    assert faithfulness(answer, ["Left pleural effusion, blunted angle."]) == pytest.approx(2 / 3)
    assert faithfulness(answer, []) == 0.0


def test_score_question_uses_subject_for_precision_and_needed_for_recall():
    s = score_question(ranked=["p1", "p2", "n1", "p3", "n2"], needed={"p2", "p9"}, subject={"p1", "p2", "p3"},
                       answer_text="x", reference="x", cited_evidence=["x"], grounding=None, completeness=0.5)
    assert s.precision_at_5 == pytest.approx(3 / 4)  # subject + needed = {p1, p2, p3, p9}: 3 hits / min(5, 4)
    assert s.recall[1] == 0.0 and s.recall[3] == pytest.approx(1 / 2)
    assert np.isnan(s.grounding) and s.completeness == 0.5


def test_bootstrap_brackets_the_mean_and_is_seeded():
    rng = np.random.default_rng(3)
    values = rng.random(200)
    a = bootstrap_ci(values, seed=7)
    b = bootstrap_ci(values, seed=7)
    assert a == b
    assert a.low < a.mean < a.high and a.n == 200
    assert a.mean == pytest.approx(values.mean())
    # the interval is about mean +/- 1.96 standard errors
    se = values.std(ddof=1) / np.sqrt(values.size)
    assert (a.high - a.low) == pytest.approx(2 * 1.96 * se, rel=0.15)
    wide = bootstrap_ci(values[:20], seed=7)
    assert (wide.high - wide.low) > (a.high - a.low)


def test_bootstrap_edge_cases():
    empty = bootstrap_ci([float("nan")])
    assert empty.n == 0 and np.isnan(empty.mean)
    const = bootstrap_ci([1.0, 1.0, 1.0])  # BCa is undefined here: no warning, the degenerate interval
    assert const.low == const.high == const.mean == 1.0
    single = bootstrap_ci([0.25])
    assert single.low == single.high == 0.25 and single.n == 1
    nearly = bootstrap_ci([1.0] * 11 + [0.0])  # one differing value: a constant jackknife for BCa's acceleration
    assert 0.0 <= nearly.low < nearly.mean <= nearly.high <= 1.0
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], resamples=0)
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], level=1.0)


def test_counts_f1_is_token_f1_on_counts():
    from collections import Counter

    from kira.eval.metrics import counts_f1

    assert counts_f1(Counter(), Counter()) == 1.0 and counts_f1(Counter("a"), Counter()) == 0.0
    # multiplicity: two "a" predicted, one in the reference -> p = 1/2, r = 1
    assert counts_f1(Counter("aa"), Counter("a")) == pytest.approx(2 / 3)


def test_bootstrap_is_bca_moving_with_the_skew():
    """For right-skewed small samples BCa shifts the interval up against the percentile one."""
    rng = np.random.default_rng(11)
    for trial in range(5):
        x = rng.exponential(1.0, 12)
        bca = bootstrap_ci(x, resamples=4000, seed=trial)
        means = x[np.random.default_rng(trial).integers(0, x.size, size=(4000, x.size))].mean(axis=1)
        p_low, p_high = np.quantile(means, [0.025, 0.975])
        assert bca.low > p_low and bca.high > p_high
        assert bca.low < bca.mean < bca.high


def test_bootstrap_mean_of_means_resamples_each_group_on_its_own():
    from kira.eval.metrics import bootstrap_mean_of_means

    rng = np.random.default_rng(5)
    groups = [rng.random(12), rng.random(30) * 0.5, np.ones(4), [float("nan")]]
    est = bootstrap_mean_of_means(groups, seed=3)
    assert est.mean == pytest.approx(np.mean([g.mean() for g in groups[:3]])) and est.n == 46
    assert est.low < est.mean < est.high
    # narrower than a single group's interval: averaging over groups shrinks the variance
    single = bootstrap_ci(groups[0], seed=3)
    assert (est.high - est.low) < (single.high - single.low)
    # with one group it is that group's interval
    assert bootstrap_mean_of_means([groups[0]], seed=3) == single
    flat = bootstrap_mean_of_means([np.ones(3), np.zeros(5)])
    assert flat.low == flat.high == flat.mean == 0.5
    assert bootstrap_mean_of_means([[], [float("nan")]]).n == 0
