"""TextToImageBridge: text queries on the visual path when there is no CLIP text tower.

With the default stack the image space (pixel descriptors) and the text space (MiniLM)
are unrelated, so a text-only question could not use path A. The bridge learns a
linear map from sentence space into image space from the knowledge base's captioned
images: ridge regression, solved in closed form, with both sides centred (so the map
has an intercept). The ridge strength lambda is chosen on a held-out split (20 % of the
pairs, seeded) by the mean reciprocal rank of each held-out image given its caption,
then the map is refitted on all pairs. With fewer than `min_pairs_for_validation`
pairs there is nothing to validate on, and lambda = `default_lambda`.

How far the map works on this knowledge base is measured too (`BridgeFit.skill`): k-fold
cross-validation (5 folds; leave-one-out below 5 pairs) at the chosen lambda, each held-out
caption's mapped vector ranking its own image among the images (all of them, or a seeded
sample of `SKILL_CANDIDATES` with the held-out ones), as mean reciprocal rank rescaled so
that chance is 0 and always first is 1: skill = max(0, (MRR - MRR_chance) / (1 - MRR_chance)),
MRR_chance = H_m / m for m candidates. A map fitted on five unrelated pairs ranks held-out
images no better than chance (skill ~0); the pipeline weighs the question's bridged visual
path by it (kira.retrieval.search.visual_search), so such a bridge cannot outvote the text path.

`fit` replaces any previous fit (call it again when the knowledge base grows);
`save`/`load` use .npz with allow_pickle=False, written atomically.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from kira.atomic import write_atomic

FORMAT_VERSION = 1
SKILL_FOLDS = 5  # cross-validation folds for `BridgeFit.skill` (leave-one-out below this many pairs)
SKILL_CANDIDATES = 1000  # images each held-out caption is ranked among (all of them when fewer)
SKILL_HELD_OUT = 200  # held-out pairs scored per fold (a seeded sample when a fold holds more)


@dataclass(frozen=True)
class BridgeFit:
    """What a fit did: how many pairs, which lambda, and the validation figure behind it."""

    pairs: int
    ridge_lambda: float
    validation_mrr: float | None  # held-out mean reciprocal rank at the chosen lambda (None: too few pairs)
    candidates: tuple[float, ...]  # the lambdas tried
    skill: float | None = None  # 0-1, held-out ranking skill over chance (module docstring); None: unknown


class TextToImageBridge:
    """Linear text-space -> image-space map fitted by ridge regression.

    Parameters: lambdas (ridge strengths tried on the validation split),
    validation_fraction, min_pairs_for_validation, default_lambda, seed (split).
    Thread safety: `encode_vectors` is read-only and may run concurrently; `fit`
    and `load` must not run concurrently with it.
    """

    def __init__(
        self,
        *,
        lambdas: Sequence[float] = (0.01, 0.1, 1.0, 10.0, 100.0),
        validation_fraction: float = 0.2,
        min_pairs_for_validation: int = 10,
        default_lambda: float = 1.0,
        seed: int = 0,
    ) -> None:
        if not lambdas or min(lambdas) <= 0:
            raise ValueError("lambdas must be a non-empty sequence of positive ridge strengths")
        if not 0.0 < validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in (0, 1), got {validation_fraction}")
        self.lambdas = tuple(float(x) for x in lambdas)
        self.validation_fraction = validation_fraction
        self.min_pairs_for_validation = min_pairs_for_validation
        self.default_lambda = float(default_lambda)
        self.seed = seed
        self._weights: np.ndarray | None = None  # (text_dim, image_dim)
        self._x_mean: np.ndarray | None = None
        self._y_mean: np.ndarray | None = None
        self.last_fit: BridgeFit | None = None

    @property
    def fitted(self) -> bool:
        return self._weights is not None

    @property
    def text_dim(self) -> int:
        return self._require().shape[0]

    @property
    def dim(self) -> int:
        """Image-space dimension (the size of `encode_vectors` rows)."""
        return self._require().shape[1]

    def fit(self, text_vectors: np.ndarray, image_vectors: np.ndarray) -> BridgeFit:
        """Fit (or refit) the map from paired rows: text_vectors[i] describes image_vectors[i].

        Parameters: text_vectors float (n, text_dim), image_vectors float (n, image_dim),
        n >= 2. Returns a BridgeFit. Raises ValueError for mismatched, empty or
        non-finite input.
        """
        x = _matrix(text_vectors, "text_vectors")
        y = _matrix(image_vectors, "image_vectors")
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"text_vectors has {x.shape[0]} rows but image_vectors has {y.shape[0]}; pass pairs")
        n = x.shape[0]
        if n < 2:
            raise ValueError(f"need at least 2 captioned images to fit the bridge, got {n}")
        lam, mrr = self.default_lambda, None
        if n >= self.min_pairs_for_validation:
            rng = np.random.default_rng(self.seed)
            order = rng.permutation(n)
            n_val = max(2, int(round(n * self.validation_fraction)))
            val, train = order[:n_val], order[n_val:]
            scores = []
            for candidate in self.lambdas:
                w, xm, ym = _ridge(x[train], y[train], candidate)
                scores.append(_mrr(_predict(x[val], w, xm, ym), y[val]))
            best = int(np.argmax(scores))  # ties: the first, i.e. the smallest lambda
            lam, mrr = self.lambdas[best], float(scores[best])
        skill = cross_validated_skill(x, y, lam, seed=self.seed)
        self._weights, self._x_mean, self._y_mean = _ridge(x, y, lam)
        self.last_fit = BridgeFit(pairs=n, ridge_lambda=lam, validation_mrr=mrr, candidates=self.lambdas, skill=skill)
        return self.last_fit

    @property
    def skill(self) -> float | None:
        """How well the fitted map ranks held-out images, 0 (chance) to 1 (`BridgeFit.skill`); None when unknown
        (not fitted, or loaded from a file written before kira measured it)."""
        return self.last_fit.skill if self.last_fit is not None else None

    def encode_vectors(self, text_vectors: np.ndarray) -> np.ndarray:
        """Map text vectors (m, text_dim) into image space: float32 (m, image_dim), unit rows.

        Raises ValueError if the bridge is not fitted or the width is wrong.
        """
        w = self._require()
        assert self._x_mean is not None and self._y_mean is not None  # set with the weights
        x = _matrix(text_vectors, "text_vectors", allow_empty=True)
        if x.shape[1] != w.shape[0]:
            raise ValueError(f"text_vectors have width {x.shape[1]}, the bridge was fitted on width {w.shape[0]}")
        return _predict(x, w, self._x_mean, self._y_mean).astype(np.float32)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the fitted map to `path` (.npz, no pickle) atomically. Returns the path."""
        w = self._require()
        assert self._x_mean is not None and self._y_mean is not None  # set with the weights
        fit = self.last_fit
        buffer = io.BytesIO()
        np.savez(
            buffer,
            format_version=np.array(FORMAT_VERSION, np.int64),
            weights=w.astype(np.float32),
            x_mean=self._x_mean.astype(np.float32),
            y_mean=self._y_mean.astype(np.float32),
            ridge_lambda=np.array(fit.ridge_lambda if fit else self.default_lambda, np.float64),
            pairs=np.array(fit.pairs if fit else 0, np.int64),
            skill=np.array(np.nan if fit is None or fit.skill is None else fit.skill, np.float64),
        )
        return write_atomic(path, buffer.getvalue())

    @classmethod
    def load(cls, path: str | os.PathLike) -> TextToImageBridge:
        """Read a bridge written by `save`. Raises FileNotFoundError or ValueError (bad file)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"bridge file not found: {path}")
        try:
            with np.load(path, allow_pickle=False) as data:
                version = int(data["format_version"])
                if version != FORMAT_VERSION:
                    raise ValueError(f"{path} has bridge format {version}; this kira reads {FORMAT_VERSION}")
                weights = data["weights"].astype(np.float64)
                x_mean = data["x_mean"].astype(np.float64)
                y_mean = data["y_mean"].astype(np.float64)
                lam = float(data["ridge_lambda"])
                pairs = int(data["pairs"])
                skill = float(data["skill"]) if "skill" in data.files else float("nan")
        except (KeyError, OSError, EOFError) as exc:
            raise ValueError(f"{path} is not a kira bridge file: {exc}") from exc
        if weights.ndim != 2 or x_mean.shape != (weights.shape[0],) or y_mean.shape != (weights.shape[1],):
            raise ValueError(f"{path} has inconsistent shapes; refit and save the bridge again")
        bridge = cls(default_lambda=lam)
        bridge._weights, bridge._x_mean, bridge._y_mean = weights, x_mean, y_mean
        bridge.last_fit = BridgeFit(pairs=pairs, ridge_lambda=lam, validation_mrr=None, candidates=(lam,),
                                    skill=None if np.isnan(skill) else skill)
        return bridge

    def _require(self) -> np.ndarray:
        if self._weights is None:
            raise ValueError("the bridge is not fitted: call fit(text_vectors, image_vectors) or load(path) first")
        return self._weights


class BridgedTextEncoder:
    """A TextEncoder into image space: a sentence encoder followed by a fitted bridge."""

    def __init__(self, text_encoder, bridge: TextToImageBridge) -> None:
        self.text_encoder = text_encoder
        self.bridge = bridge
        self.dim = bridge.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, image_dim) unit rows in the image space."""
        return self.bridge.encode_vectors(self.text_encoder.encode(texts))


def _matrix(a: np.ndarray, name: str, *, allow_empty: bool = False) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2 or (a.shape[0] == 0 and not allow_empty) or a.shape[1] == 0:
        raise ValueError(f"{name} must be a 2-d array (n, dim) with rows, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.number):
        raise ValueError(f"{name} must be numeric, got {a.dtype}")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf")
    return a


def _ridge(x: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Closed-form ridge on centred data; dual form when there are fewer pairs than features."""
    from scipy import linalg

    xm, ym = x.mean(axis=0), y.mean(axis=0)
    xc, yc = x - xm, y - ym
    n, d = xc.shape
    if n <= d:  # W = Xc^T (Xc Xc^T + lam I)^-1 Yc
        gram = xc @ xc.T + lam * np.eye(n)
        w = xc.T @ linalg.solve(gram, yc, assume_a="pos")
    else:  # W = (Xc^T Xc + lam I)^-1 Xc^T Yc
        gram = xc.T @ xc + lam * np.eye(d)
        w = linalg.solve(gram, xc.T @ yc, assume_a="pos")
    return w, xm, ym


def _predict(x: np.ndarray, w: np.ndarray, xm: np.ndarray, ym: np.ndarray) -> np.ndarray:
    p = (x - xm) @ w + ym
    return p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)


def cross_validated_skill(x: np.ndarray, y: np.ndarray, lam: float, *, seed: int = 0) -> float:
    """Held-out ranking skill of a ridge map at `lam` over (x, y) pairs, in [0, 1] (module docstring)."""
    n = x.shape[0]
    rng = np.random.default_rng(seed)
    folds = np.array_split(rng.permutation(n), min(SKILL_FOLDS, n))
    yn = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    gains, weights = [], []
    for fold in folds:
        train = np.setdiff1d(np.arange(n), fold)
        held = fold if len(fold) <= SKILL_HELD_OUT else rng.choice(fold, SKILL_HELD_OUT, replace=False)
        others = np.setdiff1d(np.arange(n), held)
        if len(held) + len(others) > SKILL_CANDIDATES:
            others = rng.choice(others, max(SKILL_CANDIDATES - len(held), 0), replace=False)
        candidates = np.concatenate([held, others])
        w, xm, ym = _ridge(x[train], y[train], lam)
        sims = _predict(x[held], w, xm, ym) @ yn[candidates].T
        true = sims[np.arange(len(held)), np.arange(len(held))][:, None]
        mrr = float(np.mean(1.0 / (1 + (sims > true).sum(axis=1))))
        m = len(candidates)
        chance = float(np.sum(1.0 / np.arange(1, m + 1)) / m)
        gains.append(max(0.0, (mrr - chance) / (1.0 - chance)) if chance < 1.0 else 0.0)
        weights.append(len(held))
    return float(np.average(gains, weights=weights))


def _mrr(pred: np.ndarray, y: np.ndarray) -> float:
    yn = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    sims = pred @ yn.T
    true = np.diag(sims)[:, None]
    ranks = 1 + (sims > true).sum(axis=1)
    return float(np.mean(1.0 / ranks))
