"""Capped search ("at most 2 chunks per document") against what a user would do instead.

A knowledge base stores many chunks per document, and a user who wants the top 50 chunks
with at most 2 of any document either asks kira's index for it
(`search(..., groups=GroupMap, per_group=2)`) or over-fetches from a plain index (4 x 50
here) and cuts each list in Python. This script runs both, in one process on the same
seeded clustered data, for two layouts of 10 chunks per document:

- distinct: every chunk its own vector (document centre + noise);
- repeated: one vector per document repeated by its 9 children (region and patch chunks
  that carry their document's caption, as in the pipeline's text space).

For each method it prints the single-query latency (one thread each), the share of the
exact capped answer's documents it found (kira FlatIndex, checked against a numpy brute
force; documents, not ids, because the children of one document can tie exactly), the
share of queries whose list came back full (50 results), and the latency relative to
kira's capped HNSW search. Peers (hnswlib, faiss) are skipped with a note when missing.

    python -m benchmarks.peers.compare_capped              # 50k chunks x 256, 200 queries
    python -m benchmarks.peers.compare_capped --n 20000    # quicker
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable

import numpy as np

from kira import _core
from kira.eval.synthetic import clustered_vectors

K = 50
PER_GROUP = 2
OVERFETCH = 4
CHUNKS_PER_DOC = 10


def layout(n: int, d: int, repeated: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, group of each id, vectors) for n chunks in documents of CHUNKS_PER_DOC."""
    docs = n // CHUNKS_PER_DOC
    centres = clustered_vectors(docs, d, sample=0, unit=True)
    group = np.repeat(np.arange(docs, dtype=np.int64), CHUNKS_PER_DOC)
    if repeated:
        x = centres[group]
    else:
        noise = np.random.default_rng(3).standard_normal((len(group), d)).astype(np.float32)
        x = centres[group] + 0.15 * noise * np.linalg.norm(centres, axis=1).mean() / np.sqrt(d)
    return np.arange(len(group), dtype=np.int64), group, np.ascontiguousarray(x, dtype=np.float32)


def cut(ids: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The first K of `ids` (best first, -1 padding ignored) keeping at most PER_GROUP per group."""
    held: dict[int, int] = {}
    out = []
    for i in ids.tolist():
        if i < 0:
            continue
        g = int(group[i])
        if held.get(g, 0) < PER_GROUP:
            held[g] = held.get(g, 0) + 1
            out.append(i)
            if len(out) == K:
                break
    return np.asarray(out, dtype=np.int64)


def numpy_capped(x_unit: np.ndarray, group: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Exact capped top-K by brute force: score every row, rank (score desc, id asc), cut."""
    s = x_unit @ (q / np.linalg.norm(q))
    return cut(np.lexsort((np.arange(len(s)), -s)), group)


def timed(fn: Callable[[np.ndarray], np.ndarray], queries: np.ndarray) -> tuple[float, list[np.ndarray]]:
    fn(queries[0])  # warm-up
    out = []
    t0 = time.perf_counter()
    for q in queries:
        out.append(fn(q))
    return (time.perf_counter() - t0) / len(queries) * 1e3, out


def document_recall(found: list[np.ndarray], truth: list[np.ndarray], group: np.ndarray) -> float:
    """Share of the exact capped answer's documents that a method's list holds. (Not ids: the
    children of one document can tie exactly, and which two of them come back is arbitrary.)"""
    return float(np.mean([len(set(group[f].tolist()) & set(group[t].tolist())) / max(len(set(group[t].tolist())), 1)
                          for f, t in zip(found, truth)]))


def run(n: int, d: int, n_queries: int, repeated: bool, ef: int) -> list[tuple[str, float, float, float]]:
    ids, group, x = layout(n, d, repeated)
    queries = clustered_vectors(n_queries, d, sample=1, unit=True)
    gm = _core.GroupMap(ids, group)
    flat = _core.FlatIndex(d)
    flat.add(ids, x)
    truth = [flat.search(q, K, groups=gm, per_group=PER_GROUP, threads=1)[0][0] for q in queries]
    x_unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    for q, t in zip(queries[:20], truth):  # the exact capped answer agrees with a numpy brute force
        assert set(numpy_capped(x_unit, group, q).tolist()) == set(t[t >= 0].tolist())
    truth = [t[t >= 0] for t in truth]

    rows: list[tuple[str, float, float, float]] = []

    def add(name: str, fn: Callable[[np.ndarray], np.ndarray], queries_used: np.ndarray = queries) -> None:
        ms, out = timed(fn, queries_used)
        full = float(np.mean([len(o) == K for o in out]))
        rows.append((name, ms, document_recall(out, truth[: len(out)], group), full))

    hnsw = _core.HNSWIndex(d, M=16, ef_construction=200, seed=0)
    hnsw.add(ids, x)
    hnsw.ef_search = ef
    add(f"kira HNSW capped (ef {ef})", lambda q: (lambda r: r[r >= 0])(
        hnsw.search(q, K, groups=gm, per_group=PER_GROUP, threads=1)[0][0]))
    add(f"kira HNSW top {OVERFETCH * K} + Python cut", lambda q: cut(hnsw.search(q, OVERFETCH * K, threads=1)[0][0], group))
    add("kira Flat capped (exact)", lambda q: (lambda r: r[r >= 0])(
        flat.search(q, K, groups=gm, per_group=PER_GROUP, threads=1)[0][0]))
    add("numpy brute force + cut (exact)", lambda q: numpy_capped(x_unit, group, q), queries[:50])
    try:
        hnswlib = importlib.import_module("hnswlib")
        h = hnswlib.Index(space="ip", dim=d)
        h.init_index(max_elements=len(x), M=16, ef_construction=200, random_seed=0)
        h.add_items(x_unit, ids)
        h.set_num_threads(1)
        h.set_ef(max(ef, OVERFETCH * K))
        add(f"hnswlib top {OVERFETCH * K} + Python cut", lambda q: cut(
            h.knn_query(q / np.linalg.norm(q), k=OVERFETCH * K)[0][0].astype(np.int64), group))
    except ImportError:
        print("(hnswlib not installed: skipped)")
    try:
        faiss = importlib.import_module("faiss")
        faiss.omp_set_num_threads(1)
        f = faiss.IndexHNSWFlat(d, 16, faiss.METRIC_INNER_PRODUCT)
        f.hnsw.efConstruction = 200
        f.add(x_unit)
        f.hnsw.efSearch = max(ef, OVERFETCH * K)
        add(f"faiss HNSW top {OVERFETCH * K} + Python cut", lambda q: cut(
            f.search((q / np.linalg.norm(q))[None, :].astype(np.float32), OVERFETCH * K)[1][0], group))
    except ImportError:
        print("(faiss not installed: skipped)")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ef", type=int, default=64)
    args = ap.parse_args()
    print(f"capped search: {args.n:,} chunks x {args.dim}, {CHUNKS_PER_DOC} per document, top {K} with <= "
          f"{PER_GROUP} per document, {args.queries} queries, one thread each, simd {_core.simd_level()}\n")
    for repeated in (False, True):
        rows = run(args.n, args.dim, args.queries, repeated, args.ef)
        base = rows[0][1]
        print(f"### {'repeated' if repeated else 'distinct'} chunk vectors\n")
        print("| method | ms / query | documents of the exact capped top 50 found | lists full (50) | time / kira HNSW capped |")
        print("|---|---:|---:|---:|---:|")
        for name, ms, rec, full in rows:
            print(f"| {name} | {ms:.3f} | {rec:.3f} | {full:.2f} | {ms / base:.2f} |")
        print()


if __name__ == "__main__":
    main()
