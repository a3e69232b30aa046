"""How a Milvus-backed knowledge base's open time, first ask and kira-process memory grow with its size.

Issue 33.2 asks that they do not grow with the collection (within 20%); docs/scale.md has the
figures. For each size it builds a Milvus Lite knowledge base of `n` chunks (23 per document, as the
default chunking gives on real photos: 1 document + 22 region/patch chunks, 64-d visual vectors from
seeded clusters, 384-d hashing text vectors of short descriptions), then, in a fresh child process
each time, opens it read-only, asks one text question with the ``dual_path`` and ``full`` variants
(wall and this process's CPU time of the first ask, and of a second), and reports the child's
resident memory after opening and its peak (/proc VmRSS, VmHWM). With a ``.db`` uri Milvus Lite runs
inside that process, so its memory and CPU count too.

With ``--server`` Milvus Lite runs as its own process (``python -m milvus_lite server`` on 127.0.0.1, the
knowledge base opened by http uri, as from a Milvus server): the memory and CPU reported are then kira's
process alone.

Usage: python -m benchmarks.suites.milvus_open_scale [--chunks 10000 100000] [--workdir DIR] [--server]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PER_DOC = 23
WORDS = ("red", "green", "round", "striped", "dark", "bright", "metal", "wooden", "cat", "car", "tree", "cup", "road",
         "sky", "water", "stone", "glass", "leaf", "wall", "door")


class SmallImageEncoder:
    """Pixels -> 64-d unit vectors (mean colour of an 8 x 8 grid's cells, first 64 values): a stand-in so the
    benchmark measures the store, not a model."""

    dim = 64

    def encode(self, images):
        out = []
        for im in images:
            a = np.asarray(im, np.float32)
            h, w = a.shape[:2]
            cells = [a[r * h // 8:(r + 1) * h // 8 or 1, c * w // 8:(c + 1) * w // 8 or 1].mean() for r in range(8)
                     for c in range(8)]
            v = np.asarray(cells, np.float32) - np.mean(cells)
            out.append(v / max(float(np.linalg.norm(v)), 1e-9))
        return np.stack(out) if out else np.zeros((0, self.dim), np.float32)


def stack():
    from kira.models.default.captioner import DefaultCaptioner
    from kira.models.default.saliency import SaliencyProposer
    from kira.models.hashing_text import HashingTextEncoder
    from kira.models.stack import ModelStack

    return ModelStack(image=SmallImageEncoder(), text=HashingTextEncoder(), regions=SaliencyProposer(),
                      captioner=DefaultCaptioner())


def build(path: Path, n_chunks: int, uri: str | None = None) -> float:
    """A Milvus Lite knowledge base of about `n_chunks` chunks at `path` (or named `path` at `uri`); returns the
    seconds it took."""
    from kira.knowledge_base.milvus.records import document_value
    from kira.knowledge_base.milvus.writes import ChunkRecord, reserve_ordinals, upsert_chunks
    from kira.knowledge_base import KnowledgeBase

    rng = np.random.default_rng(0)
    models = stack()
    t0 = time.perf_counter()
    kb = KnowledgeBase.create(path if uri is None else path.name, models=models, backend="milvus", uri=uri)
    storage = kb.external_writers()
    collection = storage.collection
    # Milvus Lite's Python engine compacts in the background: on a loaded machine one 512-row upsert has taken
    # past the default 10 s deadline at 10k+ rows, so the build waits longer (a measurement, not a setting kira uses)
    collection.config = dataclasses.replace(collection.config, timeout=300.0)
    docs = n_chunks // PER_DOC
    first = reserve_ordinals(collection, docs)
    centres = rng.standard_normal((16, 64)).astype(np.float32)
    for start in range(0, docs, 200):
        records, documents = [], {}
        part = range(start, min(docs, start + 200))
        words = [" ".join(rng.choice(WORDS, 6)) for _ in part]
        text = models.text.encode([f"a photo of {w}" for w in words])
        for k, d in enumerate(part):
            base = (first + d) * 1024 + 1
            captioned = d % 10 == 0
            for j in range(PER_DOC):
                v = centres[d % 16] + 0.4 * rng.standard_normal(64).astype(np.float32)
                records.append(ChunkRecord(
                    id=base + j, doc_id=f"img{d:07d}", doc_chunk=base, level="document" if j == 0 else "patch",
                    parent=-1 if j == 0 else base, box=None if j == 0 else (j, j, j + 16, j + 16),
                    description=f"a photo of {words[k]}" + ("" if j == 0 else f"; patch at x {j}-{j + 16}"),
                    groups={f"temporal:s{d // 5}": float(d % 5)} if d % 7 == 0 else {},
                    visual=v / np.linalg.norm(v), text=text[k]))
            documents[f"doc:img{d:07d}"] = document_value(
                source=None, caption=f"a photo of {words[k]}" if captioned else None, width=64, height=64,
                metadata={}, tags=(), provenance={"source": "(benchmark)"})
        upsert_chunks(collection, records)
        storage.records.put(documents)
        storage.note_external_writes()
    kb.commit()
    kb.close()
    return time.perf_counter() - t0


def _rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory (VmRSS) or its peak (VmHWM), MB, from /proc (``ru_maxrss`` would carry
    the forking parent's peak over)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(path: str, uri: str | None = None) -> None:
    """In this (fresh) process: open, first asks, peak RSS; prints one JSON line."""
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    rss0 = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    kb = KnowledgeBase.open(path if uri is None else Path(path).name, models=stack(), read_only=True, uri=uri)
    opened, opened_cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_open = _rss_mb()
    kira = Kira(kb)
    out = {"chunks": sum(kb.storage.rows.count_chunks().values()), "documents": len(kb), "open_s": round(opened, 2), "open_cpu_s": round(opened_cpu, 2),
           "rss_before_mb": round(rss0), "rss_open_mb": round(rss_open)}
    for variant in ("dual_path", "full"):
        t0, c0 = time.perf_counter(), time.process_time()
        kira.ask("a photo of a striped cat", variant=variant)
        out[f"first_{variant}_s"] = round(time.perf_counter() - t0, 2)
        out[f"first_{variant}_cpu_s"] = round(time.process_time() - c0, 2)  # this process's CPU: kira's side alone
        t0, c0 = time.perf_counter(), time.process_time()  # with --server (Milvus elsewhere)
        kira.ask("a photo of a wooden door", variant=variant)
        out[f"second_{variant}_s"] = round(time.perf_counter() - t0, 2)
        out[f"second_{variant}_cpu_s"] = round(time.process_time() - c0, 2)
    out["rss_peak_mb"] = round(_rss_mb("VmHWM"))
    kb.close()
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--workdir")
    parser.add_argument("--server", action="store_true", help="run Milvus Lite as its own process (module doc)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.uri)
        return
    import os

    print(f"load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        server, uri = (lite_server(Path(tmp) / "server") if args.server else (None, None))
        rows = []
        try:
            for n in args.chunks:
                rows.append(one_size(Path(tmp) / f"kb{n}", n, uri))
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=60)
        print(f"load average after: {os.getloadavg()}")
        keys = ["chunks", "documents", "build_s", "open_s", "open_cpu_s", "first_dual_path_s", "first_dual_path_cpu_s",
                "second_dual_path_s", "first_full_s", "first_full_cpu_s", "second_full_s", "rss_open_mb", "rss_peak_mb"]
        print("| " + " | ".join(keys) + " |")
        print("|" + " ---: |" * len(keys))
        for row in rows:
            print("| " + " | ".join(str(row.get(k, "")) for k in keys) + " |")


def lite_server(data_dir: Path) -> tuple[subprocess.Popen, str]:
    """Milvus Lite as its own process on a free 127.0.0.1 port; (process, http uri)."""
    from kira.knowledge_base.milvus.lite_server import serve_lite

    return serve_lite(data_dir, wait=120.0)


def one_size(path: Path, n: int, uri: str | None) -> dict:
    """Build a knowledge base of `n` chunks, measure it in a fresh process; the row printed and returned."""
    built = build(path, n, uri)
    command = [sys.executable, __file__, "--measure", str(path)] + (["--uri", uri] if uri else [])
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["build_s"] = round(built, 1)
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    main()
