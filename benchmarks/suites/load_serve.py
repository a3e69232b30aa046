"""Load generator for `kira serve`: the same queries in-process and over loopback HTTP, in one run.

    python -m benchmarks.suites.load_serve --build 400 --kb /tmp/kira-load-kb      # build (once), then measure
    python -m benchmarks.suites.load_serve --kb /tmp/kira-load-kb [--clients 1 4 16] [--workers 1 2]
                                           [--routes search ask ask_image] [--seconds 6] [--requests 300]
                                           [--out load.json]

For each route it measures p50 / p99 latency and throughput (requests/s):
- in-process, with P = 1 and 2 processes each calling the library in a loop (`Kira.ask`;
  for /search the same `Reader.search` the route runs): the ceiling the service is held to;
- over HTTP against `kira serve KB --read-only --workers W` started here on a free
  127.0.0.1 port, with 1, 4 and 16 concurrent clients (one asyncio httpx client).
Every cell stops after `--requests` requests or `--seconds` seconds, whichever is first.
Before timing, every distinct query is sent once per process (twice per worker over
HTTP) and not counted: the pipeline caches per-chunk work across asks, so the figures
are for a warm service. Only loopback is ever contacted.

Routes: `search` (POST /search, text), `vector` (POST /search with a raw vector of the
visual index's dimension: no model runs, so it shows the service's own cost), `ask` (POST /ask, text question, variant full) and
`ask_image` (POST /ask, multipart image upload, variant full).

The service's own overhead at 1 client (target <= 1 ms for /search) is measured by
alternating in-process and HTTP calls of the same query in one loop against a 1-worker
server, so that both see the same machine load: the median of the paired differences,
and the part of it spent in the server outside the route's own work (the response's
Server-Timing header minus the work timings in its body), and CPU time per call in-process
and per request in the server process (all threads; less inflated by the machine's load), and HTTP throughput at 16 clients over in-process
throughput with as many processes as workers (target >= 0.8). The load generator
shares the machine with the server: on a 2-core VM its own CPU use lowers the HTTP figures.

`--build N` makes a knowledge base of N documents from scikit-image's photographs
(seeded random crops, flips and rescales of each, captioned with the photograph's name
and the transformation), about 25 chunks each at the default levels.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

PHOTOS = ("astronaut", "brick", "camera", "cat", "chelsea", "clock", "coffee", "coins", "grass", "gravel", "horse",
          "hubble_deep_field", "immunohistochemistry", "moon", "page", "retina", "rocket", "text", "logo",
          "colorwheel")
QUESTIONS = ("what does the astronaut hold", "a cup of coffee on a saucer", "a tabby cat", "the rocket on its pad",
             "old coins", "a wall of bricks", "a clock face", "a horse", "galaxies in deep space", "a printed page",
             "the surface of the moon", "grass and gravel", "a man with a camera", "the retina")
QUERY_PHOTOS = ("chelsea", "coffee", "rocket", "coins", "astronaut", "camera")


# ---- the knowledge base ---------------------------------------------------------------------
def _photos() -> dict[str, np.ndarray]:
    import skimage.data

    out = {}
    for name in PHOTOS:
        try:
            image = np.asarray(getattr(skimage.data, name)())
        except Exception:  # a photograph this scikit-image does not ship offline
            continue
        if image.ndim == 2 or (image.ndim == 3 and image.shape[2] in (3, 4)):
            out[name] = image[..., :3] if image.ndim == 3 else image
    return out


def build(path: Path, n: int, seed: int = 0, models: Any = None, index: str = "flat", config: Any = None) -> None:
    """A knowledge base of `n` transformed photographs at `path` (`models`, default: the default stack;
    `index`: "flat" or "hnsw"; `config`: a KiraConfig, default the default)."""
    from PIL import Image

    from kira.knowledge_base import KnowledgeBase

    rng = np.random.default_rng(seed)
    photos = _photos()
    names = sorted(photos)
    kb = KnowledgeBase.create(path, index=index, **({"models": models} if models is not None else {}),
                              **({"config": config} if config is not None else {}))
    start = time.perf_counter()
    for i in range(n):
        name = names[i % len(names)]
        image = photos[name]
        h, w = image.shape[:2]
        share = rng.uniform(0.5, 1.0)
        ch, cw = max(16, int(h * share)), max(16, int(w * share))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = image[y:y + ch, x:x + cw]
        flipped = bool(rng.integers(0, 2))
        if flipped:
            crop = crop[:, ::-1]
        side = int(rng.integers(160, 321))
        pil = Image.fromarray(np.ascontiguousarray(crop))
        pil.thumbnail((side, side))
        caption = f"{name.replace('_', ' ')} photograph, crop {i // len(names)}" + (", mirrored" if flipped else "")
        kb.add_image(np.asarray(pil), doc_id=f"{name}-{i:05d}", caption=caption, tags=[name],
                     metadata={"photo": name, "crop": i // len(names)})
        if (i + 1) % 50 == 0:
            kb.commit()
            print(f"  built {i + 1}/{n} documents ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    kb.close()
    stats = KnowledgeBase.open(path, read_only=True)
    print(f"built {path}: {stats.stats()['chunks']} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    stats.close()


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    pil = Image.fromarray(np.ascontiguousarray(image))
    pil.thumbnail((320, 320))
    buf = io.BytesIO()
    pil.save(buf, format="PNG")
    return buf.getvalue()


def _query_images() -> list[bytes]:
    photos = _photos()
    return [_png(photos[n]) for n in QUERY_PHOTOS if n in photos]


# ---- in-process -----------------------------------------------------------------------------
def _local_call(reader: Any, route: str, i: int, images: list[np.ndarray], vectors: list[np.ndarray]) -> None:
    """The library call a request of `route` makes (what the route runs, minus HTTP)."""
    if route == "search":
        reader.search(QUESTIONS[i % len(QUESTIONS)], None, None, "visual", 10, None, None)
    elif route == "vector":
        reader.search(None, None, vectors[i % len(vectors)], "visual", 10, None, None)
    elif route == "ask":
        reader.kira.ask(QUESTIONS[i % len(QUESTIONS)], top_k=5, variant="full")
    else:
        reader.kira.ask(None, image=images[i % len(images)], top_k=5, variant="full")


def _inprocess_worker(kb: str, route: str, seconds: float, requests: int, barrier: Any, out: Any) -> None:
    from kira.serve.readers import Reader, load_models

    reader = Reader(kb, load_models(None, threads=1))
    images = [_decode(b) for b in _query_images()]
    vectors = _vectors(kb)
    for i in range(_distinct(route, len(images), len(vectors))):
        _local_call(reader, route, i, images, vectors)  # every distinct query once: the pipeline caches per chunk
    barrier.wait()
    latencies = []
    start = time.perf_counter()
    i = 0
    while i < requests and time.perf_counter() - start < seconds:
        t = time.perf_counter()
        _local_call(reader, route, i, images, vectors)
        latencies.append(time.perf_counter() - t)
        i += 1
    out.put((latencies, time.perf_counter() - start))
    reader.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid`, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def paired(kb: str, url: str, route: str, seconds: float, requests: int, server_pid: int) -> dict[str, Any]:
    """The service's overhead at 1 client: in-process and HTTP calls of the same query, alternated in one loop
    (which goes first alternates too), so both see the same machine load. Server: 1 worker, process
    `server_pid`; its CPU time per request is compared with the in-process call's (a figure the
    machine's load does not inflate the way it does wall-clock time)."""
    import httpx

    from kira.serve.readers import Reader, load_models

    reader = Reader(kb, load_models(None, threads=1))
    raw_images = _query_images()
    images = [_decode(b) for b in raw_images]
    vectors = _vectors(kb)
    as_lists = [v.tolist() for v in vectors]
    with httpx.Client(base_url=url, timeout=300.0) as client:

        inside: list[float] = []  # server time outside the route's own work (Server-Timing minus body timings)

        def remote(i: int) -> None:
            path, kwargs = _http_request(route, i, raw_images, as_lists)
            r = client.post(path, **kwargs)
            r.raise_for_status()
            server_ms = float(r.headers["server-timing"].partition("dur=")[2])
            work = r.json()["timings"]
            inside.append(server_ms - (work["total"] if "total" in work else sum(work.values())))

        def local(i: int) -> None:
            _local_call(reader, route, i, images, vectors)

        for i in range(_distinct(route, len(images), len(vectors))):
            local(i)
            remote(i)
        inside.clear()
        here, there = [], []
        local_cpu = 0.0
        server_cpu = _cpu_seconds(server_pid)
        start = time.perf_counter()
        i = 0
        while i < requests and time.perf_counter() - start < seconds:
            for fn, sink in ((local, here), (remote, there))[:: 1 if i % 2 else -1]:
                t, c = time.perf_counter(), time.process_time()
                fn(i)
                sink.append(time.perf_counter() - t)
                if fn is local:
                    local_cpu += time.process_time() - c
            i += 1
        server_cpu = _cpu_seconds(server_pid) - server_cpu
    reader.close()
    a, b = np.asarray(here) * 1000, np.asarray(there) * 1000
    return {"n": int(a.size), "inprocess_p50_ms": float(np.median(a)), "http_p50_ms": float(np.median(b)),
            "overhead_p50_ms": float(np.median(b - a)), "in_server_p50_ms": float(np.median(inside)),
            "inprocess_cpu_ms": 1000 * local_cpu / max(a.size, 1), "server_cpu_ms": 1000 * server_cpu / max(b.size, 1)}


def _http_request(route: str, i: int, images: list[bytes], vectors: list[list[float]]) -> tuple[str, dict[str, Any]]:
    """(path, httpx keyword arguments) of request `i` of `route`."""
    if route == "search":
        return "/search", {"json": {"text": QUESTIONS[i % len(QUESTIONS)], "top_k": 10}}
    if route == "vector":
        return "/search", {"json": {"vector": vectors[i % len(vectors)], "top_k": 10}}
    if route == "ask":
        return "/ask", {"json": {"question": QUESTIONS[i % len(QUESTIONS)], "top_k": 5}}
    return "/ask", {"files": {"image": ("q.png", images[i % len(images)], "image/png")}, "data": {"top_k": "5"}}


def _distinct(route: str, images: int, vectors: int) -> int:
    return {"search": len(QUESTIONS), "ask": len(QUESTIONS), "vector": vectors, "ask_image": images}[route]


def _vectors(kb: str, n: int = 16) -> list[np.ndarray]:
    """Seeded random unit vectors of the visual index's dimension (the /search raw-vector queries)."""
    from kira.knowledge_base import KnowledgeBase

    opened = KnowledgeBase.open(kb, read_only=True)
    dim = int(opened.index("visual").dim)
    opened.close()
    rng = np.random.default_rng(0)
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return list(v / np.linalg.norm(v, axis=1, keepdims=True))


def _decode(data: bytes) -> np.ndarray:
    from kira.serve.images import decode_image

    return decode_image(data, "image", 64_000_000)


def inprocess(kb: str, route: str, processes: int, seconds: float, requests: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    out = ctx.Queue()
    per = max(1, requests // processes)
    procs = [ctx.Process(target=_inprocess_worker, args=(kb, route, seconds, per, barrier, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    latencies = [x for lat, _ in results for x in lat]
    wall = max(w for _, w in results)
    return _summary(latencies, wall, 0)


# ---- over HTTP ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, kb: str, workers: int, log: Path) -> None:
        import httpx

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kira", "serve", kb, "--read-only", "--workers", str(workers), "--port",
             str(self.port), "--queue-size", "64", "--log-level", "warning"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kira serve exited ({self.proc.returncode}); see {log}")
            try:
                if httpx.get(self.url + "/ready", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"kira serve not ready in 300 s; see {log}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


async def _http_cell(url: str, route: str, clients: int, seconds: float, requests: int,
                     images: list[bytes], vectors: list[list[float]], warm: int) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=300.0) as client:

        async def once(i: int) -> int:
            path, kwargs = _http_request(route, i, images, vectors)
            return (await client.post(path, **kwargs)).status_code

        # warm-up: every distinct query, `warm` times over (so that each worker has likely seen each), and
        # the connections opened
        distinct = _distinct(route, len(images), len(vectors))
        for _ in range(warm):
            await asyncio.gather(*(once(i) for i in range(distinct)))
        await asyncio.gather(*(once(i) for i in range(clients)))
        latencies: list[float] = []
        refused = [0]
        counter = [0]
        start = time.perf_counter()

        async def loop() -> None:
            while counter[0] < requests and time.perf_counter() - start < seconds:
                i = counter[0]
                counter[0] += 1
                t = time.perf_counter()
                status = await once(i)
                if status == 200:
                    latencies.append(time.perf_counter() - t)
                else:
                    refused[0] += 1

        await asyncio.gather(*(loop() for _ in range(clients)))
        return _summary(latencies, time.perf_counter() - start, refused[0])


def _summary(latencies: list[float], wall: float, refused: int) -> dict[str, Any]:
    a = np.asarray(latencies) * 1000.0
    return {"n": int(a.size), "p50_ms": float(np.percentile(a, 50)) if a.size else None,
            "p99_ms": float(np.percentile(a, 99)) if a.size else None,
            "qps": a.size / wall if wall > 0 else None, "refused": refused}


# ---- main -----------------------------------------------------------------------------------
def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", required=True, help="knowledge base directory (built with --build when missing)")
    parser.add_argument("--build", type=int, default=0, help="build a knowledge base of this many documents first")
    parser.add_argument("--index", choices=["flat", "hnsw"], default="flat", help="the index of a knowledge base --build makes")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--routes", nargs="+", default=["vector", "search", "ask", "ask_image"],
                        choices=["search", "vector", "ask", "ask_image"])
    parser.add_argument("--overhead-routes", nargs="*", default=["vector", "search"],
                        choices=["search", "vector", "ask", "ask_image"], help="routes of the paired overhead run")
    parser.add_argument("--seconds", type=float, default=6.0, help="time bound per cell")
    parser.add_argument("--requests", type=int, default=300, help="request bound per cell")
    parser.add_argument("--out", help="write every figure as JSON here")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.seconds > 120 or args.requests < 1 or args.requests > 100_000:
        parser.error("--seconds must be in (0, 120] and --requests in [1, 100000]: the load is bounded")
    if max(args.clients) > 64:
        parser.error("--clients is at most 64")
    kb = Path(args.kb)
    if args.build and not (kb / "kira.sqlite").exists():
        build(kb, args.build, index=args.index)
    from kira.knowledge_base import KnowledgeBase

    opened = KnowledgeBase.open(kb, read_only=True)
    stats = opened.stats()
    opened.close()
    print(f"knowledge base {kb}: {stats['documents']} documents, chunks {stats['chunks']}, cores {os.cpu_count()}")
    images = _query_images()
    vectors = [v.tolist() for v in _vectors(str(kb))]
    results: dict[str, Any] = {"kb": {"documents": stats["documents"], "chunks": stats["chunks"]}, "inprocess": {},
                               "http": {}}
    for route in args.routes:
        for processes in sorted(set(args.workers)):
            cell = inprocess(str(kb), route, processes, args.seconds, args.requests)
            results["inprocess"][f"{route}/p{processes}"] = cell
            print(f"in-process {route:9s} {processes} proc   p50 {_fmt(cell['p50_ms'], 2):>8} ms  "
                  f"p99 {_fmt(cell['p99_ms'], 2):>8} ms  {_fmt(cell['qps'])} req/s  (n={cell['n']})", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        for workers in args.workers:
            server = Server(str(kb), workers, Path(scratch) / f"serve-{workers}.log")
            try:
                for route in args.routes:
                    for clients in args.clients:
                        cell = asyncio.run(_http_cell(server.url, route, clients, args.seconds, args.requests, images,
                                                     vectors, 2 * workers if clients == args.clients[0] else 0))
                        results["http"][f"{route}/w{workers}/c{clients}"] = cell
                        print(f"http       {route:9s} {workers} worker(s) {clients:2d} clients  p50 "
                              f"{_fmt(cell['p50_ms'], 2):>8} ms  p99 {_fmt(cell['p99_ms'], 2):>8} ms  "
                              f"{_fmt(cell['qps'])} req/s  (n={cell['n']}, 503s {cell['refused']})", flush=True)
                if workers == 1:
                    for route in args.overhead_routes:
                        cell = paired(str(kb), server.url, route, args.seconds, args.requests, server.proc.pid)
                        results.setdefault("overhead", {})[route] = cell
            finally:
                server.stop()
    print("\nservice overhead at 1 client, 1 worker (in-process and HTTP calls alternated in one loop):")
    for route, cell in results.get("overhead", {}).items():
        print(f"  {route:9s} in-process p50 {cell['inprocess_p50_ms']:.2f} ms, HTTP p50 {cell['http_p50_ms']:.2f} ms, "
              f"median paired difference {cell['overhead_p50_ms']:+.2f} ms, of which in the server outside the "
              f"search or ask {cell['in_server_p50_ms']:.2f} ms (n={cell['n']}); CPU per call in-process "
              f"{cell['inprocess_cpu_ms']:.2f} ms, per request in the server {cell['server_cpu_ms']:.2f} ms")
    top = max(args.clients)
    print(f"throughput at {top} clients / in-process with as many processes as workers:")
    for route in args.routes:
        for workers in args.workers:
            local = results["inprocess"].get(f"{route}/p{workers}")
            http = results["http"].get(f"{route}/w{workers}/c{top}")
            if local and http and local["qps"] and http["qps"]:
                ratio = http["qps"] / local["qps"]
                results.setdefault("throughput_ratio", {})[f"{route}/w{workers}"] = ratio
                print(f"  {route:9s} {workers} worker(s): {ratio:.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
