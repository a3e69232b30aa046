"""ProtoNet few-shot adapter: 5 labelled examples per class, 10 epochs of episodic training.

Each episode splits every class's shots into support and query, builds one prototype
per class (the mean support embedding), and scores queries by cosine to the prototypes
(softmax cross-entropy, temperature `scale`). The embedding is the same linear head as
the projection adapter (PCA-initialised); after training the prototypes are rebuilt
from all shots. The result is a numpy `ProtoNetHead` (apply / predict / save).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from kira.adapt.io import ProtoNetHead
from kira.adapt.projection import pca_init
from kira.config import AdaptationConfig


def select_shots(labels: Sequence[str] | np.ndarray, shots: int, seed: int = 0) -> np.ndarray:
    """Indices of `shots` examples per class (all of a class's examples when it has fewer), sorted."""
    rng = np.random.default_rng(seed)
    labels = np.asarray([str(v) for v in labels])
    picked = [rng.permutation(np.flatnonzero(labels == c))[:shots] for c in np.unique(labels)]
    return np.sort(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)


def train_protonet(
    features: np.ndarray,
    labels: Sequence[str] | np.ndarray,
    *,
    config: AdaptationConfig | None = None,
    shots: int | None = None,
    epochs: int | None = None,
    episodes_per_epoch: int = 20,
    out_dim: int | None = None,
    scale: float = 10.0,
    lr: float = 5e-3,
    seed: int = 0,
) -> ProtoNetHead:
    """Train a ProtoNet adapter from a few labelled examples.

    `features` (n, in_dim) and `labels`; `shots` examples per class are drawn from them
    (config.protonet_shots = 5 by default) and only those are used. `epochs` defaults to
    config.protonet_epochs (10). Returns a ProtoNetHead.
    Raises ValueError for fewer than two classes or a class with fewer than two shots;
    ImportError naming the `export` extra without torch.
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover
        raise ImportError("training a ProtoNet adapter needs torch: pip install 'kira[export]'") from exc
    cfg = config or AdaptationConfig()
    shots = int(cfg.protonet_shots if shots is None else shots)
    epochs = int(cfg.protonet_epochs if epochs is None else epochs)
    out_dim = int(out_dim or cfg.projection_out)
    x_all = np.ascontiguousarray(features, dtype=np.float32)
    names = np.asarray([str(v) for v in labels])
    if x_all.ndim != 2 or len(names) != len(x_all):
        raise ValueError(f"features must be (n, dim) with one label per row; got {x_all.shape}, {len(names)} labels")
    idx = select_shots(names, shots, seed)
    x, names = x_all[idx], names[idx]
    classes, y = np.unique(names, return_inverse=True)
    counts = np.bincount(y)
    if len(classes) < 2 or counts.min() < 2:
        raise ValueError("ProtoNet needs at least two classes with at least two shots each")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rng = np.random.default_rng(seed)
        torch.manual_seed(seed)
        w0, b0 = pca_init(x_all, out_dim)
        w = torch.nn.Parameter(torch.from_numpy(w0))
        b = torch.nn.Parameter(torch.from_numpy(b0))
        opt = torch.optim.Adam([w, b], lr=lr)
        xt = torch.from_numpy(x)
        members = [np.flatnonzero(y == c) for c in range(len(classes))]
        for _ in range(epochs):
            for _ in range(episodes_per_epoch):
                support: list[np.ndarray] = []
                query: list[int] = []
                qy: list[int] = []
                for c, m in enumerate(members):
                    perm = rng.permutation(m)
                    n_support = max(1, len(m) // 2 + len(m) % 2)
                    support.append(perm[:n_support])
                    query.extend(perm[n_support:])
                    qy.extend([c] * (len(m) - n_support))
                z_all = torch.nn.functional.normalize(xt @ w + b, dim=1)
                protos = torch.stack([z_all[torch.from_numpy(s)].mean(0) for s in support])
                protos = torch.nn.functional.normalize(protos, dim=1)
                logits = scale * z_all[torch.from_numpy(np.asarray(query))] @ protos.T
                loss = torch.nn.functional.cross_entropy(logits, torch.tensor(qy))
                opt.zero_grad()
                loss.backward()
                opt.step()
        weight, bias = w.detach().numpy().copy(), b.detach().numpy().copy()
    finally:
        torch.set_num_threads(threads)
    head = ProtoNetHead(weight, bias, {"shots": shots, "epochs": epochs, "episodes_per_epoch": episodes_per_epoch,
                                       "scale": scale, "support_size": int(len(x))},
                        prototypes=np.zeros((0, 0), np.float32), classes=())
    z = head.apply(x)
    protos = np.stack([z[y == c].mean(axis=0) for c in range(len(classes))])
    return ProtoNetHead(weight, bias, head.info, prototypes=protos, classes=tuple(str(c) for c in classes))


def prototype_accuracy(head: ProtoNetHead, features: np.ndarray, labels: Sequence[str]) -> float:
    """Share of rows whose nearest prototype is their label."""
    predicted = head.predict(features)
    return float(np.mean(np.asarray(predicted) == np.asarray([str(v) for v in labels])))
