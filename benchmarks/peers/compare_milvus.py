"""kira's core indexes against Milvus Lite on one machine, and local against Ray ingestion.

Runs in one process on the same seeded data and prints markdown tables:

- query latency (one query per call, k = 10): p50 / p99 of kira FlatIndex and HNSWIndex
  against a Milvus Lite collection (FLAT and HNSW, same M / ef_construction / ef), each
  through `kira.retrieval.search.search`, with the Milvus / core ratio and recall@10
  against the exact core FlatIndex;
- ingest images/s over the same real images (scikit-image + scikit-learn digits):
  `KnowledgeBase.ingest` into an embedded and a Milvus Lite knowledge base, and
  `kira ingest --engine ray` (`ingest_ray_kb`) with 1 and 2 actors (``ray.init(num_cpus=2)``;
  2 actors reserve 0.75 CPU each so that Ray Data keeps some free), each Ray result checked
  to hold the local Milvus ingest's chunk ids;
- with ``--ask``: `Kira.ask` p50 per variant on an embedded and a Milvus Lite knowledge base
  built from the same images, and whether both give the same evidence.

Usage (needs ``kira[milvus,ray]``):
    nice python benchmarks/compare_milvus.py                  # 20k x 384, 60 images
    nice python benchmarks/compare_milvus.py --n 5000 --images 30 --skip-ray   # a quick look
    nice python benchmarks/compare_milvus.py --skip-query --skip-ingest --ask  # Kira.ask on both KB backends
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from kira import _core
from kira.knowledge_base.milvus.index import MilvusIndex
from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig
from kira.knowledge_base.milvus.writes import ChunkRecord, upsert_chunks
from kira.eval.synthetic import clustered_vectors
from kira.retrieval.search import search

K = 10
M, EF_CONSTRUCTION, EF = 16, 200, 64


def percentiles(fn, queries: np.ndarray) -> tuple[float, float, list[np.ndarray]]:
    times, results = [], []
    for q in queries:
        t = time.perf_counter()
        results.append(fn(q[None, :]))
        times.append(time.perf_counter() - t)
    ms = np.asarray(times) * 1e3
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), results


def recall(results: list[np.ndarray], truth: list[np.ndarray]) -> float:
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / K for a, b in zip(results, truth)]))


def query_table(n: int, dim: int, n_queries: int, workdir: Path) -> None:
    base = clustered_vectors(n, dim, sample=0, unit=True)
    queries = clustered_vectors(n_queries, dim, sample=1, unit=True)
    ids = np.arange(1, n + 1, dtype=np.int64)
    rows: list[tuple[str, float, float, float, float]] = []

    t = time.perf_counter()
    flat = _core.FlatIndex(dim)
    flat.add(ids, base)
    build = {"core FlatIndex": time.perf_counter() - t}
    first: dict[str, float] = {}
    t = time.perf_counter()
    graph = _core.HNSWIndex(dim, M=M, ef_construction=EF_CONSTRUCTION)
    graph.add(ids, base)
    build["core HNSWIndex"] = time.perf_counter() - t

    p50, p99, exact = percentiles(lambda q: search(flat, q, K, None)[0][0], queries)
    rows.append(("core FlatIndex", p50, p99, 1.0, build["core FlatIndex"]))
    p50, p99, got = percentiles(lambda q: search(graph, q, K, None, ef=EF)[0][0], queries)
    rows.append(("core HNSWIndex", p50, p99, recall(got, exact), build["core HNSWIndex"]))

    uri = str(workdir / "bench.db")
    for kind in ("FLAT", "HNSW"):
        config = MilvusConfig(uri=uri, collection=f"bench_{kind.lower()}", visual_dim=dim, text_dim=2, index=kind,
                              hnsw_m=M, ef_construction=EF_CONSTRUCTION, ef_search=EF, bm25=False, batch_size=2000,
                              kira_terms=False, timeout=600.0)  # 100k rows: a flush builds HNSW for minutes
        col = MilvusCollection.open(config)
        text = np.array([1.0, 0.0], np.float32)
        t = time.perf_counter()
        upsert_chunks(col, (ChunkRecord(id=int(i), doc_id=str(i), doc_chunk=int(i), level="document",
                                        visual=base[i - 1], text=text) for i in ids))
        col.flush()
        build[f"Milvus Lite {kind}"] = time.perf_counter() - t
        index = MilvusIndex(col, "visual")
        t = time.perf_counter()
        search(index, queries[:1], K, None, ef=EF)  # the first search may build/load the index
        first[f"Milvus Lite {kind}"] = time.perf_counter() - t
        p50, p99, got = percentiles(lambda q: search(index, q, K, None, ef=EF)[0][0], queries)
        rows.append((f"Milvus Lite {kind}", p50, p99, recall(got, exact), build[f"Milvus Lite {kind}"]))
        col.close()

    print(f"\n### Query latency, {n:,} x {dim} unit vectors, k = {K}, one query per call ({n_queries} queries)\n")
    print(f"HNSW: M = {M}, ef_construction = {EF_CONSTRUCTION}, ef = {EF}. Milvus Lite runs in this process "
          "(pymilvus -> gRPC on 127.0.0.1 -> its pure-Python engine, faiss for HNSW).\n")
    print("| index | p50 ms | p99 ms | p50 / core same kind | recall@10 vs exact | insert s | inserts/s "
          "| first search s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    same = {"core FlatIndex": rows[0][1], "core HNSWIndex": rows[1][1],
            "Milvus Lite FLAT": rows[0][1], "Milvus Lite HNSW": rows[1][1]}
    for name, p50, p99, rec, build_s in rows:
        print(f"| {name} | {p50:.3f} | {p99:.3f} | {p50 / same[name]:.1f} | {rec:.3f} | {build_s:.1f} | "
              f"{n / max(build_s, 1e-9):,.0f} | {first.get(name, 0.0):.2f} |", flush=True)


def write_images(folder: Path, n: int) -> None:
    from PIL import Image
    from skimage import data
    from sklearn.datasets import load_digits

    folder.mkdir(parents=True)
    names = ["astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "moon", "page", "horse", "text",
             "immunohistochemistry", "retina", "motorcycle_left", "cat", "grass", "gravel", "brick", "clock"]
    made = 0
    for name in names[: n // 3]:
        try:
            pixels = np.asarray(getattr(data, name)())
        except Exception:  # noqa: BLE001 - a data file not shipped
            continue
        if pixels.dtype == bool:
            pixels = pixels.astype(np.uint8) * 255
        if pixels.dtype != np.uint8:
            pixels = (255 * (pixels - pixels.min()) / max(float(np.ptp(pixels)), 1e-9)).astype(np.uint8)
        image = Image.fromarray(pixels[..., :3] if pixels.ndim == 3 else pixels)
        image.thumbnail((160, 160))
        image.save(folder / f"{name}.png")
        made += 1
    digits = load_digits()
    for i in range(n - made):
        Image.fromarray(np.kron(digits.images[i] * (255 / 16), np.ones((6, 6))).astype(np.uint8)).save(
            folder / f"digit_{i:03d}.png")


def ingest_table(n_images: int, workdir: Path, skip_ray: bool) -> None:
    """`kira ingest` paths over the same images: embedded and Milvus Lite knowledge bases in this process, and
    the Ray engine (`ingest_ray_kb`) with 1 and 2 actors; whether each Milvus result has the local one's ids."""
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    folder = workdir / "images"
    write_images(folder, n_images)
    stack = load_default(prefer_cuda=False, threads=1)
    rows = []
    reference = None
    for backend in ("embedded", "milvus"):
        t = time.perf_counter()
        with KnowledgeBase.create(workdir / f"ingest-{backend}", models=stack, backend=backend) as kb:
            summary = kb.ingest(folder, batch_size=16)
            if backend == "milvus":
                reference = kb.store.chunk_ids()
        rows.append((f"`KnowledgeBase.ingest`, {backend}", 1, len(summary.added), time.perf_counter() - t, "-"))
    if not skip_ray:
        import ray

        from kira.ray_ingest.kb import ingest_ray_kb

        for actors, cpus in ((1, 1.0), (2, 0.75)):
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
            try:
                t = time.perf_counter()
                with KnowledgeBase.create(workdir / f"ingest-ray{actors}", models=stack, backend="milvus") as kb:
                    summary = ingest_ray_kb(kb, folder, actors=actors, cpus_per_actor=cpus, batch_size=8)
                    same = bool(np.array_equal(kb.store.chunk_ids(), reference))
                rows.append((f"`kira ingest --engine ray`, Milvus, {actors} actor(s), num_cpus=2", actors,
                             len(summary.added), time.perf_counter() - t, "yes" if same else "no"))
            finally:
                ray.shutdown()
    print(f"\n### Ingest, {n_images} real images (scikit-image thumbnails <= 160 px, digits 48 px), default model "
          "stack\n")
    print("Wall time includes creating the knowledge base and the first model run (the stack is loaded before; "
          "for Ray, starting the actors, which load their own; Ray itself is started before).\n")
    print("| path | actors | added | s | images/s | / embedded | chunk ids = local Milvus |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | :---: |")
    for name, actors, added, seconds, same in rows:
        print(f"| {name} | {actors} | {added} | {seconds:.1f} | {added / seconds:.2f} | "
              f"{rows[0][3] / seconds * added / rows[0][2]:.2f} | {same} |")


QUESTIONS = ("a cup of coffee", "a rocket", "a cat", "handwritten digit", "the surface of the moon")


def ask_table(n_images: int, workdir: Path, repeats: int) -> None:
    """`Kira.ask` latency on an embedded and a Milvus Lite knowledge base of the same images (the same answers
    counted), and `KnowledgeBase.ingest` images/s into each."""
    import inspect
    import statistics

    import kira.multihop.hops
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default
    from kira.pipeline import VARIANTS, Kira

    folder = workdir / "ask-images"
    write_images(folder, n_images)
    stack = load_default(prefer_cuda=False, threads=1)
    hops_anywhere = "kira.backends.hops" in inspect.getsource(kira.multihop.hops)
    variants = [v for v in VARIANTS if hops_anywhere or VARIANTS.index(v) < VARIANTS.index("multi_hop")]
    kbs, ingest_s = {}, {}
    for backend in ("embedded", "milvus"):
        t = time.perf_counter()
        kbs[backend] = KnowledgeBase.create(workdir / f"ask-{backend}", models=stack, backend=backend)
        kbs[backend].ingest(folder, batch_size=16)
        ingest_s[backend] = time.perf_counter() - t
    answers: dict[tuple[str, str, str], list] = {}
    rows = []
    for variant in variants:
        times: dict[str, list[float]] = {"embedded": [], "milvus": []}
        for _ in range(repeats):
            for question in QUESTIONS:
                for backend, kb in kbs.items():
                    kira = Kira(kb, models=stack)
                    t = time.perf_counter()
                    result = kira.ask(question, variant=variant)
                    times[backend].append(time.perf_counter() - t)
                    answers[(variant, question, backend)] = [(i.doc_id, i.level, round(float(i.score), 5))
                                                             for i in result.evidence.items]
        same = sum(answers[(variant, q, "embedded")] == answers[(variant, q, "milvus")] for q in QUESTIONS)
        e, m = (1000 * statistics.median(times[b]) for b in ("embedded", "milvus"))
        rows.append((variant, e, m, same))
    for kb in kbs.values():
        kb.close()
    print(f"\n### Kira.ask on the same {n_images} images, embedded vs Milvus Lite knowledge base (default stack)\n")
    print(f"`KnowledgeBase.ingest`: embedded {n_images / ingest_s['embedded']:.2f} images/s, Milvus Lite "
          f"{n_images / ingest_s['milvus']:.2f} images/s (creation and model loading included).\n")
    if not hops_anywhere:
        print("Variants that hop are left out: kira.multihop.hops does not dispatch to kira.backends.hops yet.\n")
    print(f"| variant | embedded p50 ms | Milvus Lite p50 ms | Milvus / embedded | same answers (of {len(QUESTIONS)}) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for variant, e, m, same in rows:
        print(f"| {variant} | {e:.1f} | {m:.1f} | {m / e:.1f} | {same} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="vectors in the query comparison")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--skip-query", action="store_true")
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--ask", action="store_true", help="also Kira.ask latency, embedded vs Milvus Lite KB")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the ask questions per variant")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"core kernels: {_core.simd_level()}")
    workdir = Path(tempfile.mkdtemp(prefix="kira-milvus-bench-"))
    try:
        if not args.skip_query:
            query_table(args.n, args.dim, args.queries, workdir)
        if not args.skip_ingest:
            ingest_table(args.images, workdir, args.skip_ray)
        if args.ask:
            ask_table(args.images, workdir, args.repeats)
    finally:
        from milvus_lite import server_manager_instance

        server_manager_instance.release_all()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
