"""kira's indexes side by side with the libraries a user would pick instead.

Runs in one process on the same seeded clustered data and prints markdown tables with
ratios (kira / peer; for latency < 1 is better, for QPS > 1 is better):

- memory read bandwidth (numpy reductions, one thread and all threads), the floor for
  an exact scan;
- exact search: kira FlatIndex f32/f16/i8 against numpy (matmul + argpartition) and faiss
  IndexFlatIP: single-query latency, fraction of the bandwidth floor, batch QPS, and the
  recall@10 of f16/i8 against f32 exact;
- HNSW: kira HNSWIndex against hnswlib, faiss IndexHNSWFlat and usearch at equal M and
  ef_construction: build time, memory, recall@10 against single-query and batch QPS over
  a sweep of ef;
- per-call overhead of one search on a 1k-vector index;
- exact f32 single-query cost against faiss IndexFlatIP as the index outgrows the
  last-level cache (20k, 40k, 100k rows by default; one thread, process CPU time, best of
  interleaved rounds): the kira/faiss ratio per size (issue 25: a four-rows-per-pass scan
  read 2-2.7x slower than faiss from 40k rows on an AMD EPYC).

A missing peer is skipped with a note. Usage:
    python -m benchmarks.peers.compare_indexes            # 100k x 256 and 100k x 768
    python -m benchmarks.peers.compare_indexes --quick    # 20k x 128, a minute
    python -m benchmarks.peers.compare_indexes --skip bandwidth exact hnsw overhead memory   # sizes only
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from kira import _core
from kira.eval.synthetic import clustered_vectors

K = 10


def optional(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        print(f"> {name} is not installed: skipped (pip install 'kira[bench]')")
        return None


def best_time(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def per_call(fn: Callable[[int], object], calls: int, repeat: int = 3) -> float:
    """Best (minimum) over `repeat` rounds of the mean seconds per call of fn(i), i < calls.
    The minimum, not the median: on a shared machine the quietest round is the estimate
    least polluted by other jobs."""
    rounds = []
    for _ in range(repeat):
        t = time.perf_counter()
        for i in range(calls):
            fn(i)
        rounds.append((time.perf_counter() - t) / calls)
    return float(min(rounds))


def interleaved(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best seconds of each fn over `rounds` rounds that run every fn once in turn, so
    load from other jobs falls on all contenders alike."""
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(np.intersect1d(a, b)) / truth.shape[1] for a, b in zip(found, truth)]))


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def malloc_trim() -> Callable[[], object]:
    """glibc's malloc_trim(0): hand freed heap pages back, so RSS counts live memory only."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return lambda: libc.malloc_trim(0)
    except (OSError, AttributeError):
        return lambda: None


def table(header: list[str], rows: list[list[object]]) -> None:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(cell(v) for v in r) + " |")
    print()


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")
    except (OSError, subprocess.CalledProcessError):
        model = platform.processor() or "?"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{model}, {os.cpu_count()} cores, load average {load:.1f} at start, kira kernels: {_core.simd_level()}"


# ---- bandwidth ------------------------------------------------------------------------

def bandwidth(mib: int) -> tuple[float, float]:
    """Read bandwidth in GB/s, (one thread, all threads): the best of several numpy
    reductions over a large array (float32 sum is pairwise and can be compute-bound, so
    max and an int64 bitwise-or also run and the fastest counts)."""
    a = np.ones(mib * (1 << 20) // 4, dtype=np.float32)
    reducers = [np.sum, np.max, lambda v: np.bitwise_or.reduce(v.view(np.int64))]

    def rate(parts: list[np.ndarray], run: Callable[[Callable, list[np.ndarray]], object]) -> float:
        return max(a.nbytes / best_time(lambda f=f: run(f, parts), 5) / 1e9 for f in reducers)

    one = rate([a], lambda f, parts: f(parts[0]))
    threads = os.cpu_count() or 1
    with ThreadPoolExecutor(threads) as pool:
        allt = rate(np.array_split(a, threads), lambda f, parts: list(pool.map(f, parts)))
    return one, allt


# ---- exact search ---------------------------------------------------------------------

def exact_section(x: np.ndarray, q: np.ndarray, batch: int, bw_all: float, faiss) -> None:
    n, d = x.shape
    ids = np.arange(n, dtype=np.int64)
    print(f"### Exact search, {n:,} x {d}, k = {K}\n")
    rows = []
    singles = min(len(q), 100)

    def numpy_search(qs: np.ndarray) -> np.ndarray:
        s = qs @ x.T
        part = np.argpartition(-s, K, axis=1)[:, :K]
        order = np.argsort(-np.take_along_axis(s, part, 1), axis=1)
        return np.take_along_axis(part, order, 1)

    truth = None
    results = {}
    kira_indexes = {}
    for dtype in ("f32", "f16", "i8"):
        index = _core.FlatIndex(d, dtype=dtype)
        index.add(ids, x)
        kira_indexes[dtype] = index
    truth = kira_indexes["f32"].search(q[:batch], K)[0]
    contenders: dict[str, tuple[Callable[[np.ndarray], object], int]] = {}
    for dtype, index in kira_indexes.items():
        contenders[f"kira Flat {dtype}"] = (lambda qs, ix=index: ix.search(qs, K)[0], {"f32": 4, "f16": 2, "i8": 1}[dtype])
    contenders["numpy matmul+argpartition"] = (numpy_search, 4)
    if faiss is not None:
        fi = faiss.IndexFlatIP(d)
        fi.add(x)
        contenders["faiss IndexFlatIP"] = (lambda qs: fi.search(qs, K)[1], 4)
    for fn, _ in contenders.values():
        fn(q[:2])  # warm up
    chunk = 20
    single = {name: float("inf") for name in contenders}
    for r in range(max(1, singles // chunk)):
        times = interleaved({name: (lambda fn=fn, r=r: [fn(q[i : i + 1]) for i in range(r * chunk, (r + 1) * chunk)])
                             for name, (fn, _) in contenders.items()}, 1)
        for name, t in times.items():
            single[name] = min(single[name], t / chunk)
    batch_t = interleaved({name: (lambda fn=fn: fn(q[:batch])) for name, (fn, _) in contenders.items()}, 3)
    for name, (fn, nbytes) in contenders.items():
        lat = single[name]
        qps = batch / batch_t[name]
        found = np.asarray(fn(q[:batch]))
        floor = n * d * nbytes / (bw_all * 1e9)
        results[name] = (lat, qps)
        rows.append([name, lat * 1e3, floor / lat, qps, recall(found, truth)])
    base_lat, base_qps = results["kira Flat f32"]
    for r in rows:
        lat, qps = results[r[0]]
        r.insert(2, base_lat / lat if not r[0].startswith("kira Flat f32") else 1.0)
        r.append(qps / base_qps)
    table(["index", "1-query ms", "1-query speed / kira f32", "fraction of bandwidth floor", f"batch {batch} QPS",
           "recall@10 vs f32 exact", "QPS / kira f32"], rows)
    cpu_table(contenders, kira_indexes, q, singles, faiss)
    lines = []
    for peer in ("numpy matmul+argpartition", "faiss IndexFlatIP"):
        if peer in results:
            lines.append(f"kira f32 / {peer}: single-query latency ratio {base_lat / results[peer][0]:.2f}, "
                         f"batch QPS ratio {base_qps / results[peer][1]:.2f}")
    lines.append(f"f16 single-query throughput = {base_lat / results['kira Flat f16'][0]:.2f}x f32; "
                 f"i8 = {base_lat / results['kira Flat i8'][0]:.2f}x f32")
    print("\n".join(f"- {ln}" for ln in lines) + "\n")


def cpu_table(contenders: dict, kira_indexes: dict, q: np.ndarray, singles: int, faiss) -> None:
    """Single-query cost as CPU time, every library on one thread: on a machine shared
    with other jobs this is far steadier than wall time (a memory-bound scan still feels
    other jobs' memory traffic)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        print("> threadpoolctl is not installed: single-thread CPU table skipped\n")
        return
    one_thread = {f"kira Flat {dt}": (lambda qs, ix=ix: ix.search(qs, K, threads=1)) for dt, ix in kira_indexes.items()}
    for name in ("numpy matmul+argpartition", "faiss IndexFlatIP"):
        if name in contenders:
            one_thread[name] = contenders[name][0]
    cpu = {name: float("inf") for name in one_thread}
    if faiss is not None:
        faiss.omp_set_num_threads(1)
    with threadpool_limits(1):
        for _ in range(3):
            for name, fn in one_thread.items():
                t = time.process_time()
                for i in range(singles):
                    fn(q[i : i + 1])
                cpu[name] = min(cpu[name], (time.process_time() - t) / singles)
    if faiss is not None:
        faiss.omp_set_num_threads(os.cpu_count() or 1)
    base = cpu["kira Flat f32"]
    rows = [[name, t * 1e3, base / t] for name, t in cpu.items()]
    print("Single query, one thread each, CPU time (best of 3 interleaved rounds):\n")
    table(["index", "CPU ms / query", "speed / kira f32"], rows)


def sizes_section(sizes: list[int], d: int, singles: int, faiss) -> None:
    """kira FlatIndex f32 against faiss IndexFlatIP, one query at a time on one thread, as
    the rows grow past the last-level cache. CPU time of this process (best of 5 rounds that
    run both in turn on the same arrays), so other jobs on a shared machine weigh less."""
    if faiss is None:
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        print("> threadpoolctl is not installed: size sweep skipped\n")
        return
    rows = []
    faiss.omp_set_num_threads(1)
    q = clustered_vectors(singles, d, sample=1, unit=True)
    with threadpool_limits(1):
        for n in sizes:
            x = clustered_vectors(n, d, sample=0, unit=True)
            ix = _core.FlatIndex(d, dtype="f32")
            ix.add(np.arange(n, dtype=np.int64), x)
            fx = faiss.IndexFlatIP(d)
            fx.add(x)
            fns = {"kira": lambda v: ix.search(v, K, threads=1), "faiss": lambda v: fx.search(v, K)}
            cpu = {name: float("inf") for name in fns}
            for _ in range(5):
                for name, fn in fns.items():
                    t = time.process_time()
                    for i in range(singles):
                        fn(q[i : i + 1])
                    cpu[name] = min(cpu[name], (time.process_time() - t) / singles)
            rows.append([f"{n:,}", f"{n * d * 4 / 2**20:.0f}", cpu["kira"] * 1e3, cpu["faiss"] * 1e3,
                         cpu["kira"] / cpu["faiss"]])
            del ix, fx, x
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    print(f"### Exact f32 single query as the index grows, d = {d} (one thread, CPU time; "
          f"kira {_core.simd_level()} kernels)\n")
    table(["rows", "MiB", "kira ms", "faiss ms", "kira / faiss"], rows)


# ---- HNSW -----------------------------------------------------------------------------

class Peer:
    """One HNSW implementation behind a common face."""

    def __init__(self, name: str, build: Callable[[], object], set_ef: Callable[[object, int], None],
                 search: Callable[[object, np.ndarray, int], np.ndarray], memory: Callable[[object], int | None]):
        self.name, self.build, self.set_ef, self.search, self.memory = name, build, set_ef, search, memory


def hnsw_peers(x: np.ndarray, m: int, efc: int, threads: int, faiss, hnswlib, usearch_index) -> list[Peer]:
    n, d = x.shape
    ids = np.arange(n, dtype=np.int64)
    peers = []

    def kira_build():
        index = _core.HNSWIndex(d, M=m, ef_construction=efc)
        index.add(ids, x, threads=threads)
        return index

    def kira_search(ix, qs, t):
        return ix.search(qs, K, threads=t)[0]

    peers.append(Peer("kira HNSW", kira_build, lambda ix, ef: setattr(ix, "ef_search", ef), kira_search,
                      lambda ix: ix.memory_bytes()))
    if hnswlib is not None:
        def hl_build():
            index = hnswlib.Index("ip", d)
            index.init_index(n, m, efc, 0)
            index.set_num_threads(threads)
            index.add_items(x, ids)
            return index

        def hl_search(ix, qs, t):
            ix.set_num_threads(t)
            return ix.knn_query(qs, K)[0]

        peers.append(Peer("hnswlib", hl_build, lambda ix, ef: ix.set_ef(ef), hl_search, lambda ix: None))
    if faiss is not None:
        def fa_build():
            faiss.omp_set_num_threads(threads)
            index = faiss.IndexHNSWFlat(d, m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = efc
            index.add(x)
            return index

        def fa_search(ix, qs, t):
            faiss.omp_set_num_threads(t)
            return ix.search(qs, K)[1]

        peers.append(Peer("faiss IndexHNSWFlat", fa_build, lambda ix, ef: setattr(ix.hnsw, "efSearch", ef),
                          fa_search, lambda ix: None))
    if usearch_index is not None:
        def us_build():
            index = usearch_index(ndim=d, metric="ip", dtype="f32", connectivity=m, expansion_add=efc)
            index.add(ids, x, threads=threads)
            return index

        def us_search(ix, qs, t):
            res = ix.search(qs, K, threads=t)
            return np.asarray(res.keys).reshape(len(qs), -1)

        peers.append(Peer("usearch", us_build, lambda ix, ef: setattr(ix, "expansion_search", ef), us_search,
                          lambda ix: int(ix.memory_usage)))
    return peers


def memory_child(name: str, n: int, d: int, m: int, efc: int, threads: int) -> None:
    """Runs in a fresh process: prints the RSS growth (bytes) of building one index."""
    x = clustered_vectors(n, d, sample=0, unit=True)
    faiss = optional("faiss") if name.startswith("faiss") else None
    hnswlib = optional("hnswlib") if name == "hnswlib" else None
    us = optional("usearch.index") if name == "usearch" else None
    peer = next(p for p in hnsw_peers(x, m, efc, threads, faiss, hnswlib, us.Index if us else None) if p.name == name)
    trim = malloc_trim()
    trim()
    before = rss_bytes()
    index = peer.build()
    trim()
    print(rss_bytes() - before)
    del index


def child_memory(name: str, n: int, d: int, m: int, efc: int, threads: int) -> float:
    """RSS growth in MiB of building `name` alone in a fresh interpreter (no allocator reuse)."""
    import sys

    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", name, str(n), str(d), str(m), str(efc), str(threads)],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    return int(out[0]) / 2**20


def hnsw_section(x: np.ndarray, q: np.ndarray, m: int, efc: int, efs: list[int], threads: int,
                 faiss, hnswlib, usearch_index, measure_memory: bool = True) -> None:
    n, d = x.shape
    print(f"### HNSW, {n:,} x {d}, M = {m}, ef_construction = {efc}, k = {K}, build threads = {threads}\n")
    flat = _core.FlatIndex(d)
    flat.add(np.arange(n, dtype=np.int64), x)
    truth = flat.search(q, K)[0]
    del flat
    built = []
    rows = []
    for peer in hnsw_peers(x, m, efc, threads, faiss, hnswlib, usearch_index):
        t = time.perf_counter()
        index = peer.build()
        build_s = time.perf_counter() - t
        built.append((peer, index))
        own = peer.memory(index)
        rss = child_memory(peer.name, n, d, m, efc, threads) if measure_memory else float("nan")
        rows.append([peer.name, build_s, rss, own / 2**20 if own else "-"])
    fastest = min(r[1] for r in rows)
    hl_mem = next((r[2] for r in rows if r[0] == "hnswlib"), None)
    for r in rows:
        r.insert(2, r[1] / fastest)
        r.append(r[3] / hl_mem if hl_mem else "-")
    table(["index", "build s", "build / fastest", "RSS growth MiB (own process)", "own report MiB",
           "RSS / hnswlib"], rows)

    sweep = {}
    rows = []
    singles = min(len(q), 300)
    for peer, index in built:
        for ef in efs:
            peer.set_ef(index, ef)
            peer.search(index, q[:1], 1)
            found = np.asarray(peer.search(index, q, os.cpu_count() or 1))
            r = recall(found, truth)
            single = 1.0 / per_call(lambda i: peer.search(index, q[i : i + 1], 1), singles, repeat=2)
            batch = len(q) / best_time(lambda: peer.search(index, q, os.cpu_count() or 1), 2)
            sweep.setdefault(peer.name, []).append((ef, r, single, batch))
            rows.append([peer.name, ef, r, single, batch])
    table(["index", "ef", "recall@10", "1-query QPS (1 thread)", f"batch QPS ({len(q)} queries, all threads)"], rows)

    rows = []
    for target in (0.95, 0.99):
        best = {}
        for name, points in sweep.items():
            ok = [p for p in points if p[1] >= target]
            best[name] = max(ok, key=lambda p: p[2]) if ok else None
        kira = best.get("kira HNSW")
        peers = {k: v for k, v in best.items() if k != "kira HNSW" and v is not None}
        if kira is None or not peers:
            rows.append([target, "-", "-", "-", "-"])
            continue
        top_name, top = max(peers.items(), key=lambda kv: kv[1][2])
        rows.append([target, f"ef={kira[0]}: {kira[2]:,.0f}", f"{top_name} ef={top[0]}: {top[2]:,.0f}", kira[2] / top[2],
                     ", ".join(f"{k} {v[2]:,.0f}" for k, v in peers.items())])
    table(["recall@10 >=", "kira 1-query QPS", "best peer", "kira / best", "all peers"], rows)


def overhead_section(hnswlib, faiss) -> None:
    d = 128
    x = clustered_vectors(1000, d, sample=7, unit=True)
    q = clustered_vectors(200, d, sample=8, unit=True)
    ids = np.arange(1000, dtype=np.int64)
    rows = []
    flat = _core.FlatIndex(d)
    flat.add(ids, x)
    hn = _core.HNSWIndex(d, M=16, ef_construction=100)
    hn.add(ids, x)
    hn.ef_search = 32
    calls = {"kira FlatIndex": lambda i: flat.search(q[i % 200], K),
             "kira HNSWIndex ef=32": lambda i: hn.search(q[i % 200], K)}
    if hnswlib is not None:
        hl = hnswlib.Index("ip", d)
        hl.init_index(1000, 16, 100, 0)
        hl.add_items(x, ids)
        hl.set_ef(32)
        hl.set_num_threads(1)
        calls["hnswlib ef=32"] = lambda i: hl.knn_query(q[i % 200], K)
    if faiss is not None:
        fi = faiss.IndexFlatIP(d)
        fi.add(x)
        calls["faiss IndexFlatIP"] = lambda i: fi.search(q[i % 200 : i % 200 + 1], K)
    for name, fn in calls.items():
        fn(0)
        rows.append([name, per_call(fn, 5000) * 1e6])
    ref = next((r[1] for r in rows if r[0].startswith("hnswlib")), None)
    for r in rows:
        r.append(r[1] / ref if ref else "-")
    print(f"### Per-call overhead: one search on a 1,000 x {d} index, k = {K}, one thread\n")
    table(["index", "us per call", "/ hnswlib"], rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="20k x 128, fewer queries (about a minute)")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dims", type=int, nargs="+", default=[256, 768])
    p.add_argument("--hnsw-dims", type=int, nargs="*", default=None, help="dims for the HNSW section (default: --dims)")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--M", type=int, default=16)
    p.add_argument("--ef-construction", type=int, default=200)
    p.add_argument("--ef", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="build threads for every library")
    p.add_argument("--skip", nargs="*", default=[],
                   choices=["bandwidth", "exact", "hnsw", "overhead", "memory", "sizes"])
    p.add_argument("--flat-sizes", type=int, nargs="+", default=[20_000, 40_000, 100_000],
                   help="rows for the exact f32 size sweep against faiss (at the first of --dims)")
    p.add_argument("--memory-child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.memory_child:
        name, *nums = args.memory_child
        memory_child(name, *map(int, nums))
        return
    if args.quick:
        args.n, args.dims, args.queries, args.ef_construction = 20_000, [128], 300, 100
    hnsw_dims = args.dims if args.hnsw_dims is None else args.hnsw_dims

    faiss = optional("faiss")
    hnswlib = optional("hnswlib")
    usearch = optional("usearch.index")
    print(f"Machine: {machine()}\n")
    bw_all = float("nan")
    if "bandwidth" not in args.skip:
        one, bw_all = bandwidth(256 if args.quick else 1024)
        print("### Memory read bandwidth (best numpy reduction over a 1 GiB array)\n")
        table(["threads", "GB/s"], [[1, one], [os.cpu_count(), bw_all]])
    for d in args.dims:
        x = clustered_vectors(args.n, d, sample=0, unit=True)
        q = clustered_vectors(args.queries, d, sample=1, unit=True)
        if "exact" not in args.skip:
            exact_section(x, q, args.queries, bw_all, faiss)
        if "hnsw" not in args.skip and d in hnsw_dims:
            hnsw_section(x, q, args.M, args.ef_construction, args.ef, args.threads, faiss, hnswlib,
                         usearch.Index if usearch else None, "memory" not in args.skip)
    if "overhead" not in args.skip:
        overhead_section(hnswlib, faiss)
    if "sizes" not in args.skip:
        sizes_section(args.flat_sizes, args.dims[0], 50 if args.quick else 200, faiss)


if __name__ == "__main__":
    main()
