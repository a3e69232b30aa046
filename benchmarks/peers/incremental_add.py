"""One-row adds to a full index: what a knowledge base pays for each new image.

A service ingesting images one at a time adds a handful of rows to indexes that already
hold 100k. Each contender is built with `--n` clustered vectors in one batch, then gets
`--adds` one-row adds; the table prints the median and p99 of one add, the per-row cost
of the batch build, and kira / peer ratios (< 1: kira is faster). Peers: faiss
IndexFlatIP and IndexHNSWFlat, hnswlib (initialised with room for the adds, as its API
requires) and usearch, at M = 16, ef_construction = 200. A missing peer is skipped.

    python -m benchmarks.peers.incremental_add                 # 100k x 256, 200 adds
    python -m benchmarks.peers.incremental_add --n 20000 --dim 128 --adds 100
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from benchmarks.peers.compare_indexes import optional

from kira import _core
from kira.eval.synthetic import clustered_vectors

M, EF_CONSTRUCTION = 16, 200


def contenders(n: int, dim: int, adds: int) -> dict[str, tuple[Callable[[np.ndarray, np.ndarray], object], ...]]:
    """{name: (build(ids, x), add_one(id, row))}: each build returns the index its add uses."""
    out: dict[str, tuple] = {}

    def kira_factory(cls, **kw):
        state: dict[str, object] = {}

        def build(ids, x):
            state["ix"] = cls(dim, **kw)
            state["ix"].add(ids, x)

        def add(i, row):
            state["ix"].add(np.array([i], np.int64), row[None])

        return build, add

    out["kira FlatIndex"] = kira_factory(_core.FlatIndex)
    out["kira HNSWIndex"] = kira_factory(_core.HNSWIndex, M=M, ef_construction=EF_CONSTRUCTION)
    faiss = optional("faiss")
    if faiss is not None:
        flat: dict[str, object] = {}

        def flat_build(ids, x):
            flat["ix"] = faiss.IndexIDMap(faiss.IndexFlatIP(dim))
            flat["ix"].add_with_ids(x, ids)

        out["faiss IndexFlatIP"] = (flat_build, lambda i, row: flat["ix"].add_with_ids(row[None], np.array([i])))
        graph: dict[str, object] = {}

        def graph_build(ids, x):  # IndexHNSWFlat numbers rows itself (no add_with_ids)
            graph["ix"] = faiss.IndexHNSWFlat(dim, M, faiss.METRIC_INNER_PRODUCT)
            graph["ix"].hnsw.efConstruction = EF_CONSTRUCTION
            graph["ix"].add(x)

        out["faiss IndexHNSWFlat"] = (graph_build, lambda i, row: graph["ix"].add(row[None]))
    hnswlib = optional("hnswlib")
    if hnswlib is not None:
        hstate: dict[str, object] = {}

        def hbuild(ids, x):
            ix = hnswlib.Index(space="ip", dim=dim)
            ix.init_index(max_elements=n + adds, M=M, ef_construction=EF_CONSTRUCTION)
            ix.add_items(x, ids)
            hstate["ix"] = ix

        out["hnswlib"] = (hbuild, lambda i, row: hstate["ix"].add_items(row[None], np.array([i])))
    usearch = optional("usearch.index")
    if usearch is not None:
        ustate: dict[str, object] = {}

        def ubuild(ids, x):
            ix = usearch.Index(ndim=dim, metric="cos", connectivity=M, expansion_add=EF_CONSTRUCTION)
            ix.add(ids, x)
            ustate["ix"] = ix

        out["usearch"] = (ubuild, lambda i, row: ustate["ix"].add(i, row))
    return out


def run(n: int, dim: int, adds: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """{contender: {"build_per_row_ms", "add_median_ms", "add_p99_ms"}} (ms)."""
    x = clustered_vectors(n, dim, sample=0, seed=seed, unit=True)
    extra = clustered_vectors(adds, dim, sample=1, seed=seed, unit=True)
    ids = np.arange(n, dtype=np.int64)
    results: dict[str, dict[str, float]] = {}
    for name, (build, add) in contenders(n, dim, adds).items():
        t = time.perf_counter()
        build(ids, x)
        build_s = time.perf_counter() - t
        times = []
        for j in range(adds):
            t = time.perf_counter()
            add(n + j, extra[j])
            times.append((time.perf_counter() - t) * 1000.0)
        results[name] = {"build_per_row_ms": build_s * 1000.0 / n, "add_median_ms": float(np.median(times)),
                         "add_p99_ms": float(np.percentile(times, 99))}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--adds", type=int, default=200)
    args = parser.parse_args()
    results = run(args.n, args.dim, args.adds)
    print(f"one-row adds after a {args.n:,} x {args.dim} batch build, {args.adds} adds (ms)")
    print("| index | batch build per row | one-row add median | p99 |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['build_per_row_ms']:.4f} | {r['add_median_ms']:.3f} | {r['add_p99_ms']:.3f} |")
    pairs = [("kira FlatIndex", "faiss IndexFlatIP"), ("kira HNSWIndex", "faiss IndexHNSWFlat"),
             ("kira HNSWIndex", "hnswlib"), ("kira HNSWIndex", "usearch")]
    for ours, peer in pairs:
        if ours in results and peer in results and results[peer]["add_median_ms"] > 0:
            print(f"{ours} / {peer}: one-row add median "
                  f"{results[ours]['add_median_ms'] / results[peer]['add_median_ms']:.2f}x")


if __name__ == "__main__":
    main()
