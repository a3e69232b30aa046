"""Labelled feature rows, checked once for every adapter (projection head, few-shot prototypes, validation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def labelled_rows(features: Any, labels: Sequence[object] | np.ndarray, *, needs: str) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                                np.ndarray]:
    """(x, names, classes, y): `features` as contiguous float32 (n, dim), the labels as str, the sorted
    distinct classes and each row's class index. Raises ValueError when the shapes disagree, and, naming
    what `needs` them ("a triplet loss"), when fewer than two classes are labelled."""
    x = np.ascontiguousarray(features, dtype=np.float32)
    names = np.asarray([str(v) for v in labels])
    if x.ndim != 2 or len(names) != len(x):
        raise ValueError(f"features must be (n, dim) with one label per row; got {x.shape}, {len(names)} labels")
    classes, y = np.unique(names, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(f"{needs} needs labelled examples of at least two classes; got {len(classes)}")
    return x, names, classes, y
