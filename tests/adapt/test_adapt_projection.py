"""Domain adapters: the projection head and ProtoNet improve held-out recall@1 over frozen
features; files round-trip without pickle; applying needs no torch; the feedback loop."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kira.adapt import ProjectionHead, ProtoNetHead, load_adapter
from kira.adapt.feedback import FeedbackCase, feedback_round, mine_hard_negatives
from kira.adapt.projection import recall_at_1, train_projection
from kira.adapt.protonet import prototype_accuracy, train_protonet
from kira.config import AdaptationConfig

TORCH = "torch is not installed: pip install 'kira[export]' (the CPU build: --index-url https://download.pytorch.org/whl/cpu)"  # training needs torch; applying a head does not


def _features(n_per_class: int, seed: int, classes: int = 4, dim: int = 48):
    """Class signal in a weak subspace, swamped by a strong low-rank nuisance (as frozen features are)."""
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(99).standard_normal((classes, dim))
    nuisance_basis = np.random.default_rng(98).standard_normal((6, dim))
    labels = np.repeat([f"c{i}" for i in range(classes)], n_per_class)
    idx = np.repeat(np.arange(classes), n_per_class)
    x = 0.6 * basis[idx] + 2.0 * rng.standard_normal((len(idx), 6)) @ nuisance_basis
    x += 0.1 * rng.standard_normal(x.shape)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), labels


@pytest.fixture(scope="session")
def data():
    return _features(30, 0), _features(20, 1)


@pytest.fixture(scope="session")
def trained(data):
    pytest.importorskip("torch", reason=TORCH)
    (x, y), (xv, yv) = data
    return train_projection(x, y, out_dim=16, epochs=15, val_features=xv, val_labels=yv, seed=0)


def test_head_beats_frozen_features_on_held_out(data, trained):
    (x, y), (xv, yv) = data
    frozen = recall_at_1(xv, yv, x, y)
    head = trained.head
    adapted = recall_at_1(head.apply(xv), yv, head.apply(x), y)
    assert frozen < 0.8
    assert adapted > frozen + 0.1, (frozen, adapted)
    hist = trained.history
    assert len(hist.loss) == 16 and hist.loss[-1] < hist.loss[0]
    assert hist.val_recall_at_1[-1] > hist.val_recall_at_1[0]


def test_defaults_come_from_the_config():
    pytest.importorskip("torch", reason=TORCH)
    cfg = AdaptationConfig()
    x, y = _features(4, 2, dim=12)
    result = train_projection(x, y, epochs=1)
    assert result.head.dim == cfg.projection_out and result.head.in_dim == 12
    assert result.head.info["margin"] == cfg.triplet_margin
    with pytest.raises(ValueError, match="two classes"):
        train_projection(x, ["a"] * len(x), epochs=1)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_round_trip(tmp_path, trained, suffix):
    head = trained.head
    path = head.save(tmp_path / f"head{suffix}")
    loaded = ProjectionHead.load(path)
    probe = np.random.default_rng(0).standard_normal((3, head.in_dim)).astype(np.float32)
    np.testing.assert_allclose(loaded.apply(probe), head.apply(probe), rtol=1e-6)
    assert loaded.info["margin"] == 0.3
    assert not list(tmp_path.glob("*.tmp"))  # atomic: no temp file left behind
    # a single vector maps to a single unit vector; a wrong size is a ValueError
    one = loaded.apply(probe[0])
    assert one.shape == (head.dim,) and np.isclose(np.linalg.norm(one), 1.0)
    with pytest.raises(ValueError, match="features"):
        loaded.apply(np.zeros((2, head.in_dim + 1), np.float32))


def test_npz_without_metadata_is_refused(tmp_path):
    path = tmp_path / "foreign.npz"
    np.savez(path, weight=np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="not a kira adapter"):
        load_adapter(path)


def test_applying_does_not_import_torch(tmp_path, trained):
    path = trained.head.save(tmp_path / "head.npz")
    code = ("import sys, numpy as np; from kira.adapt import load_adapter; h = load_adapter(sys.argv[1]); "
            "h.apply(np.ones((1, h.in_dim), np.float32)); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_protonet_few_shot(tmp_path, data):
    pytest.importorskip("torch", reason=TORCH)
    (x, y), (xv, yv) = data
    head = train_protonet(x, y, epochs=10, out_dim=16, seed=0)
    assert head.info["support_size"] == 4 * AdaptationConfig().protonet_shots
    assert head.prototypes.shape == (4, 16)
    accuracy = prototype_accuracy(head, xv, yv)
    assert accuracy > 0.5  # 4 classes: chance is 0.25
    loaded = load_adapter(head.save(tmp_path / "proto.npz"))
    assert isinstance(loaded, ProtoNetHead) and loaded.predict(xv[:5]) == head.predict(xv[:5])


def test_feedback_mines_wrong_retrievals_and_reports(data, trained):
    (x, y), _ = data
    ids = [f"d{i}" for i in range(len(x))]
    c1 = [i for i in range(len(x)) if y[i] == "c1"]
    c2 = [i for i in range(len(x)) if y[i] == "c2"]
    bad = FeedbackCase("q1", 0.2, x[c1[0]], tuple(ids[i] for i in c1[1:4]), tuple(ids[i] for i in c2[:3]))
    good = FeedbackCase("q2", 0.9, x[c2[0]], (ids[c2[1]],), (ids[c2[1]],))
    failing, (a, p, n) = mine_hard_negatives([bad, good], dict(zip(ids, x)), threshold=0.5)
    assert [c.qid for c in failing] == ["q1"] and len(a) == 9
    report = feedback_round(trained.head, x, y, ids, [bad, good], epochs=3)
    assert report.failures == 1 and report.triplets == 9
    assert report.changes[0]["qid"] == "q1" and report.head is not trained.head
    assert report.changes[0]["rank_after"] <= report.changes[0]["rank_before"]
    untouched = feedback_round(trained.head, x, y, ids, [good], epochs=3)
    assert untouched.triplets == 0 and untouched.head is trained.head


def test_feedback_mines_no_negative_of_the_positives_own_class(data, trained):
    (x, y), _ = data
    ids = [f"d{i}" for i in range(len(x))]
    c1 = [i for i in range(len(x)) if y[i] == "c1"]
    c2 = [i for i in range(len(x)) if y[i] == "c2"]
    # wanted two specific c1 documents, got other c1 documents and one c2 document
    case = FeedbackCase("q", 0.2, x[c1[0]], (ids[c1[1]], ids[c1[2]]), (ids[c1[3]], ids[c1[4]], ids[c2[0]]))
    labels = dict(zip(ids, y))
    _, (a, p, n) = mine_hard_negatives([case], dict(zip(ids, x)), threshold=0.5, labels=labels)
    np.testing.assert_array_equal(n, np.stack([x[c2[0]], x[c2[0]]]))  # only the other class's document
    _, (a_all, _, _) = mine_hard_negatives([case], dict(zip(ids, x)), threshold=0.5)
    assert len(a_all) == 6  # without labels every wrong document counts
    assert feedback_round(trained.head, x, y, ids, [case], epochs=3).triplets == 2


def test_training_memory_does_not_grow_with_the_cube_of_the_set():
    # 12,000 rows: the whole-set triplet tensor the first loss used to build would be 12000**3 floats (6.9 TB)
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((10, 64))
    labels = rng.integers(0, 10, 12_000)
    x = (centres[labels] + 1.5 * rng.standard_normal((12_000, 64))).astype(np.float32)
    result = train_projection(x, labels.astype(str), out_dim=32, epochs=1, batch_size=64, seed=0)
    assert result.head.dim == 32 and len(result.history.loss) == 2
    assert result.history.loss[1] < result.history.loss[0]
    # the per-epoch recall is measured on a probe of the rows, and is a real recall
    assert 0.1 < result.history.train_recall_at_1[1] <= 1.0
