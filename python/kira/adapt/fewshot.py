"""Few-shot class prototypes from a user's labelled images, by one of four methods.

* ``frozen``: the mean of each class's frozen feature vectors (nothing trained).
* ``protonet``: the ProtoNet adapter (`kira.adapt.protonet`), prototypes in its space.
* ``projection``: the projection head (`kira.adapt.projection`, triplet loss), class means in its space.
* ``local``: frozen prototypes plus the local-difference score of `kira.adapt.local` (each
  class's stored patch vectors covering every patch of an image), averaged half and half.

`fit_classifier` builds one; `FewShotClassifier` scores and predicts with numpy only and is
saved without pickle. Which method a knowledge base uses is chosen by validation
(`kira.adapt.validation`), never assumed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from kira.adapt.io import FORMAT_VERSION, ProjectionHead, load_adapter, save_arrays
from kira.adapt.labelled import labelled_rows
from kira.adapt.local import check_patches, patch_coverage, unit_rows
from kira.config import AdaptationConfig

METHODS = ("frozen", "protonet", "projection", "local")  # the order ties are broken in: simplest first
TRAINED = ("protonet", "projection")  # methods that train a head (need two examples per class)
LOCAL_WEIGHT = 0.5  # `local`: share of the patch-coverage score beside the frozen prototype's cosine
MAX_MEMORY_PER_CLASS = 4096  # `local`: patch vectors kept per class (a seeded sample beyond this)


@dataclass
class FewShotClassifier:
    """Class prototypes (and, for ``local``, a patch memory) over raw image features.

    `method` one of METHODS; `classes` the class names; `prototypes` (n_classes, d) unit rows
    in the method's space; `head` the trained head (``protonet``/``projection``) or None;
    `memory` (m, raw dim) unit patch vectors and `memory_class` (m,) class indices (``local``).
    """

    method: str
    classes: tuple[str, ...]
    prototypes: np.ndarray
    head: ProjectionHead | None = None
    memory: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    memory_class: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        self.classes = tuple(str(c) for c in self.classes)
        self.prototypes = unit_rows(self.prototypes)
        if self.prototypes.shape[0] != len(self.classes):
            raise ValueError(f"{len(self.classes)} classes but {self.prototypes.shape[0]} prototypes")
        if self.method in TRAINED and self.head is None:
            raise ValueError(f"a {self.method} classifier needs its trained head")
        self.memory_class = np.asarray(self.memory_class, dtype=np.int64)

    @property
    def needs_patches(self) -> bool:
        """Whether `scores` needs the images' patch vectors (the ``local`` method)."""
        return self.method == "local"

    def scores(self, features: np.ndarray, patches: np.ndarray | None = None) -> np.ndarray:
        """Class scores (n, n_classes) of raw feature rows `features` (n, raw dim); higher is closer.

        `patches` (n, p, raw dim): each image's patch vectors, needed by the ``local`` method.
        Raises ValueError for a wrong feature size or missing patches.
        """
        x = np.atleast_2d(np.asarray(features, dtype=np.float32))
        z = self.head.apply(x) if self.head is not None else unit_rows(x)
        if z.shape[1] != self.prototypes.shape[1]:
            raise ValueError(f"features have {x.shape[1]} values; this classifier was fitted on "
                             f"{self.prototypes.shape[1]}-value vectors (the same image encoder is needed)")
        out = z @ self.prototypes.T
        if self.method == "local":
            if patches is None:
                raise ValueError("the local method scores patch vectors too: pass patches (n, p, dim)")
            local = patch_coverage(check_patches(patches, len(x), x.shape[1]), self.memory, self.memory_class,
                                   len(self.classes))
            out = (1.0 - LOCAL_WEIGHT) * out + LOCAL_WEIGHT * local
        return out

    def predict(self, features: np.ndarray, patches: np.ndarray | None = None) -> list[str]:
        """The best-scoring class name per row (see `scores`)."""
        return [self.classes[i] for i in np.argmax(self.scores(features, patches), axis=1)]

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the classifier atomically to a ``.npz`` path (no pickle); its head beside it as
        ``<name>.head.npz``. Returns the path. Raises ValueError for another suffix."""
        path = Path(path)
        if path.suffix != ".npz":
            raise ValueError(f"a few-shot classifier is written as .npz; got {path.name}")
        meta = {"kind": "fewshot", "format_version": FORMAT_VERSION, "method": self.method,
                "classes": list(self.classes)}
        if self.head is not None:
            self.head.save(path.with_name(path.stem + ".head.npz"))
        return save_arrays(path, {"prototypes": self.prototypes, "memory": unit_rows(self.memory),
                                  "memory_class": self.memory_class.astype(np.float32)}, meta)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FewShotClassifier:
        """Read a classifier written by `save`. Raises ValueError for another kind of file."""
        import json

        path = Path(path)
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["__meta__"])) if "__meta__" in data.files else {}
            if meta.get("kind") != "fewshot":
                raise ValueError(f"{path} is not a kira few-shot classifier; write it with FewShotClassifier.save")
            if int(meta.get("format_version", 0)) > FORMAT_VERSION:
                raise ValueError(f"{path} has format {meta['format_version']}; this kira reads up to {FORMAT_VERSION}")
            arrays = {k: data[k] for k in ("prototypes", "memory", "memory_class")}
        head = None
        if meta["method"] in TRAINED:
            head = load_adapter(path.with_name(path.stem + ".head.npz"))
        return cls(meta["method"], tuple(meta["classes"]), arrays["prototypes"], head, arrays["memory"],
                   arrays["memory_class"].astype(np.int64))


def _class_means(z: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    return unit_rows(np.stack([unit_rows(z[y == c]).mean(axis=0) for c in range(n_classes)]))


def fit_classifier(method: str, features: np.ndarray, labels: Sequence[Any], patches: np.ndarray | None = None, *,
                   config: AdaptationConfig | None = None, seed: int = 0) -> FewShotClassifier:
    """Fit a `FewShotClassifier` with `method` on raw `features` (n, dim) and their `labels`.

    `patches` (n, p, dim): the images' patch vectors, needed by ``local``. Trained methods
    use `config` (AdaptationConfig(): ProtoNet 10 epochs, projection 50) and every row given.
    Raises ValueError for an unknown method, fewer than two classes, mismatched inputs, a
    trained method with a class of one example, or ``local`` without patches; ImportError
    naming the `export` extra when a trained method has no torch.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    x, names, classes, y = labelled_rows(features, labels, needs="few-shot prototypes")
    cfg = config or AdaptationConfig()
    head: ProjectionHead | None = None
    if method == "protonet":
        from kira.adapt.protonet import train_protonet

        head = train_protonet(x, names, config=cfg, shots=int(np.bincount(y).max()), seed=seed)
    elif method == "projection":
        from kira.adapt.projection import train_projection

        if np.bincount(y).min() < 2:
            raise ValueError("the projection head needs at least two examples of every class")
        head = train_projection(x, names, config=cfg, seed=seed).head
    z = head.apply(x) if head is not None else unit_rows(x)
    protos = _class_means(z, y, len(classes))
    if method != "local":
        return FewShotClassifier(method, tuple(classes), protos, head)
    if patches is None:
        raise ValueError("the local method needs the images' patch vectors: pass patches (n, p, dim)")
    p = check_patches(patches, len(x), x.shape[1])
    memory = p.reshape(-1, p.shape[2])
    memory_class = np.repeat(y, p.shape[1])
    rng = np.random.default_rng(seed)
    keep = []
    for c in range(len(classes)):
        rows = np.flatnonzero(memory_class == c)
        keep.append(np.sort(rng.choice(rows, MAX_MEMORY_PER_CLASS, replace=False))
                    if len(rows) > MAX_MEMORY_PER_CLASS else rows)
    kept = np.concatenate(keep)
    return FewShotClassifier("local", tuple(classes), protos, None, memory[kept], memory_class[kept])
