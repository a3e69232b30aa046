"""kira's retrieval core side by side with what a user would write instead.

Runs in one process on the same seeded data and prints markdown tables with ratios
(peer time / kira time: > 1 means kira is faster):

- extract_regions against scipy.ndimage.label alone (on a precomputed mask), and against
  the whole job done with scipy: threshold (mean + 0.5 * std), label, find_objects, the
  per-component mean (ndimage.mean), sort by score and scale the boxes to pixels;
- rrf_fuse against a vectorised numpy implementation (np.unique + np.bincount + lexsort);
- residual_hops against the same chain written in Python: a loop of FlatIndex.search,
  get_vectors and the numpy update, per call.

Every kira result is checked against its peer before it is timed. Usage:
    python -m benchmarks.peers.compare_retrieval            # about a minute
    python -m benchmarks.peers.compare_retrieval --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from collections.abc import Callable

import numpy as np
from scipy import ndimage

from kira import FlatIndex, extract_regions, residual_hops, rrf_fuse, simd_level

EIGHT = np.ones((3, 3), dtype=bool)


def timed(fn: Callable[[], object], *, budget: float = 0.2, repeat: int = 5) -> float:
    """Best per-call seconds over `repeat` batches, each sized to take about budget/repeat."""
    fn()
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < 0.02:
        fn()
        calls += 1
    per = (time.perf_counter() - start) / calls
    number = max(1, int(budget / repeat / per))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), model)
    except (OSError, subprocess.CalledProcessError):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{model}, {os.cpu_count()} cores, load average {load:.1f} at start, kira kernels: {simd_level()}"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


# ---- regions ----------------------------------------------------------------------------


def scipy_regions(a: np.ndarray, image_size: tuple[int, int], k_sigma: float = 0.5):
    """extract_regions written with numpy + scipy.ndimage (the job end to end)."""
    mask = a > a.mean(dtype=np.float64) + k_sigma * a.std(dtype=np.float64)
    labels, n = ndimage.label(mask, structure=EIGHT)
    if n == 0:
        return np.zeros((0, 4), np.int32), np.zeros(0, np.float32), labels
    slices = ndimage.find_objects(labels)
    scores = np.asarray(ndimage.mean(a, labels, np.arange(1, n + 1)), dtype=np.float32)
    order = np.argsort(-scores, kind="stable")
    h, w = a.shape
    width, height = image_size
    boxes = np.array(
        [
            (s[1].start * width // w, s[0].start * height // h, -(-s[1].stop * width // w), -(-s[0].stop * height // h))
            for s in (slices[i] for i in order)
        ],
        dtype=np.int32,
    )
    relabel = np.zeros(n + 1, dtype=np.int32)
    relabel[order + 1] = np.arange(1, n + 1, dtype=np.int32)
    return boxes, scores[order], relabel[labels]


def compare_regions(sides: list[int], budget: float) -> None:
    print("\n### extract_regions vs scipy.ndimage (8-connectivity, k_sigma = 0.5, 224 x 224 image)\n")
    print("| grid | components | scipy label alone, us | scipy end to end, us | kira, us "
          "| label alone / kira | end to end / kira |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for side in sides:
        a = ndimage.gaussian_filter(rng.random((side, side)), 2).astype(np.float32)
        mask = a > a.mean(dtype=np.float64) + 0.5 * a.std(dtype=np.float64)
        boxes, scores, labels = extract_regions(a, (224, 224))
        want = scipy_regions(a, (224, 224))
        assert np.array_equal(boxes, want[0]) and np.allclose(scores, want[1], rtol=1e-5)
        assert np.array_equal(labels, want[2])
        t_label = timed(lambda: ndimage.label(mask, structure=EIGHT), budget=budget)
        t_scipy = timed(lambda: scipy_regions(a, (224, 224)), budget=budget)
        t_kira = timed(lambda: extract_regions(a, (224, 224)), budget=budget)
        print(f"| {side} x {side} | {len(scores)} | {us(t_label)} | {us(t_scipy)} | {us(t_kira)} "
              f"| {t_label / t_kira:.2f} | {t_scipy / t_kira:.2f} |")


# ---- rrf --------------------------------------------------------------------------------


def numpy_rrf(rankings: list[np.ndarray], weights: list[float], k: float = 60.0):
    """Weighted RRF in vectorised numpy: first occurrence per ranking, ties to the smaller id."""
    ids, contrib = [], []
    for r, w in zip(rankings, weights):
        uniq, first = np.unique(r, return_index=True)  # best (first) rank of each id
        ids.append(uniq)
        contrib.append(w / (k + first + 1.0))
    all_ids = np.concatenate(ids)
    uniq, inverse = np.unique(all_ids, return_inverse=True)
    scores = np.bincount(inverse, weights=np.concatenate(contrib), minlength=len(uniq))
    order = np.lexsort((uniq, -scores))
    return uniq[order], scores[order]


def compare_rrf(cases: list[tuple[int, int]], budget: float) -> None:
    print("\n### rrf_fuse vs numpy (np.unique + np.bincount + lexsort)\n")
    print("| rankings x length | numpy, us | kira, us | numpy / kira |")
    print("|---|---|---|---|")
    rng = np.random.default_rng(1)
    for m, length in cases:
        rankings = [rng.permutation(length * 4)[:length].astype(np.int64) for _ in range(m)]
        weights = list(rng.uniform(0.2, 1.0, m))
        ids, scores = rrf_fuse(rankings, weights, 60)
        want_ids, want_scores = numpy_rrf(rankings, weights)
        assert np.allclose(scores, want_scores, rtol=1e-12)
        assert set(ids.tolist()) == set(want_ids.tolist())
        t_np = timed(lambda: numpy_rrf(rankings, weights), budget=budget)
        t_kira = timed(lambda: rrf_fuse(rankings, weights, 60), budget=budget)
        print(f"| {m} x {length} | {us(t_np)} | {us(t_kira)} | {t_np / t_kira:.2f} |")


# ---- hops -------------------------------------------------------------------------------


def python_hops(index: FlatIndex, q: np.ndarray, k: int, beta=0.3, max_hops=3, confidence=0.85):
    """residual_hops written as a Python loop over FlatIndex.search / get_vectors."""
    q = q / np.linalg.norm(q)
    best: dict[int, float] = {}
    for h in range(max_hops):
        ids, scores = index.search(q.astype(np.float32), k)
        valid = ids[0] != -1
        ids, scores = ids[0][valid], scores[0][valid]
        new = any(int(i) not in best for i in ids)
        for i, s in zip(ids.tolist(), scores.tolist()):
            if s > best.get(i, -np.inf):
                best[i] = s
        if len(ids) and scores.mean() >= confidence or not new or h + 1 == max_hops:
            break
        r = q - beta * index.get_vectors(ids).mean(axis=0)
        q = r / np.linalg.norm(r)
    merged = sorted(best, key=lambda i: (-best[i], i))
    return np.array(merged, dtype=np.int64), np.array([best[i] for i in merged], dtype=np.float32)


def compare_hops(sizes: list[tuple[int, int]], budget: float) -> None:
    print("\n### residual_hops vs a Python loop of FlatIndex searches (k = 10, 3 hops)\n")
    print("| index | Python loop, us | kira, us | loop / kira |")
    print("|---|---|---|---|")
    for n, dim in sizes:
        rng = np.random.default_rng(2)
        x = rng.standard_normal((n, dim)).astype(np.float32)
        index = FlatIndex(dim)
        index.add(np.arange(n, dtype=np.int64), x)
        q = x[7] + 0.5 * x[8]
        trace = residual_hops(index, q, 10, confidence=2.0)
        want_ids, _ = python_hops(index, q, 10, confidence=2.0)
        assert trace.ids.tolist() == want_ids.tolist() and len(trace.hops) == 3
        t_py = timed(lambda: python_hops(index, q, 10, confidence=2.0), budget=budget)
        t_kira = timed(lambda: residual_hops(index, q, 10, confidence=2.0), budget=budget)
        print(f"| FlatIndex {n:,} x {dim} f32 | {us(t_py)} | {us(t_kira)} | {t_py / t_kira:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes and short timings")
    args = p.parse_args()
    budget = 0.05 if args.quick else 0.5
    print(f"Machine: {machine()}")
    compare_regions([28, 64] if args.quick else [28, 64, 128, 256, 512], budget)
    compare_rrf([(2, 50)] if args.quick else [(2, 50), (2, 1_000), (10, 10_000)], budget)
    compare_hops([(1_000, 64)] if args.quick else [(1_000, 64), (100_000, 256)], budget)


if __name__ == "__main__":
    main()
