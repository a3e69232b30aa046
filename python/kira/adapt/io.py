"""Domain adapters as files, without pickle: the projection head and the ProtoNet adapter.

Both are a linear map W (in_dim, out_dim) plus bias followed by L2 normalisation;
applying one is numpy only (queries never import torch). A `.safetensors` path is
written with safetensors (metadata in its header); any other path as a `.npz` whose
metadata is a JSON string array, read back with `allow_pickle=False`. Writes are atomic.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT_VERSION = 1


def _normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)


@dataclass
class ProjectionHead:
    """Linear projection + L2 normalisation over frozen image features (the domain adapter).

    `weight` float32 (in_dim, out_dim); `bias` float32 (out_dim,); `info` free-form
    training facts (margin, epochs, classes ...) kept in the file's metadata.
    """

    weight: np.ndarray
    bias: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    kind: str = "projection"

    def __post_init__(self) -> None:
        self.weight = np.ascontiguousarray(self.weight, dtype=np.float32)
        self.bias = np.ascontiguousarray(self.bias, dtype=np.float32).reshape(-1)
        if self.weight.ndim != 2 or self.bias.shape != (self.weight.shape[1],):
            raise ValueError(f"weight must be (in_dim, out_dim) and bias (out_dim,); got {self.weight.shape}, "
                             f"{self.bias.shape}")

    @property
    def in_dim(self) -> int:
        return int(self.weight.shape[0])

    @property
    def dim(self) -> int:
        """Output dimension (what the adapted visual index holds)."""
        return int(self.weight.shape[1])

    out_dim = dim

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """Project raw features: (n, in_dim) or (in_dim,) -> unit float32 rows (n, out_dim) / (out_dim,).

        Raises ValueError when the feature size is not in_dim.
        """
        x = np.asarray(vectors, dtype=np.float32)
        single = x.ndim == 1
        x2 = x.reshape(1, -1) if single else x
        if x2.ndim != 2 or x2.shape[1] != self.in_dim:
            raise ValueError(f"adapter expects vectors with {self.in_dim} features; got shape {x.shape}")
        out = _normalise(x2 @ self.weight + self.bias)
        return out[0] if single else out

    __call__ = apply

    def _tensors(self) -> dict[str, np.ndarray]:
        return {"weight": self.weight, "bias": self.bias}

    def _meta(self) -> dict[str, Any]:
        return {"kind": self.kind, "format_version": FORMAT_VERSION, "info": self.info}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the adapter atomically to `path` (.safetensors, else .npz). Returns the path."""
        return save_arrays(path, self._tensors(), self._meta())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ProjectionHead:
        """Read an adapter written by `save` (either kind; a ProtoNet file loads as ProtoNetHead)."""
        adapter = load_adapter(path)
        if not isinstance(adapter, cls):
            raise ValueError(f"{path} holds a {adapter.kind!r} adapter, not a {cls.__name__}")
        return adapter


@dataclass
class ProtoNetHead(ProjectionHead):
    """A ProtoNet few-shot adapter: the embedding head plus one prototype per class."""

    prototypes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    classes: tuple[str, ...] = ()
    kind: str = "protonet"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.prototypes = np.ascontiguousarray(self.prototypes, dtype=np.float32)
        self.classes = tuple(str(c) for c in self.classes)
        if self.prototypes.size and self.prototypes.shape != (len(self.classes), self.dim):
            raise ValueError(f"prototypes must be (n_classes, {self.dim}); got {self.prototypes.shape}")

    def predict(self, vectors: np.ndarray) -> list[str]:
        """The nearest prototype's class for each raw feature row."""
        z = self.apply(np.atleast_2d(vectors))
        protos = _normalise(self.prototypes)
        return [self.classes[i] for i in np.argmax(z @ protos.T, axis=1)]

    def _tensors(self) -> dict[str, np.ndarray]:
        return {"weight": self.weight, "bias": self.bias, "prototypes": self.prototypes}

    def _meta(self) -> dict[str, Any]:
        meta = super()._meta()
        meta["classes"] = list(self.classes)
        return meta


def save_arrays(path: str | os.PathLike[str], tensors: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Atomically write float32 tensors + JSON metadata as safetensors (by suffix) or npz."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        if path.suffix == ".safetensors":
            from safetensors.numpy import save_file

            save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, tmp,
                      metadata={"kira_adapter": json.dumps(meta)})
        else:
            with open(tmp, "wb") as fh:
                # numpy's stub reads **tensors as maybe allow_pickle=...; every key here names an array
                np.savez(fh, **tensors, __meta__=np.array(json.dumps(meta)))  # type: ignore[arg-type]
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_adapter(path: str | os.PathLike[str]) -> ProjectionHead:
    """Read any adapter file written by kira.adapt (projection head or ProtoNet), without pickle.

    Raises ValueError for a file that is not a kira adapter or of a newer format.
    """
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as fh:
            raw = (fh.metadata() or {}).get("kira_adapter")
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    else:
        with np.load(path, allow_pickle=False) as data:
            tensors = {k: data[k] for k in data.files if k != "__meta__"}
            raw = str(data["__meta__"]) if "__meta__" in data.files else None
    if raw is None:
        raise ValueError(f"{path} is not a kira adapter (no metadata); write it with ProjectionHead.save")
    meta = json.loads(raw)
    if int(meta.get("format_version", 0)) > FORMAT_VERSION:
        raise ValueError(f"{path} has adapter format {meta['format_version']}; this kira reads up to {FORMAT_VERSION}")
    if meta.get("kind") == "protonet":
        return ProtoNetHead(tensors["weight"], tensors["bias"], meta.get("info", {}),
                            prototypes=tensors["prototypes"], classes=tuple(meta.get("classes", ())))
    if meta.get("kind") == "projection":
        return ProjectionHead(tensors["weight"], tensors["bias"], meta.get("info", {}))
    raise ValueError(f"{path}: unknown adapter kind {meta.get('kind')!r}")
