"""How much HNSW recall depends on the build: kira and hnswlib over several build seeds.

An HNSW graph is a random structure (each node's layer is drawn), so one build's recall at
a low ef is one draw. compare_indexes.py builds each library once (seed 0) and compares
the QPS each needs for a recall threshold; this script rebuilds both libraries with
several seeds on the same seeded clustered data (the distribution compare_indexes.py
uses) and prints recall@10 per seed and ef, the mean and spread over the seeds, and
kira's mean minus hnswlib's, so a one-build difference can be told from a real one.
hnswlib is skipped with a note when missing.

    python -m benchmarks.peers.hnsw_build_spread                       # 100k x 256, seeds 0-6, ef 16 and 32
    python -m benchmarks.peers.hnsw_build_spread --n 20000 --d 128 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

import numpy as np

from kira import _core
from kira.eval.synthetic import clustered_vectors

K = 10


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / K for a, b in zip(found, truth)]))


def builders(d: int, m: int, efc: int, threads: int) -> dict[str, Callable[[np.ndarray, int], Callable[[np.ndarray, int], np.ndarray]]]:
    """{library: build(x, seed) -> search(queries, ef) -> ids}."""
    def kira(x: np.ndarray, seed: int):
        index = _core.HNSWIndex(d, M=m, ef_construction=efc, seed=seed)
        index.add(np.arange(len(x)), x, threads=threads)
        return lambda q, ef: index.search(q, K, ef=ef)[0]

    out = {"kira": kira}
    try:
        hnswlib = importlib.import_module("hnswlib")
    except ImportError:
        print("(hnswlib not installed: kira only)")
        return out

    def peer(x: np.ndarray, seed: int):
        index = hnswlib.Index(space="ip", dim=d)
        index.init_index(max_elements=len(x), M=m, ef_construction=efc, random_seed=seed)
        index.set_num_threads(threads)
        index.add_items(x, np.arange(len(x)))

        def search(q: np.ndarray, ef: int) -> np.ndarray:
            index.set_ef(ef)
            return index.knn_query(q, K)[0]
        return search

    out["hnswlib"] = peer
    return out


def run(n: int, d: int, seeds: list[int], efs: list[int], queries: int = 500, m: int = 16, efc: int = 200,
        threads: int = 2) -> dict[str, dict[int, list[float]]]:
    """{library: {ef: [recall@10 per seed]}} on one dataset, exact truth from kira's FlatIndex."""
    x = clustered_vectors(n, d, sample=0, unit=True)
    q = clustered_vectors(queries, d, sample=1, unit=True)
    flat = _core.FlatIndex(d)
    flat.add(np.arange(n), x)
    truth, _ = flat.search(q, K)
    results: dict[str, dict[int, list[float]]] = {}
    for seed in seeds:
        for name, build in builders(d, m, efc, threads).items():
            search = build(x, seed)
            for ef in efs:
                results.setdefault(name, {}).setdefault(ef, []).append(recall(search(q, ef), truth))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(7)))
    parser.add_argument("--ef", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    results = run(args.n, args.d, args.seeds, args.ef, threads=args.threads)
    print(f"### HNSW recall@10 over build seeds {args.seeds}: {args.n:,} x {args.d}, M = 16, "
          f"ef_construction = 200, build threads = {args.threads}\n")
    print("| library | ef | recall@10 per seed | mean | min - max |")
    print("| --- | ---: | --- | ---: | --- |")
    for name, by_ef in results.items():
        for ef, values in by_ef.items():
            print(f"| {name} | {ef} | {' '.join(f'{v:.4f}' for v in values)} | {np.mean(values):.4f} | "
                  f"{min(values):.4f} - {max(values):.4f} |")
    if "hnswlib" in results:
        for ef in args.ef:
            diff = np.mean(results["kira"][ef]) - np.mean(results["hnswlib"][ef])
            print(f"\nef {ef}: kira mean - hnswlib mean = {diff:+.4f}")


if __name__ == "__main__":
    main()
