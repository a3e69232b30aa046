"""kira.adapt.labelled: the one check of labelled feature rows every adapter runs."""

from __future__ import annotations

import numpy as np
import pytest

from kira.adapt.labelled import labelled_rows


def test_rows_become_float32_with_class_indices():
    x, names, classes, y = labelled_rows(np.arange(6, dtype=np.float64).reshape(3, 2), ["b", "a", 1], needs="x")
    assert x.dtype == np.float32 and x.flags.c_contiguous and x.shape == (3, 2)
    assert list(names) == ["b", "a", "1"] and list(classes) == ["1", "a", "b"] and list(y) == [2, 1, 0]


@pytest.mark.parametrize("features, labels, message", [
    (np.zeros((3, 2)), ["a", "b"], r"one label per row; got \(3, 2\), 2 labels"),
    (np.zeros(4), ["a", "b", "a", "b"], "must be \\(n, dim\\)"),
    (np.zeros((2, 2)), ["a", "a"], "the probe needs labelled examples of at least two classes; got 1"),
])
def test_bad_rows_are_refused_naming_the_fix(features, labels, message):
    with pytest.raises(ValueError, match=message):
        labelled_rows(features, labels, needs="the probe")
