"""Never below frozen: each few-shot method is validated on the user's own labels, and a trained or
local method is chosen only when it beat the frozen prototypes there.

Protocol (`validate`): with fewer than `SPLIT_SHOTS` examples in the smallest class, the shots
are split into up to `max_folds` folds, stratified (each class's examples dealt round-robin
after a seeded shuffle); every method is fitted on the other folds and predicts the held-out
one, so every labelled example is predicted once, by a model that never saw it. With more,
one stratified held-out share (`held_out_share`) is predicted instead (training costs once).
A class of one example leaves nothing to hold out: frozen is chosen, by construction.

Choice: the method with the most held-out examples right, among those that got at least
`min_gain_examples` more of them right than the frozen prototypes; frozen otherwise (ties go to
the simpler method, in `METHODS` order). Training on five examples per class can overfit; the
rule makes a worse adapter the exception that validation failed to see, not the default.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from kira.adapt.fewshot import METHODS, TRAINED, FewShotClassifier, fit_classifier
from kira.adapt.labelled import labelled_rows
from kira.config import AdaptationConfig

log = logging.getLogger(__name__)

SPLIT_SHOTS = 25  # from this many examples in the smallest class on, one held-out share instead of folds
MIN_GAIN_EXAMPLES = 2  # a method replaces frozen only when it gets this many more held-out examples right


@dataclass(frozen=True)
class AdaptationReport:
    """What validation measured and what it chose.

    chosen: the method in use ("frozen", "protonet", "projection" or "local").
    measured: held-out accuracy per method that could be measured.
    skipped: method -> why it was not measured (no patches, a class with too few examples ...).
    classes / labelled / min_shots: the labels it saw (classes, examples, examples in the smallest class).
    protocol: how it held examples out; held_out: predictions per measured method.
    reason: one sentence on the choice.
    """

    chosen: str
    measured: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    classes: int = 0
    labelled: int = 0
    min_shots: int = 0
    protocol: str = ""
    held_out: int = 0
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AdaptationReport:
        """The report `as_dict` wrote. Raises ValueError when `data` is not one."""
        try:
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except TypeError as exc:
            raise ValueError(f"not an adaptation report: {exc}") from None

    def summary(self) -> str:
        """One line: the choice and the held-out accuracies, e.g. for `kira info`."""
        figures = ", ".join(f"{m} {a:.3f}" for m, a in self.measured.items())
        return (f"{self.chosen} ({self.classes} classes, {self.labelled} labelled, {self.protocol}"
                + (f"; held-out accuracy {figures}" if figures else "") + ")")


def _splits(y: np.ndarray, n_classes: int, *, max_folds: int, held_out_share: float,
            rng: np.random.Generator) -> tuple[list[np.ndarray], str]:
    """Boolean held-out masks over the rows, and the protocol's description."""
    members = [rng.permutation(np.flatnonzero(y == c)) for c in range(n_classes)]
    smallest = min(len(m) for m in members)
    if smallest >= SPLIT_SHOTS:
        mask = np.zeros(len(y), dtype=bool)
        for m in members:
            mask[m[: max(1, int(round(held_out_share * len(m))))]] = True
        return [mask], f"held-out share {held_out_share:g}"
    folds = min(smallest, max_folds)
    masks = []
    for f in range(folds):
        mask = np.zeros(len(y), dtype=bool)
        for m in members:
            mask[m[f::folds]] = True
        masks.append(mask)
    return masks, f"{folds}-fold over the labelled examples"


def validate(features: np.ndarray, labels: Sequence[Any], patches: np.ndarray | None = None, *,
             methods: Sequence[str] = METHODS, config: AdaptationConfig | None = None, seed: int = 0,
             max_folds: int = 3, held_out_share: float = 0.2,
             min_gain_examples: int = MIN_GAIN_EXAMPLES) -> AdaptationReport:
    """Measure each of `methods` on held-out labelled examples and choose one (module docstring).

    `features` (n, dim) raw image vectors; `labels` one per row; `patches` (n, p, dim) their
    patch vectors (without them ``local`` is skipped). Frozen is always measured.
    Returns an AdaptationReport. Raises ValueError for fewer than two classes, mismatched
    inputs or an unknown method.
    """
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown adaptation methods {unknown}; choose from {METHODS}")
    x, names, classes, y = labelled_rows(features, labels, needs="adaptation")
    counts = np.bincount(y)
    wanted = ["frozen"] + [m for m in METHODS if m in methods and m != "frozen"]
    base = dict(classes=len(classes), labelled=len(names), min_shots=int(counts.min()))
    if counts.min() < 2:
        skipped = {m: "a class has one labelled example: nothing to hold out" for m in wanted if m != "frozen"}
        return AdaptationReport("frozen", {}, skipped, protocol="none", held_out=0,
                                reason="no validation possible with one example of a class: frozen prototypes",
                                **base)
    masks, protocol = _splits(y, len(classes), max_folds=max_folds, held_out_share=held_out_share,
                              rng=np.random.default_rng(seed))
    skipped = {}
    if "local" in wanted and patches is None:
        skipped["local"] = "no patch vectors (a knowledge base without the patch level)"
    correct = {m: 0 for m in wanted if m not in skipped}
    total = 0
    for fold, test in enumerate(masks):
        train = ~test
        train_counts = np.bincount(y[train], minlength=len(classes))
        total += int(test.sum())
        for method in list(correct):
            if method in TRAINED and train_counts.min() < 2:
                skipped[method] = "needs two training examples of every class besides the held-out ones"
                del correct[method]
                continue
            clf = fit_classifier(method, x[train], names[train], None if patches is None else patches[train],
                                 config=config, seed=seed + fold)
            predicted = np.asarray(clf.predict(x[test], None if patches is None else patches[test]))
            correct[method] += int(np.sum(predicted == names[test]))
    measured = {m: correct[m] / total for m in correct}
    best = "frozen"
    for method in correct:
        if correct[method] - correct["frozen"] >= min_gain_examples and correct[method] > correct[best]:
            best = method
    if best == "frozen":
        reason = (f"no method got {min_gain_examples} or more held-out examples right beyond the frozen "
                  "prototypes: frozen kept")
    else:
        reason = f"{best} got {correct[best] - correct['frozen']} more of {total} held-out examples right than frozen"
    log.info("adaptation: %s (%s)", best, reason)
    return AdaptationReport(best, measured, skipped, protocol=protocol, held_out=total, reason=reason, **base)


def adapt_few_shot(features: np.ndarray, labels: Sequence[Any], patches: np.ndarray | None = None, *,
                   methods: Sequence[str] = METHODS, config: AdaptationConfig | None = None,
                   seed: int = 0, **validation: Any) -> tuple[FewShotClassifier, AdaptationReport]:
    """Validate (`validate`), then fit the chosen method on every labelled example.

    Returns (classifier, report). Raises as `validate` and `fit_classifier`.
    """
    report = validate(features, labels, patches, methods=methods, config=config, seed=seed, **validation)
    clf = fit_classifier(report.chosen, features, labels, patches if report.chosen == "local" else None,
                         config=config, seed=seed)
    return clf, report
