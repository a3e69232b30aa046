"""TextToImageBridge: ridge fit, held-out quality against a random map, persistence, refits."""

from __future__ import annotations

import numpy as np
import pytest

from kira.models.bridge import BridgedTextEncoder, TextToImageBridge


def _pairs(n: int, seed: int = 0, noise: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Text vectors from a few latent factors; image vectors a noisy linear image of the same factors."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 8))
    x = z @ rng.normal(size=(8, 48)) + 0.1 * rng.normal(size=(n, 48))
    y = z @ rng.normal(size=(8, 32)) + noise * rng.normal(size=(n, 32)) + 0.5
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return x.astype(np.float32), y.astype(np.float32)


def _recall_at_1(pred: np.ndarray, y: np.ndarray) -> float:
    return float((np.argmax(pred @ y.T, axis=1) == np.arange(len(y))).mean())


def test_beats_a_random_map_on_held_out_pairs():
    x, y = _pairs(300)
    train, test = slice(0, 240), slice(240, 300)
    bridge = TextToImageBridge()
    fit = bridge.fit(x[train], y[train])
    assert fit.pairs == 240 and fit.ridge_lambda in fit.candidates and fit.validation_mrr is not None
    pred = bridge.encode_vectors(x[test])
    assert pred.shape == (60, 32) and pred.dtype == np.float32
    assert np.allclose(np.linalg.norm(pred, axis=1), 1.0, atol=1e-5)
    rng = np.random.default_rng(1)
    rand = x[test] @ rng.normal(size=(48, 32))
    rand /= np.linalg.norm(rand, axis=1, keepdims=True)
    ours, baseline = _recall_at_1(pred, y[test]), _recall_at_1(rand, y[test])
    assert ours >= 0.5 and ours > baseline + 0.3, (ours, baseline)


def test_few_pairs_use_the_default_lambda_and_dual_form():
    x, y = _pairs(5)
    fit = TextToImageBridge(default_lambda=0.5).fit(x, y)
    assert fit.ridge_lambda == 0.5 and fit.validation_mrr is None


def test_save_load_round_trip(tmp_path):
    x, y = _pairs(60)
    bridge = TextToImageBridge()
    bridge.fit(x, y)
    path = bridge.save(tmp_path / "kb" / "bridge")  # no suffix: saved exactly there
    assert path == tmp_path / "kb" / "bridge" and path.is_file()
    assert not list(path.parent.glob("*.tmp"))
    loaded = TextToImageBridge.load(path)
    assert np.allclose(loaded.encode_vectors(x[:7]), bridge.encode_vectors(x[:7]), atol=1e-6)
    assert loaded.dim == 32 and loaded.text_dim == 48
    with np.load(path, allow_pickle=False) as data:  # nothing in it needs pickle
        assert set(data.files) >= {"weights", "x_mean", "y_mean", "format_version"}


def test_refit_replaces_the_previous_fit():
    x, y = _pairs(80, seed=0)
    x2, y2 = _pairs(80, seed=5)
    bridge = TextToImageBridge()
    bridge.fit(x, y)
    before = bridge.encode_vectors(x[:3])
    bridge.fit(x2, y2)
    assert not np.allclose(before, bridge.encode_vectors(x[:3]))
    fresh = TextToImageBridge()
    fresh.fit(x2, y2)
    assert np.allclose(fresh.encode_vectors(x[:3]), bridge.encode_vectors(x[:3]))


def test_errors(tmp_path):
    bridge = TextToImageBridge()
    with pytest.raises(ValueError, match="not fitted"):
        bridge.encode_vectors(np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match="pairs"):
        bridge.fit(np.zeros((3, 4)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="at least 2"):
        bridge.fit(np.ones((1, 4)), np.ones((1, 4)))
    with pytest.raises(ValueError, match="NaN"):
        bridge.fit(np.full((3, 4), np.nan), np.ones((3, 4)))
    x, y = _pairs(20)
    bridge.fit(x, y)
    with pytest.raises(ValueError, match="width"):
        bridge.encode_vectors(np.zeros((1, 5), np.float32))
    assert bridge.encode_vectors(np.zeros((0, 48), np.float32)).shape == (0, 32)
    bad = tmp_path / "bad.npz"
    np.savez(bad, something=np.zeros(3))
    with pytest.raises(ValueError, match="not a kira bridge"):
        TextToImageBridge.load(bad)
    with pytest.raises(FileNotFoundError):
        TextToImageBridge.load(tmp_path / "nope.npz")
    with pytest.raises(ValueError):
        TextToImageBridge(lambdas=())


def test_bridged_text_encoder():
    x, y = _pairs(40)
    bridge = TextToImageBridge()
    bridge.fit(x, y)

    class Fixed:
        dim = 48

        def encode(self, texts):
            return x[: len(texts)]

    enc = BridgedTextEncoder(Fixed(), bridge)
    assert enc.dim == 32
    assert np.allclose(enc.encode(["a", "b"]), bridge.encode_vectors(x[:2]))


def test_skill_measures_held_out_ranking_over_chance_and_survives_save_load(tmp_path):
    x, y = _pairs(200)
    related = TextToImageBridge()
    related.fit(x, y)
    rng = np.random.default_rng(3)
    unrelated = TextToImageBridge()
    unrelated.fit(x, y[rng.permutation(len(y))])  # captions paired with the wrong images: nothing to learn
    assert related.skill is not None and unrelated.skill is not None
    assert related.skill > 0.5 and unrelated.skill < 0.1, (related.skill, unrelated.skill)
    few = TextToImageBridge()
    few.fit(*_pairs(2))  # two pairs: leave-one-out learns nothing from one pair
    assert few.skill == 0.0
    loaded = TextToImageBridge.load(related.save(tmp_path / "b.npz"))
    assert loaded.skill == pytest.approx(related.skill)
    assert TextToImageBridge().skill is None


def test_a_bridge_file_written_before_skill_loads_with_skill_unknown(tmp_path):
    bridge = TextToImageBridge()
    bridge.fit(*_pairs(20))
    path = bridge.save(tmp_path / "b.npz")
    with np.load(path) as data:
        old = {k: data[k] for k in data.files if k != "skill"}
    np.savez(tmp_path / "old.npz", **old)
    assert TextToImageBridge.load(tmp_path / "old.npz").skill is None
