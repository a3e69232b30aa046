"""Train the projection head: triplet loss (margin 0.3) with batch-hard negative mining.

The head maps frozen image features (768-d for CLIP ViT-L/14; the default encoder's
size otherwise) to `AdaptationConfig.projection_out` (256) dimensions and is initialised
from the training features' principal directions, so epoch 0 already reproduces the
frozen geometry and training only has to improve on it. Training uses torch (imported
here, lazily); the result is a numpy `ProjectionHead`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from kira.adapt.io import ProjectionHead
from kira.adapt.labelled import labelled_rows
from kira.config import AdaptationConfig

log = logging.getLogger(__name__)

SVD_MAX_ENTRIES = 5_000_000  # pca_init: a direct SVD up to this many feature entries, the covariance's eigenvectors above
MONITOR_ROWS = 2000  # recall@1 per epoch is measured on at most this many rows (queries) against the training set


def recall_at_1(vectors: np.ndarray, labels: Sequence[str] | np.ndarray, gallery: np.ndarray | None = None,
                gallery_labels: Sequence[str] | np.ndarray | None = None) -> float:
    """Share of rows whose nearest neighbour (cosine) has the same label.

    Without a gallery: leave-one-out within `vectors`. With one: each row against the gallery.
    Raises ValueError for mismatched lengths or fewer than two rows (leave-one-out).
    """
    x = _unit(np.asarray(vectors, dtype=np.float32))
    labels = np.asarray(labels)
    if len(labels) != len(x):
        raise ValueError(f"{len(x)} vectors but {len(labels)} labels")
    if gallery is None:
        if len(x) < 2:
            raise ValueError("leave-one-out recall@1 needs at least two vectors")
        return float(np.mean(labels[_nearest(x, x, leave_one_out=True)] == labels))
    g = _unit(np.asarray(gallery, dtype=np.float32))
    glabels = np.asarray(gallery_labels)
    if len(glabels) != len(g):
        raise ValueError(f"{len(g)} gallery vectors but {len(glabels)} gallery labels")
    return float(np.mean(glabels[_nearest(x, g)] == labels))


def _nearest(x: np.ndarray, g: np.ndarray, *, leave_one_out: bool = False, block: int = 1024) -> np.ndarray:
    """Index of each row's most similar gallery row, computed `block` rows at a time (memory O(block * n))."""
    out = np.empty(len(x), dtype=np.int64)
    for start in range(0, len(x), block):
        sims = x[start : start + block] @ g.T
        if leave_one_out:
            rows = np.arange(sims.shape[0])
            sims[rows, start + rows] = -np.inf
        out[start : start + block] = np.argmax(sims, axis=1)
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def pca_init(features: np.ndarray, out_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(weight (in, out), bias (out,)) projecting centred features onto their top principal directions,
    scaled so the projections have unit mean norm.

    Columns beyond the feature rank are small random directions (out_dim may exceed in_dim).
    """
    x = np.asarray(features)
    n, d = x.shape
    mean = x.mean(axis=0, dtype=np.float64)
    if n * d <= SVD_MAX_ENTRIES:
        x = x.astype(np.float64)
        try:  # torch's SVD honours torch.set_num_threads; numpy's BLAS threads thrash on busy machines
            import torch

            vt = torch.linalg.svd(torch.from_numpy(x - mean), full_matrices=False)[2].numpy()
        except ImportError:
            _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
    else:  # many rows: eigenvectors of the (d, d) covariance, accumulated in blocks (no (n, d) float64 copies)
        cov = np.zeros((d, d))
        for start in range(0, n, 8192):
            block = x[start : start + 8192].astype(np.float64) - mean
            cov += block.T @ block
        evals, evecs = np.linalg.eigh(cov)
        keep = evals > evals.max() * 1e-12
        vt = evecs[:, keep][:, ::-1].T
    k = min(out_dim, vt.shape[0])
    weight = np.zeros((x.shape[1], out_dim))
    weight[:, :k] = vt[:k].T
    if out_dim > k:
        rng = np.random.default_rng(0)
        weight[:, k:] = rng.standard_normal((x.shape[1], out_dim - k)) * 1e-3
    # One overall scale so projected features have unit mean norm: the optimiser's step
    # size is then the same for every encoder (unit-norm inputs cluster tightly, and an
    # unscaled head was dominated by its bias within a few steps and collapsed).
    sample = x[:: max(1, n // 20000)]  # the scale from at most ~20,000 rows
    scale = 1.0 / max(float(np.linalg.norm((sample - mean) @ weight, axis=1).mean()), 1e-8)
    weight *= scale
    return weight.astype(np.float32), (-(mean @ weight)).astype(np.float32)


@dataclass
class TrainingHistory:
    """Per-epoch curves; index 0 is before the first epoch."""

    loss: list[float] = field(default_factory=list)
    train_recall_at_1: list[float] = field(default_factory=list)
    val_recall_at_1: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[float]]:
        return {"loss": self.loss, "train_recall@1": self.train_recall_at_1, "val_recall@1": self.val_recall_at_1}


@dataclass
class TrainResult:
    """The trained head and how training went."""

    head: ProjectionHead
    history: TrainingHistory


Triplets = tuple[np.ndarray, np.ndarray, np.ndarray]  # anchors, positives, negatives, each (n, in_dim)


def train_projection(
    features: np.ndarray,
    labels: Sequence[str] | np.ndarray,
    *,
    config: AdaptationConfig | None = None,
    out_dim: int | None = None,
    epochs: int | None = None,
    margin: float | None = None,
    val_features: np.ndarray | None = None,
    val_labels: Sequence[str] | np.ndarray | None = None,
    extra_triplets: Triplets | None = None,
    init: ProjectionHead | None = None,
    batch_size: int = 32,
    lr: float = 1e-2,
    seed: int = 0,
) -> TrainResult:
    """Train a projection head on frozen `features` (n, in_dim) with class `labels`.

    Loss: triplet loss on cosine distance, max(0, d(a, p) - d(a, n) + margin) over every (anchor,
    positive) pair in a batch, with n mined as the hardest semi-hard negative (FaceNet); plus, when `extra_triplets`
    (anchors, positives, negatives) are given (the feedback loop's mined hard negatives),
    the plain triplet loss over them. `config` defaults to KiraConfig().adaptation
    (out 256, margin 0.3, 50 epochs); keyword arguments override single fields.
    `init` continues from an existing head instead of the PCA initialisation.
    Memory and time grow with the number of rows, never with its square: negatives are
    mined inside each mini-batch (batch_size**3 distances), the loss before training is
    the mean over mini-batches, and recall@1 per epoch is measured on at most
    MONITOR_ROWS rows against the training set (60,000 Fashion-MNIST features of 1,280
    dimensions train in minutes on 2 cores).
    Returns TrainResult(head, history) with loss and recall@1 (train leave-one-out, val
    against the train gallery) per epoch.
    Raises ValueError for mismatched inputs or fewer than two classes; ImportError
    naming the `export` extra when torch is missing.
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError("training a domain adapter needs torch: pip install 'kira[export]'") from exc
    cfg = config or AdaptationConfig()
    out_dim = int(out_dim or cfg.projection_out)
    epochs = int(cfg.epochs if epochs is None else epochs)
    margin = float(cfg.triplet_margin if margin is None else margin)
    x, y_names, classes, y = labelled_rows(features, labels, needs="a triplet loss")
    if init is not None and init.in_dim != x.shape[1]:
        raise ValueError(f"init head expects {init.in_dim} features; got {x.shape[1]}")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    # Small matrices: one thread is fastest, and extra threads thrash on shared CPUs
    # (measured 25x slower with 2 threads under load).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        weight0, bias0 = (init.weight, init.bias) if init is not None else pca_init(x, out_dim)
        return _train(torch, x, y, y_names, classes, weight0, bias0, out_dim, epochs, margin, val_features,
                      val_labels, extra_triplets, batch_size, lr, rng)
    finally:
        torch.set_num_threads(threads)


def _train(torch, x, y, y_names, classes, weight0, bias0, out_dim, epochs, margin, val_features, val_labels,
           extra_triplets, batch_size, lr, rng) -> TrainResult:  # noqa: ANN001 - torch is a lazy module
    w = torch.nn.Parameter(torch.from_numpy(weight0.copy()))
    b = torch.nn.Parameter(torch.from_numpy(bias0.copy()))
    opt = torch.optim.Adam([w, b], lr=lr)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    extra = None
    if extra_triplets is not None and len(extra_triplets[0]):
        extra = tuple(torch.from_numpy(np.ascontiguousarray(t, dtype=np.float32)) for t in extra_triplets)

    def embed(v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(v @ w + b, dim=1)

    def snapshot() -> ProjectionHead:
        return ProjectionHead(w.detach().numpy().copy(), b.detach().numpy().copy(),
                              {"margin": margin, "epochs": epochs, "classes": [str(c) for c in classes],
                               "in_dim": int(x.shape[1]), "out_dim": out_dim, "loss": "triplet, semi-hard negative mining"})

    history = TrainingHistory()

    # recall@1 per epoch: up to MONITOR_ROWS training rows leave-one-out against the whole
    # training set, and up to MONITOR_ROWS validation rows against it (all rows when fewer)
    train_probe = np.sort(rng.choice(len(x), MONITOR_ROWS, replace=False)) if len(x) > MONITOR_ROWS else None
    val_probe = None
    if val_features is not None and val_labels is not None and len(val_labels) > MONITOR_ROWS:
        val_probe = np.sort(rng.choice(len(val_labels), MONITOR_ROWS, replace=False))

    def record(loss: float) -> None:
        head = snapshot()
        z = head.apply(x)
        history.loss.append(loss)
        if len(x) < 2:
            history.train_recall_at_1.append(float("nan"))
        elif train_probe is None:
            history.train_recall_at_1.append(recall_at_1(z, y_names))
        else:  # leave-one-out on the probe rows: each probe row's own row is masked out
            zp = _unit(z[train_probe])
            sims_best = np.empty(len(train_probe), dtype=np.int64)
            zu = _unit(z)
            for start in range(0, len(train_probe), 512):
                sims = zp[start : start + 512] @ zu.T
                rows = np.arange(sims.shape[0])
                sims[rows, train_probe[start : start + 512]] = -np.inf
                sims_best[start : start + 512] = np.argmax(sims, axis=1)
            history.train_recall_at_1.append(float(np.mean(y_names[sims_best] == y_names[train_probe])))
        if val_features is not None and val_labels is not None and len(val_labels):
            vf, vl = np.asarray(val_features), np.asarray([str(v) for v in val_labels])
            if val_probe is not None:
                vf, vl = vf[val_probe], vl[val_probe]
            history.val_recall_at_1.append(recall_at_1(head.apply(vf), vl, z, y_names))

    def batch_loss(idx: np.ndarray) -> torch.Tensor:
        # Hard-negative mining, FaceNet-style: each (anchor, positive) pair in the batch is
        # matched with the hardest *semi-hard* negative (the closest one still farther
        # than the positive), or the hardest negative when none is. Always taking the
        # hardest negative collapsed the embedding to a point (loss stuck at the margin).
        z = embed(xt[idx])
        lab = yt[idx]
        dist = 1.0 - z @ z.T
        same = lab[:, None] == lab[None, :]
        pos_mask = same & ~torch.eye(len(idx), dtype=torch.bool)
        d_ap = dist[:, :, None]  # (a, p, 1)
        d_an = dist[:, None, :]  # (a, 1, n)
        neg = (~same)[:, None, :]
        big = torch.full_like(d_an.expand(-1, len(idx), -1), 3.0)
        semi = torch.where(neg & (d_an > d_ap), d_an.expand_as(big), big).min(dim=2).values
        hardest = torch.where(neg, d_an.expand_as(big), big).min(dim=2).values
        chosen = torch.where(semi < 3.0, semi, hardest)
        violation = torch.relu(dist - chosen + margin)
        valid = pos_mask & (~same).any(dim=1, keepdim=True)
        loss = violation[valid].mean() if bool(valid.any()) else z.sum() * 0.0
        if extra is not None:
            a, p, n = (embed(t) for t in extra)
            loss = loss + torch.relu((1 - (a * p).sum(1)) - (1 - (a * n).sum(1)) + margin).mean()
        return loss

    with torch.no_grad():  # the loss before training, over the same mini-batches training uses (bounded memory)
        order0 = rng.permutation(len(x))
        losses = [float(batch_loss(order0[i : i + batch_size]).item())
                  for i in range(0, len(x), batch_size) if len(order0[i : i + batch_size]) >= 2]
        record(float(np.mean(losses)) if losses else 0.0)
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total, batches = 0.0, 0
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            if len(idx) < 2:
                continue
            opt.zero_grad()
            loss = batch_loss(idx)
            loss.backward()
            opt.step()
            total += float(loss.item())
            batches += 1
        record(total / max(batches, 1))
        log.debug("epoch %d: loss %.4f train r@1 %.3f", epoch + 1, history.loss[-1], history.train_recall_at_1[-1])
    return TrainResult(snapshot(), history)


def plot_training_curves(history: TrainingHistory, path: str, *, title: str = "projection head") -> None:
    """Write loss and recall@1 (train / val) per epoch as a PNG (matplotlib Agg), atomically.

    Raises ImportError naming the `demo` extra when matplotlib is missing.
    """
    from kira.figures import atomic_savefig, pyplot

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
    epochs = np.arange(len(history.loss))
    ax1.plot(epochs, history.loss, color="tab:red")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("triplet loss")
    ax1.set_title(f"{title}: loss")
    ax2.plot(epochs, history.train_recall_at_1, label="train (leave-one-out)")
    if history.val_recall_at_1:
        ax2.plot(np.arange(len(history.val_recall_at_1)), history.val_recall_at_1, label="validation")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("recall@1")
    ax2.set_ylim(0, 1.02)
    ax2.legend(loc="lower right")
    ax2.set_title(f"{title}: recall@1")
    fig.tight_layout()
    atomic_savefig(fig, path)
    plt.close(fig)
