"""Local differences: classes that differ in a small area of real photographs are told apart by the
patch-coverage score, where the document-level vector averages the difference away."""

from __future__ import annotations

import numpy as np
import pytest

from kira.adapt.fewshot import fit_classifier
from kira.adapt.local import patch_coverage, unit_rows
from kira.adapt.validation import validate

SIZE, GRID, MARK = 32, 4, 6  # 32x32 crops, a 4x4 patch grid, a 6x6 mark (3.5% of the crop)


def _encode(images: np.ndarray) -> np.ndarray:
    """A fixed encoder for this test: the image at 8x8 (block means) as a 64-d vector."""
    n, h, w = images.shape
    return images.reshape(n, 8, h // 8, 8, w // 8).mean(axis=(2, 4)).reshape(n, 64)


def _patches(images: np.ndarray) -> np.ndarray:
    """The same encoder on each cell of a GRID x GRID grid (each crop scaled to the full size first)."""
    n = len(images)
    s = SIZE // GRID
    cells = images.reshape(n, GRID, s, GRID, s).transpose(0, 1, 3, 2, 4).reshape(n * GRID * GRID, s, s)
    up = np.kron(cells, np.ones((SIZE // s, SIZE // s), np.float32))
    return _encode(up).reshape(n, GRID * GRID, 64)


@pytest.fixture(scope="module")
def marked_crops():
    """Crops of one real photograph (skimage's camera, the grass) with a few pixels of jitter; half carry
    one kind of small defect: the same MARK x MARK piece of another real photograph (an edge of a coin in
    skimage's coins) inside a random cell of the patch grid."""
    from skimage import data

    camera = data.camera().astype(np.float32) / 255.0
    mark = data.coins().astype(np.float32)[170 : 170 + MARK, 100 : 100 + MARK] / 255.0
    cell = SIZE // GRID
    rng = np.random.default_rng(0)
    images, labels = [], []
    for n in range(160):
        y0, x0 = 330 + rng.integers(0, 8), 200 + rng.integers(0, 8)
        crop = camera[y0 : y0 + SIZE, x0 : x0 + SIZE].copy()
        if n % 2:
            gy, gx = rng.integers(0, GRID, 2)
            crop[gy * cell + 1 : gy * cell + 1 + MARK, gx * cell + 1 : gx * cell + 1 + MARK] = mark
        images.append(crop)
        labels.append("marked" if n % 2 else "clean")
    images = np.stack(images)
    return _encode(images), _patches(images), np.asarray(labels)


def test_patch_coverage_scores_the_least_covered_patches():
    memory = unit_rows(np.eye(4, dtype=np.float32))
    classes = np.array([0, 0, 1, 1])
    image = unit_rows(np.array([[[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]]], np.float32))
    s = patch_coverage(image, memory, classes, 3)
    # class 0 covers three patches exactly and the fourth not at all: its worst quarter (one patch) scores 0
    np.testing.assert_allclose(s[0], [0.0, 0.0, -1.0], atol=1e-6)
    with pytest.raises(ValueError, match="one class per memory row"):
        patch_coverage(image, memory, classes[:2], 3)


def test_a_small_mark_is_told_apart_by_patches_not_by_the_document_vector(marked_crops):
    x, p, y = marked_crops
    support = np.r_[0:10]  # five clean and five marked crops
    query = np.r_[10:160]
    frozen = fit_classifier("frozen", x[support], y[support])
    local = fit_classifier("local", x[support], y[support], p[support])
    acc_frozen = np.mean(np.asarray(frozen.predict(x[query])) == y[query])
    acc_local = np.mean(np.asarray(local.predict(x[query], p[query])) == y[query])
    assert acc_local >= acc_frozen + 0.15, (acc_frozen, acc_local)


def test_validation_chooses_the_local_method_where_it_helps(marked_crops):
    x, p, y = marked_crops
    support = np.r_[0:20]
    report = validate(x[support], y[support], p[support], methods=("frozen", "local"))
    assert report.chosen == "local" and report.measured["local"] > report.measured["frozen"]
