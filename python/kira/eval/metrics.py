"""DomainVQA-R metrics: retrieval precision / recall, faithfulness, domain correctness,
grounding, explainability completeness, and seeded bootstrap confidence intervals.

Definitions (one question at a time; a run reports the mean over questions):

- ranked documents: the distinct doc ids of the retrieved evidence, best first (several
  chunks of one image count once, at the rank of the first).
- precision@k: |top-k ∩ R_p| / min(k, |R_p|), where R_p is the set of documents relevant
  to the question's subject (every document of its label, plus the documents it needs).
  Dividing by min(k, |R_p|) lets a question with fewer than k relevant documents score 1.
- recall@k: |top-k ∩ R| / min(k, |R|) over the documents the question needs (BEIR's
  capped recall, R_cap@k): for retrieval and visual questions R is the whole label class,
  so the cap keeps recall@1 meaningful; for multi-hop questions R is the two documents
  that must be compared, and recall@k is the share of them found.
- reasoning faithfulness: the share of the answer's content tokens (citation markers
  stripped, stop-words removed, lightly stemmed) that occur in the evidence it cites;
  0 for an answer that cites nothing.
- domain correctness: token F1 (SQuAD-style, with multiplicity) between the answer's and
  the ground-truth answer's content tokens, same tokenisation.
- grounding score: the verifier's mean claim score `Answer.grounding` (questions whose
  answer was not verified are left out; NaN when none was).
- explainability completeness: `RationaleCard.completeness()`, the share of the card's
  REQUIRED_FIELDS present and non-empty.
"""

from __future__ import annotations

import warnings

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from kira.text.tokens import content_tokens, stem
from kira.reasoning.types import strip_citation_marks

RECALL_KS: tuple[int, ...] = (1, 3, 5, 10)
PRECISION_K = 5


def ranked_unique(doc_ids: Iterable[str]) -> list[str]:
    """Distinct doc ids in first-seen order."""
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in doc_ids:
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out


def _hits(ranked: Sequence[str], relevant: Iterable[str], k: int) -> tuple[int, int]:
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    rel = set(relevant)
    top = ranked_unique(ranked)[:k]
    return sum(1 for d in top if d in rel), len(rel)


def precision_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int = PRECISION_K) -> float:
    """|top-k ∩ relevant| / min(k, |relevant|) over distinct ranked doc ids; 0.0 when nothing is relevant."""
    hits, n_rel = _hits(ranked, relevant, k)
    return hits / min(k, n_rel) if n_rel else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Capped recall |top-k ∩ relevant| / min(k, |relevant|); 0.0 when nothing is relevant."""
    hits, n_rel = _hits(ranked, relevant, k)
    return hits / min(k, n_rel) if n_rel else 0.0


def answer_tokens(text: str) -> list[str]:
    """Content tokens of an answer or reference: citation marks stripped, stop-words removed, stemmed."""
    return [stem(t) for t in content_tokens(strip_citation_marks(text))]


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD-style token F1 between `answer_tokens` of the two texts (1.0 when both are empty)."""
    return counts_f1(Counter(answer_tokens(prediction)), Counter(answer_tokens(reference)))


def counts_f1(pred: Counter, ref: Counter) -> float:
    """Token F1 (with multiplicity) of two token counts; 1.0 when both are empty, 0.0 when one is."""
    n_pred, n_ref = sum(pred.values()), sum(ref.values())
    if not n_pred and not n_ref:
        return 1.0
    common = sum((pred & ref).values())
    if common == 0:
        return 0.0
    p, r = common / n_pred, common / n_ref
    return 2 * p * r / (p + r)


def domain_correctness(answer_text: str, reference: str) -> float:
    """Token F1 of the answer against the ground-truth answer (see `token_f1`)."""
    return token_f1(answer_text, reference)


def faithfulness(answer_text: str, cited_evidence: Sequence[str]) -> float:
    """Share of the answer's content tokens found in the cited evidence texts; 0.0 without citations or tokens."""
    tokens = answer_tokens(answer_text)
    if not tokens or not cited_evidence:
        return 0.0
    available = {t for text in cited_evidence for t in answer_tokens(text)}
    return sum(1 for t in tokens if t in available) / len(tokens)


@dataclass(frozen=True)
class Estimate:
    """A mean with its bootstrap (BCa) confidence interval, 95% by default."""

    mean: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "ci_low": self.low, "ci_high": self.high, "n": self.n}


def _scipy_bootstrap(samples: tuple[np.ndarray, ...], statistic: Any, *, resamples: int, seed: int,
                     level: float) -> tuple[float, float]:
    """scipy.stats.bootstrap's BCa interval; the percentile interval where BCa is undefined."""
    import inspect

    from scipy import stats

    # scipy >= 1.15 takes `rng`; older releases only `random_state` (same Generator semantics)
    key = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            # BCa is undefined when a jackknife is constant (e.g. one differing value in few); fall back
            warnings.simplefilter("ignore", getattr(stats, "DegenerateDataWarning", RuntimeWarning))
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.bootstrap(samples, statistic, n_resamples=resamples, confidence_level=level,
                                  method=method, vectorized=True, axis=-1, **{key: np.random.default_rng(seed)})
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return low, high
    return float("nan"), float("nan")  # pragma: no cover - the percentile interval is always finite here


def bootstrap_ci(values: Sequence[float] | np.ndarray, *, resamples: int = 2000, seed: int = 0,
                 level: float = 0.95) -> Estimate:
    """BCa bootstrap interval of the mean (scipy.stats.bootstrap), seeded.

    BCa (bias-corrected and accelerated) corrects the percentile interval's under-coverage at
    small n and for skewed data such as scores bounded at 0 or 1. Guards: all-equal values
    (or a single one) give the degenerate interval [mean, mean]; where BCa is undefined the
    percentile interval is used.
    Parameters: `values` (NaNs are dropped), `resamples` (>= 1), `seed`, `level` in (0, 1).
    Returns Estimate(mean, low, high, n); all NaN with n = 0 for no values.
    Raises ValueError for resamples < 1 or a level outside (0, 1).
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1; got {resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1); got {level}")
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[~np.isnan(x)]
    if x.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    mean = float(x.mean())
    if x.size == 1 or np.ptp(x) == 0.0:
        return Estimate(mean, mean, mean, int(x.size))
    low, high = _scipy_bootstrap((x,), lambda a, axis=-1: a.mean(axis=axis), resamples=resamples, seed=seed,
                                 level=level)
    return Estimate(mean, low, high, int(x.size))


def bootstrap_mean_of_means(groups: Sequence[Sequence[float] | np.ndarray], *, resamples: int = 2000,
                            seed: int = 0, level: float = 0.95) -> Estimate:
    """BCa interval of the unweighted mean of group means (a stratified bootstrap: each group
    is resampled on its own), e.g. a metric averaged over domains.

    Parameters: `groups` (NaNs dropped; empty groups are left out), `resamples`, `seed`, `level`.
    Returns Estimate(mean of means, low, high, n = values in all groups); all NaN with n = 0
    when every group is empty. All-equal groups, or groups of one value, are held fixed.
    Raises ValueError for resamples < 1 or a level outside (0, 1).
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1; got {resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1); got {level}")
    xs = [np.asarray(g, dtype=np.float64).ravel() for g in groups]
    xs = [g[~np.isnan(g)] for g in xs]
    xs = [g for g in xs if g.size]
    if not xs:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    n = int(sum(g.size for g in xs))
    mean = float(np.mean([g.mean() for g in xs]))
    varying = [g for g in xs if g.size > 1 and np.ptp(g) > 0.0]
    if not varying:
        return Estimate(mean, mean, mean, n)
    fixed = sum(float(g.mean()) for g in xs if not (g.size > 1 and np.ptp(g) > 0.0))
    k = len(xs)

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        return (sum(s.mean(axis=axis) for s in samples) + fixed) / k

    low, high = _scipy_bootstrap(tuple(varying), statistic, resamples=resamples, seed=seed, level=level)
    return Estimate(mean, low, high, n)


@dataclass(frozen=True)
class QuestionScores:
    """Every metric for one (question, variant) run."""

    precision_at_5: float
    recall: dict[int, float]  # k -> recall@k
    faithfulness: float
    domain_correctness: float
    grounding: float  # NaN when the answer was not verified
    completeness: float

    def as_dict(self) -> dict[str, float]:
        out = {"precision@5": self.precision_at_5}
        out.update({f"recall@{k}": v for k, v in self.recall.items()})
        out.update({"faithfulness": self.faithfulness, "domain_correctness": self.domain_correctness,
                    "grounding": self.grounding, "completeness": self.completeness})
        return out


METRIC_NAMES: tuple[str, ...] = ("precision@5", *(f"recall@{k}" for k in RECALL_KS), "faithfulness",
                                 "domain_correctness", "grounding", "completeness")
"""Metric keys in results.json, in table order."""


def score_question(*, ranked: Sequence[str], needed: Iterable[str], subject: Iterable[str], answer_text: str,
                   reference: str, cited_evidence: Sequence[str], grounding: float | None,
                   completeness: float) -> QuestionScores:
    """All metrics for one answered question.

    Parameters: `ranked` retrieved doc ids best first; `needed` the documents the
    question needs (recall); `subject` the documents relevant to its subject (precision;
    `needed` is added to it); `answer_text` and the ground-truth `reference`;
    `cited_evidence` the texts of the evidence items the answer cites; `grounding` the
    verifier's score or None; `completeness` the card's completeness.
    """
    needed = set(needed)
    subject = set(subject) | needed
    return QuestionScores(
        precision_at_5=precision_at_k(ranked, subject, PRECISION_K),
        recall={k: recall_at_k(ranked, needed, k) for k in RECALL_KS},
        faithfulness=faithfulness(answer_text, cited_evidence),
        domain_correctness=domain_correctness(answer_text, reference),
        grounding=float("nan") if grounding is None else float(grounding),
        completeness=float(completeness),
    )
