"""extract_regions against scipy.ndimage.label plus explicit box and score checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import ndimage

from kira import extract_regions

STRUCTURE = {8: np.ones((3, 3), dtype=bool), 4: ndimage.generate_binary_structure(2, 1)}


def reference(attention, image_size, k_sigma, connectivity, min_cells):
    """The same definition written with numpy + scipy; returns regions as dicts, unordered."""
    a = attention.astype(np.float64)
    threshold = a.mean() + k_sigma * a.std()
    mask = a > threshold
    labels, n = ndimage.label(mask, structure=STRUCTURE[connectivity])
    h, w = attention.shape
    width, height = image_size
    regions = []
    for j, sl in enumerate(ndimage.find_objects(labels), start=1):
        cells = labels == j
        if cells.sum() < min_cells:
            continue
        rows, cols = sl
        regions.append(
            {
                "cells": cells,
                "box": (
                    cols.start * width // w,
                    rows.start * height // h,
                    -(-cols.stop * width // w),
                    -(-rows.stop * height // h),
                ),
                "score": np.float32(a[cells].mean()),
            }
        )
    return threshold, regions


grids = arrays(
    np.float32,
    st.one_of(
        st.tuples(st.integers(1, 24), st.integers(1, 24)),
        st.tuples(st.integers(1, 4), st.integers(60, 200)),  # rows spanning several 64-bit words
    ),
    elements=st.one_of(
        st.sampled_from([0.0, 0.25, 1.0]),  # plateaus make large, touching components
        st.floats(min_value=-10, max_value=10, width=32),
    ),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    attention=grids,
    connectivity=st.sampled_from([4, 8]),
    k_sigma=st.sampled_from([0.5, 0.0, -0.3, 1.5]),
    min_cells=st.integers(1, 4),
    image_size=st.tuples(st.integers(1, 700), st.integers(1, 700)),
)
def test_matches_scipy_label(attention, connectivity, k_sigma, min_cells, image_size):
    threshold, want = reference(attention, image_size, k_sigma, connectivity, min_cells)
    # Cells within rounding of the threshold may fall either way between two summation orders.
    a = attention.astype(np.float64)
    assume(not np.any(np.abs(a - threshold) <= 1e-9 * max(1.0, abs(threshold))))

    boxes, scores, labels = extract_regions(
        attention, image_size, k_sigma=k_sigma, connectivity=connectivity, min_cells=min_cells
    )
    assert boxes.dtype == np.int32 and scores.dtype == np.float32 and labels.dtype == np.int32
    assert boxes.shape == (len(want), 4) and scores.shape == (len(want),)
    assert labels.shape == attention.shape
    assert set(np.unique(labels)) <= set(range(len(want) + 1))

    # Same partition up to relabelling: match each of our regions to a reference one by its cells.
    by_cells = {r["cells"].tobytes(): r for r in want}
    for i in range(len(want)):
        cells = labels == i + 1
        r = by_cells.pop(cells.tobytes())
        assert tuple(boxes[i]) == r["box"]
        assert scores[i] == pytest.approx(r["score"], rel=1e-6, abs=1e-6)
    assert not by_cells
    kept = np.zeros(attention.shape, dtype=bool)
    for r in want:
        kept |= r["cells"]
    assert np.array_equal(labels > 0, kept)
    # Sorted by score descending.
    assert np.all(np.diff(scores) <= 0)


def test_two_blobs_scaled_to_pixels():
    a = np.zeros((8, 8), dtype=np.float32)
    a[1:3, 1:3] = 1.0  # 4 cells at 1.0
    a[5, 6] = 2.0  # 1 cell at 2.0
    boxes, scores, labels = extract_regions(a, (64, 32))  # width 64 -> 8 px per column, 4 px per row
    assert scores.tolist() == [2.0, 1.0]
    assert boxes.tolist() == [[48, 20, 56, 24], [8, 4, 24, 12]]
    assert labels[5, 6] == 1 and labels[1, 1] == 2 and (labels == 0).sum() == 64 - 5


def test_connectivity_decides_whether_diagonals_join():
    a = np.zeros((4, 4), dtype=np.float32)
    a[0, 0] = a[1, 1] = a[2, 2] = 1.0
    assert len(extract_regions(a, (4, 4), connectivity=8)[1]) == 1
    assert len(extract_regions(a, (4, 4), connectivity=4)[1]) == 3


def test_min_cells_drops_small_components_to_background():
    a = np.zeros((6, 6), dtype=np.float32)
    a[0:2, 0:2] = 1.0
    a[4, 4] = 1.0
    boxes, _, labels = extract_regions(a, (6, 6), min_cells=2)
    assert boxes.tolist() == [[0, 0, 2, 2]]
    assert labels[4, 4] == 0


def test_constant_grid_has_no_region_and_boxes_never_collapse():
    boxes, scores, labels = extract_regions(np.ones((5, 7), dtype=np.float32), (100, 100))
    assert boxes.shape == (0, 4) and scores.shape == (0,) and not labels.any()
    # A grid finer than the image still yields boxes at least one pixel wide.
    a = np.zeros((64, 64), dtype=np.float32)
    a[10, 20] = 1.0
    boxes, _, _ = extract_regions(a, (3, 2))
    x0, y0, x1, y1 = boxes[0]
    assert x1 > x0 and y1 > y0 and x1 <= 3 and y1 <= 2


def test_ties_keep_row_major_order():
    a = np.zeros((3, 5), dtype=np.float32)
    a[0, 4] = 1.0
    a[2, 0] = 1.0
    boxes, _, _ = extract_regions(a, (5, 3))
    assert boxes.tolist() == [[4, 0, 5, 1], [0, 2, 1, 3]]


def test_dino_sized_grid_against_scipy():
    rng = np.random.default_rng(0)
    a = ndimage.gaussian_filter(rng.random((28, 28)), 2).astype(np.float32)
    _, want = reference(a, (224, 224), 0.5, 8, 1)
    boxes, scores, _ = extract_regions(a, (224, 224))
    assert sorted(map(tuple, boxes.tolist())) == sorted(r["box"] for r in want)
    assert len(want) >= 2


@pytest.mark.parametrize(
    ("attention", "kwargs", "message"),
    [
        (np.zeros((4, 4)), {}, "float32"),
        (np.zeros(16, dtype=np.float32), {}, "2-d"),
        (np.zeros((0, 4), dtype=np.float32), {}, "empty"),
        (np.zeros((4, 8), dtype=np.float32)[:, ::2], {}, "contiguous"),
        (np.array([[0, math.nan]], dtype=np.float32), {}, "NaN or inf"),
        (np.array([[0, math.inf]], dtype=np.float32), {}, "NaN or inf"),
        (np.zeros((4, 4), dtype=np.float32), {"connectivity": 6}, "4 or 8"),
        (np.zeros((4, 4), dtype=np.float32), {"min_cells": 0}, "min_cells"),
        (np.zeros((4, 4), dtype=np.float32), {"k_sigma": math.inf}, "k_sigma"),
        (np.zeros((4, 4), dtype=np.float32), {"image_size": (0, 10)}, "image_size"),
        (np.zeros((4, 4), dtype=np.float32), {"image_size": (10,)}, "width, height"),
        ([[0.0, 1.0]], {}, "numpy array"),
    ],
)
def test_bad_input_raises_value_error_with_the_fix(attention, kwargs, message):
    kwargs.setdefault("image_size", (32, 32))
    image_size = kwargs.pop("image_size")
    with pytest.raises(ValueError, match=message):
        extract_regions(attention, image_size, **kwargs)
