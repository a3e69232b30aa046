"""The domain-adaptation part of a DomainVQA-R run: projection head and ProtoNet against
frozen features on held-out documents, the feedback loop, and the head the full system
then runs with (installed in the knowledge base by the runner).

Held-out protocol: the domain's groups (patients, designs, tiles, slides) are split
2:1 with the run's seed; the adapter trains on the first part's raw image features and
is scored on the second part's documents as queries against the first part as gallery
(recall@1: the nearest gallery document has the query's label). Splitting by group
keeps a patient's other views and follow-ups out of the gallery of their own queries.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.eval.dataset import DomainDataset, Question

log = logging.getLogger(__name__)


def group_split(ds: DomainDataset, seed: int, held_out: float = 1 / 3) -> np.ndarray:
    """Boolean mask over ds.documents: True for held-out documents (whole groups at a time)."""
    groups = np.array([d.group or d.doc_id for d in ds.documents])
    unique = np.unique(groups)
    rng = np.random.default_rng(seed)
    n = max(1, int(round(len(unique) * held_out)))
    chosen = set(rng.choice(unique, size=min(n, len(unique) - 1) if len(unique) > 1 else 0, replace=False))
    return np.array([g in chosen for g in groups])


def evaluate_adaptation(ds: DomainDataset, records: Sequence[Any], answered: Sequence[tuple[Question, Any]], *,
                        models: Any, config: KiraConfig, seed: int, epochs: int | None,
                        variant: str) -> tuple[dict[str, Any], Any]:
    """Train and score the adapters for one domain.

    Returns (report, head). The report is JSON-ready: frozen_recall@1, adapted_recall@1
    (held-out), history (curves), protonet_accuracy, frozen_prototype_accuracy (nearest
    class mean of the same 5 shots on frozen features), feedback (FeedbackReport.as_dict
    on `variant`'s failing answers). The head is a projection trained on every document,
    for the caller to install with `kb.set_adapter` and run the full system with.
    """
    from kira.adapt.feedback import FeedbackCase, feedback_round
    from kira.adapt.projection import recall_at_1, train_projection
    from kira.adapt.protonet import prototype_accuracy, select_shots, train_protonet

    cfg = config.adaptation
    features = np.asarray(models.image.encode([d.image for d in ds.documents]), dtype=np.float32)
    labels = np.array([d.label for d in ds.documents])
    doc_ids = [d.doc_id for d in ds.documents]
    test = group_split(ds, seed)
    train = ~test
    out: dict[str, Any] = {"train_documents": int(train.sum()), "held_out_documents": int(test.sum()),
                           "in_dim": int(features.shape[1]), "out_dim": cfg.projection_out}
    out["frozen_recall@1"] = recall_at_1(features[test], labels[test], features[train], labels[train])
    result = train_projection(features[train], labels[train], config=cfg, epochs=epochs, seed=seed,
                              val_features=features[test], val_labels=labels[test])
    head = result.head
    out["adapted_recall@1"] = recall_at_1(head.apply(features[test]), labels[test], head.apply(features[train]),
                                          labels[train])
    out["history"] = result.history.as_dict()
    out["epochs"] = len(result.history.loss) - 1
    # ProtoNet: 5 shots per class from the training part; scored on the held-out part
    try:
        proto = train_protonet(features[train], labels[train], config=cfg, seed=seed)
        out["protonet_accuracy"] = prototype_accuracy(proto, features[test], labels[test])
        shots = select_shots(labels[train], cfg.protonet_shots, seed)
        fx, fy = features[train][shots], labels[train][shots]
        means = np.stack([fx[fy == c].mean(axis=0) for c in np.unique(fy)])
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        predicted = np.unique(fy)[np.argmax(features[test] @ means.T, axis=1)]
        out["frozen_prototype_accuracy"] = float(np.mean(predicted == labels[test]))
    except ValueError as exc:
        log.warning("%s: ProtoNet skipped (%s)", ds.name, exc)
    # feedback: the full system's failing answers -> hard negatives -> retrain
    by_qid = {q.qid: q for q, _ in answered}
    rows = {r.qid: r for r in records if r.variant == variant}
    vectors = dict(zip(doc_ids, features))
    query_vectors = {}
    images = [(q.qid, q.query_image) for q, _ in answered if q.query_image is not None]
    if images:
        enc = np.asarray(models.image.encode([im for _, im in images]), dtype=np.float32)
        query_vectors = {qid: v for (qid, _), v in zip(images, enc)}
    cases = []
    for qid, q in by_qid.items():
        row = rows.get(qid)
        if row is None:
            continue
        anchor = query_vectors.get(qid)
        if anchor is None:
            rel = [vectors[d] for d in q.relevant_doc_ids if d in vectors]
            if not rel:
                continue
            anchor = np.mean(rel, axis=0)
        cases.append(FeedbackCase(qid, float(row.scores["domain_correctness"]), anchor, tuple(q.relevant_doc_ids),
                                  tuple(row.ranked)))
    report = feedback_round(head, features[train], labels[train], [d for d, t in zip(doc_ids, train) if t], cases,
                            config=cfg, val_features=features[test], val_labels=labels[test],
                            epochs=max(1, (epochs if epochs is not None else cfg.epochs) // 5), seed=seed)
    out["feedback"] = report.as_dict()
    # the head the full system runs with (`run_domain` installs it): trained on every knowledge-base document
    kb_head = train_projection(features, labels, config=cfg, epochs=epochs, seed=seed).head
    return out, kb_head
