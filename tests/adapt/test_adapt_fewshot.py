"""Few-shot adaptation that never hurts: the classifiers, their files, and validation's choice,
on scikit-learn's digits (real scanned handwriting, 8x8)."""

from __future__ import annotations

import numpy as np
import pytest

from kira.adapt import fewshot, validation
from kira.adapt.fewshot import FewShotClassifier, fit_classifier
from kira.adapt.validation import AdaptationReport, adapt_few_shot, validate


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    images = d.images.astype(np.float32) / 16.0  # (1797, 8, 8)
    features = images.reshape(len(images), -1)
    # the same "encoder" on each cell of a 4x4 grid: the 2x2 crop scaled up to 8x8 (as kira encodes patch crops)
    crops = images.reshape(-1, 4, 2, 4, 2).transpose(0, 1, 3, 2, 4).reshape(len(images), 16, 2, 2)
    patches = np.kron(crops, np.ones((4, 4), np.float32)).reshape(len(images), 16, 64)
    patches = patches - patches.mean(axis=2, keepdims=True) + 1e-3
    return features - features.mean(axis=1, keepdims=True), patches, d.target.astype(str)


def _episode(labels, shots, queries, seed):
    rng = np.random.default_rng(seed)
    support, query = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        support.extend(idx[:shots])
        query.extend(idx[shots : shots + queries])
    return np.asarray(support), np.asarray(query)


def _accuracy(clf, x, p, y):
    return float(np.mean(np.asarray(clf.predict(x, p if clf.needs_patches else None)) == y))


@pytest.mark.parametrize("method", fewshot.METHODS)
def test_each_method_classifies_held_out_digits(digits, method):
    x, p, y = digits
    s, q = _episode(y, 5, 20, seed=0)
    clf = fit_classifier(method, x[s], y[s], p[s] if method == "local" else None)
    assert clf.method == method and clf.classes == tuple(str(c) for c in range(10))
    assert _accuracy(clf, x[q], p[q], y[q]) > 0.7  # chance is 0.1


@pytest.mark.parametrize("method", fewshot.METHODS)
def test_a_classifier_reopens_as_it_was(tmp_path, digits, method):
    x, p, y = digits
    s, q = _episode(y, 3, 5, seed=1)
    clf = fit_classifier(method, x[s], y[s], p[s] if method == "local" else None)
    clf.save(tmp_path / "c.npz")
    back = FewShotClassifier.load(tmp_path / "c.npz")
    assert back.method == method and back.classes == clf.classes
    np.testing.assert_allclose(back.scores(x[q], p[q]), clf.scores(x[q], p[q]), atol=1e-5)
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".tmp")]


def test_bad_inputs_get_errors_that_say_what_to_fix(tmp_path, digits):
    x, p, y = digits
    with pytest.raises(ValueError, match="method must be one of"):
        fit_classifier("magic", x[:10], y[:10])
    with pytest.raises(ValueError, match="at least two classes"):
        fit_classifier("frozen", x[:3], ["a", "a", "a"])
    with pytest.raises(ValueError, match="pass patches"):
        fit_classifier("local", x[:20], y[:20])
    with pytest.raises(ValueError, match="n_images, n_patches, dim"):
        fit_classifier("local", x[:20], y[:20], p[:20, :, :10])
    clf = fit_classifier("local", x[:20], y[:20], p[:20])
    with pytest.raises(ValueError, match="pass patches"):
        clf.predict(x[:2])
    with pytest.raises(ValueError, match="same image encoder"):
        clf.predict(x[:2, :10], p[:2])
    with pytest.raises(ValueError, match=r"\.npz"):
        clf.save(tmp_path / "c.safetensors")
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="not a kira few-shot classifier"):
        FewShotClassifier.load(tmp_path / "other.npz")
    with pytest.raises(ValueError, match="unknown adaptation methods"):
        validate(x[:20], y[:20], methods=("frozen", "magic"))


def test_one_example_of_a_class_keeps_frozen_by_construction(digits):
    x, p, y = digits
    s, _ = _episode(y, 1, 0, seed=2)
    report = validate(x[s], y[s], p[s])
    assert report.chosen == "frozen" and report.measured == {} and report.protocol == "none"
    assert set(report.skipped) == {"protonet", "projection", "local"} and report.min_shots == 1


def test_two_examples_validate_only_what_needs_no_training(digits):
    x, p, y = digits
    s, _ = _episode(y, 2, 0, seed=3)
    report = validate(x[s], y[s], p[s])
    assert set(report.measured) == {"frozen", "local"} and report.held_out == len(s)
    assert "two training examples" in report.skipped["protonet"]


def test_a_method_worse_on_held_out_labels_is_not_chosen(monkeypatch, digits):
    """Validation falls back: a trained method that got fewer held-out examples right never replaces frozen."""
    x, p, y = digits
    real = fewshot.fit_classifier

    def spoiled(method, features, labels, patches=None, **kw):
        clf = real(method, features, labels, patches, **kw)
        if method in ("protonet", "projection"):  # what overfitting to five examples can do: prototypes swapped
            clf.prototypes = np.roll(clf.prototypes, 1, axis=0)
        return clf

    monkeypatch.setattr(validation, "fit_classifier", spoiled)
    s, _ = _episode(y, 5, 0, seed=4)
    report = validate(x[s], y[s], methods=("frozen", "protonet", "projection"))
    assert report.measured["protonet"] < report.measured["frozen"]
    assert report.measured["projection"] < report.measured["frozen"]
    assert report.chosen == "frozen" and "frozen kept" in report.reason


def test_a_tie_with_frozen_keeps_frozen(monkeypatch, digits):
    x, p, y = digits
    real = fewshot.fit_classifier
    monkeypatch.setattr(validation, "fit_classifier",
                        lambda method, f, lab, patches=None, **kw: real("frozen", f, lab, **kw))
    s, _ = _episode(y, 4, 0, seed=5)
    report = validate(x[s], y[s], methods=("frozen", "protonet"))
    assert report.measured["protonet"] == report.measured["frozen"] and report.chosen == "frozen"


def test_adaptation_never_drops_below_frozen_on_digits(digits):
    """Over seeded 5-shot episodes the chosen classifier is at least as accurate as frozen prototypes on
    held-out queries, and validation never chose a method it measured below frozen."""
    x, p, y = digits
    chosen_acc, frozen_acc = [], []
    for seed in range(4):
        s, q = _episode(y, 5, 30, seed=100 + seed)
        clf, report = adapt_few_shot(x[s], y[s], p[s], seed=seed)
        assert report.measured[report.chosen] >= report.measured["frozen"]
        assert report.chosen == clf.method and report.held_out == len(s)
        chosen_acc.append(_accuracy(clf, x[q], p[q], y[q]))
        frozen_acc.append(_accuracy(fit_classifier("frozen", x[s], y[s]), x[q], p[q], y[q]))
    assert np.mean(chosen_acc) >= np.mean(frozen_acc) - 0.01, (chosen_acc, frozen_acc)


def test_the_report_round_trips_and_reads_in_one_line(digits):
    x, p, y = digits
    s, _ = _episode(y, 3, 0, seed=6)
    report = validate(x[s], y[s], p[s], methods=("frozen", "local"))
    back = AdaptationReport.from_dict(report.as_dict())
    assert back == report
    line = report.summary()
    assert line.startswith(report.chosen) and "frozen" in line and "3-fold" in line
    with pytest.raises(ValueError, match="not an adaptation report"):
        AdaptationReport.from_dict({"measured": {}})


def test_many_labels_are_validated_on_one_held_out_share(digits):
    """From SPLIT_SHOTS examples per class on, the projection head and the rest are fitted once and
    measured on a held-out share of the user's labels."""
    x, p, y = digits
    keep = np.concatenate([np.flatnonzero(y == c)[: validation.SPLIT_SHOTS] for c in ("3", "5", "8")])
    report = validate(x[keep], y[keep], methods=("frozen", "projection"), held_out_share=0.2)
    assert report.protocol == "held-out share 0.2" and report.held_out == 3 * 5
    assert report.measured[report.chosen] >= report.measured["frozen"] and set(report.measured) == {"frozen",
                                                                                                   "projection"}
