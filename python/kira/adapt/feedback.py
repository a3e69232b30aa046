"""The feedback loop: answers with domain correctness < 0.5 -> hard negatives from their
wrong retrievals -> retrain the projection head -> report what changed.

A failing answer contributes one triplet per (relevant document, wrongly retrieved
document) pair: anchor = the query's raw visual vector (its image, or the mean of its
relevant documents for a text question), positive = a relevant document, negative = a
document it retrieved that is not relevant and not of the positive's class. The head is retrained from where it was
with those triplets added to its loss; the report compares, for every failing question,
the rank of its first relevant document in the adapted space before and after, and the
held-out recall@1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence, TypedDict

import numpy as np

from kira.adapt.io import ProjectionHead
from kira.adapt.projection import Triplets, recall_at_1, train_projection
from kira.config import AdaptationConfig


@dataclass(frozen=True)
class FeedbackCase:
    """One answered question as the feedback loop sees it."""

    qid: str
    correctness: float  # domain correctness of the answer
    anchor: np.ndarray  # raw visual vector of the query (in the frozen feature space)
    relevant: tuple[str, ...]  # doc ids that should have been retrieved
    retrieved: tuple[str, ...]  # doc ids that were retrieved, best first


class RankChange(TypedDict):
    """One failing question's first relevant rank (1 = top) before and after the update."""

    qid: str
    correctness: float
    rank_before: int
    rank_after: int


@dataclass
class FeedbackReport:
    """What one round of feedback did."""

    failures: int  # answers below the correctness threshold
    triplets: int  # hard-negative triplets mined from them
    recall_before: float  # held-out recall@1 with the old head (NaN without a held-out set)
    recall_after: float
    changes: list[RankChange] = field(default_factory=list)  # per failing question: ranks before/after
    head: ProjectionHead | None = None

    def improved(self) -> int:
        """How many failing questions now rank a relevant document higher."""
        return sum(1 for c in self.changes if int(c["rank_after"]) < int(c["rank_before"]))

    def as_dict(self) -> dict[str, object]:
        return {"failures": self.failures, "triplets": self.triplets, "recall@1_before": self.recall_before,
                "recall@1_after": self.recall_after, "improved": self.improved(), "changes": self.changes}


def mine_hard_negatives(cases: Sequence[FeedbackCase], doc_vectors: Mapping[str, np.ndarray], *,
                        threshold: float | None = None, max_per_case: int = 10,
                        labels: Mapping[str, str] | None = None) -> tuple[list[FeedbackCase], Triplets]:
    """(failing cases, triplets) from answers with correctness < threshold (config: 0.5).

    Each failing case yields up to `max_per_case` (anchor, relevant doc, wrong doc)
    triplets, wrong docs in retrieved order. Doc ids missing from `doc_vectors` are skipped.
    With `labels` (doc id -> the class the head is trained on), a wrong document of the
    relevant document's own class is no negative for it: the head is trained to pull one
    class together, and a question that wanted one subject's images among others of that
    class failed for another reason (a change question answered from the right films).
    """
    threshold = AdaptationConfig().feedback_correctness_threshold if threshold is None else threshold
    failing = [c for c in cases if c.correctness < threshold]
    anchors, positives, negatives = [], [], []
    for case in failing:
        relevant = [d for d in case.relevant if d in doc_vectors]
        wrong = [d for d in case.retrieved if d not in set(case.relevant) and d in doc_vectors]
        pairs = [(p, n) for n in wrong for p in relevant
                 if labels is None or labels.get(n) is None or labels.get(n) != labels.get(p)][:max_per_case]
        for p, n in pairs:
            anchors.append(case.anchor)
            positives.append(doc_vectors[p])
            negatives.append(doc_vectors[n])
    if not anchors:
        dim = len(next(iter(doc_vectors.values()))) if doc_vectors else 0
        empty = np.zeros((0, dim), np.float32)
        return failing, (empty, empty, empty)
    return failing, (np.asarray(anchors, np.float32), np.asarray(positives, np.float32),
                     np.asarray(negatives, np.float32))


def first_relevant_rank(head: ProjectionHead, case: FeedbackCase, doc_ids: Sequence[str], doc_matrix: np.ndarray) -> int:
    """1-based rank of the first relevant document for the case's anchor in the adapted space."""
    scores = head.apply(doc_matrix) @ head.apply(case.anchor)
    order = np.argsort(-scores, kind="stable")
    relevant = set(case.relevant)
    for rank, i in enumerate(order, start=1):
        if doc_ids[i] in relevant:
            return rank
    return len(doc_ids) + 1


def feedback_round(
    head: ProjectionHead,
    features: np.ndarray,
    labels: Sequence[str],
    doc_ids: Sequence[str],
    cases: Sequence[FeedbackCase],
    *,
    config: AdaptationConfig | None = None,
    val_features: np.ndarray | None = None,
    val_labels: Sequence[str] | None = None,
    epochs: int | None = None,
    seed: int = 0,
) -> FeedbackReport:
    """Run one feedback round: mine hard negatives from failing `cases`, retrain `head`, report.

    `features`/`labels`/`doc_ids` are the knowledge base's raw visual vectors (the head's
    training set). With no failing case the head is returned unchanged.
    Raises ValueError when the three document arguments disagree in length.
    """
    cfg = config or AdaptationConfig()
    x = np.asarray(features, np.float32)
    if not (len(x) == len(labels) == len(doc_ids)):
        raise ValueError(f"features ({len(x)}), labels ({len(labels)}) and doc_ids ({len(doc_ids)}) must match")
    vectors = dict(zip(doc_ids, x))
    failing, triplets = mine_hard_negatives(cases, vectors, threshold=cfg.feedback_correctness_threshold,
                                            labels=dict(zip(doc_ids, (str(label) for label in labels))))

    def held_out(h: ProjectionHead) -> float:
        if val_features is None or val_labels is None or not len(val_labels):
            return float("nan")
        return recall_at_1(h.apply(val_features), val_labels, h.apply(x), labels)

    before = held_out(head)
    if not len(triplets[0]):
        return FeedbackReport(len(failing), 0, before, before, [], head)
    result = train_projection(x, labels, config=cfg, init=head, extra_triplets=triplets,
                              epochs=cfg.epochs if epochs is None else epochs, seed=seed)
    new = result.head
    changes: list[RankChange] = [{"qid": c.qid, "correctness": round(float(c.correctness), 4),
                "rank_before": first_relevant_rank(head, c, doc_ids, x),
                "rank_after": first_relevant_rank(new, c, doc_ids, x)} for c in failing]
    return FeedbackReport(len(failing), int(len(triplets[0])), before, held_out(new), changes, new)
