"""Per-document fusion in the core (rrf_fuse(documents=...)) side by side with the numpy version
it replaced (benchmarks/peers/fusion_reference.py: two chunk-level rrf_fuse calls plus numpy) and with
chunk-level rrf_fuse alone, in one process on the same seeded rankings.

Rankings: n rankings of m chunk ids drawn from 3m chunks in documents of 18 chunks (a real ask:
6 rankings of ~200). document_of is a vectorised table lookup, like KnowledgeBase.document_chunk_of.
Each core result is checked against the numpy version before it is timed. Usage:
    python -m benchmarks.peers.compare_fusion_documents [--quick]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from benchmarks.peers.compare_retrieval import machine, timed
from benchmarks.peers.fusion_reference import numpy_per_document
from kira import rrf_fuse

WEIGHTS = [0.6, 0.4, 0.24, 0.3, 0.12, 0.2, 0.5, 0.1]


def case(n: int, m: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    chunks = 3 * m
    table = np.arange(chunks, dtype=np.int64) // 18 * 18  # each document led by its first chunk

    def document_of(ids: np.ndarray) -> np.ndarray:
        return np.where(ids >= 0, table[np.clip(ids, 0, chunks - 1)], -1)

    rankings = [rng.choice(chunks, m, replace=False).astype(np.int64) for _ in range(n)]
    return rankings, (WEIGHTS * 2)[:n], document_of


def core_per_document(rankings, weights, document_of, limit):
    """What kira.retrieval.fusion.fuse does: one document_of call, one core call."""
    docs = document_of(np.concatenate(rankings))
    documents = np.split(docs, np.cumsum([len(r) for r in rankings])[:-1])
    return rrf_fuse(rankings, weights, 60.0, limit=limit, documents=documents)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short timings")
    args = p.parse_args()
    budget = 0.05 if args.quick else 0.5
    limit = 150
    print(f"Machine: {machine()}")
    print(f"\n### per-document fusion (limit {limit}): numpy version vs core\n")
    print("| rankings | numpy per-document, us | core per-document (+ document_of), us "
          "| core per-document (call only), us | core chunk-level, us | numpy / core |")
    print("|---|---|---|---|---|---|")
    for n, m in [(6, 200), (6, 5_000)]:
        rankings, weights, document_of = case(n, m)
        documents = [document_of(r) for r in rankings]
        got = core_per_document(rankings, weights, document_of, limit)
        want = numpy_per_document(rankings, weights, 60.0, document_of, limit)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
        t_np = timed(lambda: numpy_per_document(rankings, weights, 60.0, document_of, limit), budget=budget)
        t_core = timed(lambda: core_per_document(rankings, weights, document_of, limit), budget=budget)
        t_call = timed(lambda: rrf_fuse(rankings, weights, 60.0, limit=limit, documents=documents), budget=budget)
        t_chunk = timed(lambda: rrf_fuse(rankings, weights, 60.0, limit=limit), budget=budget)
        print(f"| {n} x {m:,} | {t_np * 1e6:.1f} | {t_core * 1e6:.1f} | {t_call * 1e6:.1f} | "
              f"{t_chunk * 1e6:.1f} | {t_np / t_core:.1f} |")
    print(f"\nload average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
