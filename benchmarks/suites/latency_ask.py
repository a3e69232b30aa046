"""Per-stage latency of `Kira.ask` on a knowledge base of >= 100k chunks (synthetic vectors).

    python -m benchmarks.suites.latency_ask [--docs 10000] [--chunks-per-doc 10] [--index hnsw] [--queries 200]
                                            [--ef 64 128]
    python -m benchmarks.suites.latency_ask --docs 10000 --first 10   # first ask after a commit, cold vs warmed

With an HNSW index it also prints the recall@50 of the timed text search against an exact
search under the same cap (after the timed asks, so it does not affect them). `--ef` runs
the asks once per `RetrievalConfig.search_ef` value on the same knowledge base, each
question asked by every setting in turn (who goes first rotates), so the settings are
compared under the same machine load and the same cache warmth.

The knowledge base is written straight through the store (documents with a document
chunk and patch chunks, clustered random vectors: 256-d visual, 384-d text, as after a
CLIP projection head and MiniLM), so no model runs while building it. Queries use
"precomputed" encoders (a hash -> fixed random vector, microseconds), so the timings
measure kira's retrieval stages: search on both paths, expansion, fusion, residual
hops, compound expansion, the evidence pack, the critic (on precomputed vectors), the
template generator and the verifier. `encode` is reported but excluded from the
"retrieval" total, which is what the <= 5 ms p50 target is about. Stage times are wall
clock; `cpu_time` is the process CPU time of the whole ask (on a shared, loaded machine
wall-clock tails mostly measure the scheduler).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

VISUAL_DIM = 256
TEXT_DIM = 384
WORDS = ("lung", "opacity", "nodule", "resistor", "capacitor", "filter", "forest", "river", "urban", "tumour",
         "stroma", "gland", "effusion", "fracture", "amplifier", "crop", "flood", "necrosis", "normal", "cell")


def _vector(key: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


class PrecomputedText:
    """Text -> a fixed pseudo-random unit vector per string (stands in for a cached encoder)."""

    dim = TEXT_DIM

    def __init__(self) -> None:
        self.cache: dict[str, np.ndarray] = {}

    def encode(self, texts):
        out = np.empty((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            v = self.cache.get(t)
            if v is None:
                v = self.cache[t] = _vector(t, self.dim)
            out[i] = v
        return out


class PrecomputedImage:
    dim = VISUAL_DIM

    def encode(self, images):
        return np.stack([_vector(str(int(np.asarray(im).sum())), self.dim) for im in images])


class PrecomputedImageText(PrecomputedText):
    dim = VISUAL_DIM


class TemplateCaptioner:
    def caption(self, image, prompt=None):
        return "an image"

    def hypotheses(self, image, question, n):
        return [f"{question} finding", f"{question} region", f"signs of {question}"][:n]


@dataclass
class LatencyStack:
    image: object = field(default_factory=PrecomputedImage)
    text: object = field(default_factory=PrecomputedText)
    regions: object = None
    captioner: object = field(default_factory=TemplateCaptioner)
    reranker: object = None
    critic: object = None
    lm: object = None
    image_text: object = field(default_factory=PrecomputedImageText)
    notes: list = field(default_factory=list)
    providers: dict = field(default_factory=dict)


def build_synthetic_kb(path: Path, docs: int, per_doc: int, index: str, seed: int = 0):
    """A knowledge base of docs * per_doc chunks with clustered synthetic vectors, written via the store."""
    from kira.knowledge_base import KnowledgeBase

    rng = np.random.default_rng(seed)
    kb = KnowledgeBase.create(path, models=LatencyStack(), index=index, levels=("document", "patch"))
    kb._ensure_dims()
    centres_v = rng.normal(size=(64, VISUAL_DIM)).astype(np.float32)
    centres_t = rng.normal(size=(64, TEXT_DIM)).astype(np.float32)
    store = kb.store
    ids_all, vis_all, txt_all = [], [], []
    for d in range(docs):
        cluster = d % 64
        words = " ".join(WORDS[(d * 7 + k) % len(WORDS)] for k in range(3))
        store.insert_document(f"doc{d:06d}", source=None, caption=f"{words} case {d}", width=512, height=512,
                              metadata={}, tags=(), thumbnail=None, provenance={"source": "synthetic"})
        if d % 50 == 0 and d + 1 < docs:  # a temporal pair every 50 documents, for compound expansion
            store.add_to_group("temporal", f"seq{d}", f"doc{d:06d}", 0)
        vis = centres_v[cluster] + 0.7 * rng.normal(size=(per_doc, VISUAL_DIM)).astype(np.float32)
        txt = centres_t[cluster] + 0.7 * rng.normal(size=(per_doc, TEXT_DIM)).astype(np.float32)
        parent = None
        for c in range(per_doc):
            level = "document" if c == 0 else "patch"
            box = None if c == 0 else (0, 0, 64, 64)
            cid = store.insert_chunk(f"doc{d:06d}", level, parent_id=parent, box=box,
                                     description=f"{words} case {d}" + ("" if c == 0 else f"; patch {c}"),
                                     visual=vis[c], text=txt[c])
            parent = parent or cid
            ids_all.append(cid)
        vis_all.append(vis)
        txt_all.append(txt)
    for d in range(0, docs - 1, 50):
        store.add_to_group("temporal", f"seq{d}", f"doc{d + 1:06d}", 1)
    ids = np.array(ids_all, np.int64)
    t0 = time.perf_counter()
    kb.storage.spaces.add("visual", ids, np.concatenate(vis_all))
    kb.storage.spaces.add("text", ids, np.concatenate(txt_all))
    build_s = time.perf_counter() - t0
    kb.commit()
    return kb, build_s


def run(docs: int, per_doc: int, index: str, queries: int, top_k: int = 5, variant: str = "full",
        efs: tuple[int | None, ...] = (None,)) -> dict:
    """Build the synthetic KB, run `queries` asks per `search_ef` in `efs` (None: the config's
    default), interleaved question by question; per ef the per-stage p50/p99 (ms) and the text
    search's recall@50. With one ef the result is that run's dict; with several, {"runs": {ef: ...}}."""
    from dataclasses import replace

    from kira.pipeline import Kira

    logging.getLogger("kira.reasoning.critic").setLevel(logging.ERROR)  # synthetic text: the critic falls back often
    with tempfile.TemporaryDirectory(prefix="kira-latency-") as tmp:
        t0 = time.perf_counter()
        kb, index_s = build_synthetic_kb(Path(tmp) / "kb", docs, per_doc, index)
        build_s = time.perf_counter() - t0
        try:
            engines = {}
            for ef in efs:
                config = kb.config
                if ef is not None:
                    config = config.replace(retrieval=replace(config.retrieval, search_ef=ef))
                engines[config.retrieval.search_ef] = Kira(kb, config=config)
            rng = np.random.default_rng(1)
            questions = [" ".join(rng.choice(WORDS, 3)) for _ in range(queries)]
            for kira in engines.values():
                for q in questions[:5]:  # warm-up (concept-bank vectors, caches)
                    kira.ask(q, top_k=top_k, variant=variant)
            per_stage: dict[int, dict[str, list[float]]] = {ef: {} for ef in engines}
            order = list(engines.items())
            for n, q in enumerate(questions):
                # the settings take turns going first: a repeated question finds warm caches
                # (its encoding, the critic's), which must not favour one setting
                for ef, kira in order[n % len(order):] + order[: n % len(order)]:
                    cpu0 = time.process_time()
                    result = kira.ask(q, top_k=top_k, variant=variant)
                    cpu_ms = (time.process_time() - cpu0) * 1000.0
                    t = dict(result.timings)
                    t["cpu_time"] = cpu_ms  # CPU time of the whole ask: less sensitive to a busy machine than wall time
                    t["retrieval"] = t["total"] - t.get("encode", 0.0)
                    for k, v in t.items():
                        per_stage[ef].setdefault(k, []).append(v)
            chunks = sum(kb.store.count_chunks().values())
            recall = {ef: text_search_recall(kb, kira, questions) if index == "hnsw" else None
                      for ef, kira in engines.items()}
        finally:
            kb.close()
    runs = {}
    for ef, stages in per_stage.items():
        stats = {k: {"p50": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99))} for k, v in stages.items()}
        runs[ef] = {"chunks": chunks, "index": index, "queries": queries, "variant": variant, "build_s": build_s,
                    "index_add_s": index_s, "search_ef": ef, "stages": stats, "text_recall@50": recall[ef]}
    return next(iter(runs.values())) if len(runs) == 1 else {"runs": runs}


def first_ask_after_commit(docs: int, per_doc: int, index: str, rounds: int, top_k: int = 5) -> dict:
    """The first ask after a commit, cold (it builds the derived views itself) against warmed
    (`Kira.warm()` after the commit), in alternating rounds on one knowledge base; each round
    commits one new document first, which drops the views. Also the second ask (the steady
    state), what warm costs, what each one-document commit costs and what a read-only
    opener's `refresh()` then costs. Times in ms; `ratio` is cold / warm first-ask median."""
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    logging.getLogger("kira.reasoning.critic").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="kira-first-") as tmp:
        kb, _ = build_synthetic_kb(Path(tmp) / "kb", docs, per_doc, index)
        reader = KnowledgeBase.open(kb.path, models=LatencyStack(), read_only=True)  # another process's view
        try:
            kira = Kira(kb)
            rng = np.random.default_rng(2)
            kira.ask(" ".join(rng.choice(WORDS, 3)), top_k=top_k)  # imports and encoders: not what is measured
            times: dict[str, list[float]] = {"cold": [], "warm": [], "second": [], "warm_call": [], "commit": [],
                                             "reader_refresh": []}
            for n in range(2 * rounds):
                doc = f"late{n:04d}"
                kb.store.insert_document(doc, source=None, caption=f"late case {n}", width=512, height=512,
                                         metadata={}, tags=(), thumbnail=None, provenance={"source": "synthetic"})
                vis, txt = _vector(f"{doc}/v", VISUAL_DIM), _vector(f"{doc}/t", TEXT_DIM)
                cid = kb.store.insert_chunk(doc, "document", parent_id=None, box=None, description=f"late case {n}",
                                            visual=vis, text=txt)
                kb.storage.spaces.add("visual", np.array([cid], np.int64), vis[None])
                kb.storage.spaces.add("text", np.array([cid], np.int64), txt[None])
                t = time.perf_counter()
                kb.commit()  # 2 changed rows of 200k: the index files are not rewritten (KnowledgeBase.commit)
                times["commit"].append((time.perf_counter() - t) * 1000.0)
                t = time.perf_counter()
                reader.refresh()  # a reader picking the commit up: syncs its indexes with the database
                times["reader_refresh"].append((time.perf_counter() - t) * 1000.0)
                warmed = n % 2 == 1  # cold and warm rounds alternate: same load, same knowledge-base size
                if warmed:
                    t = time.perf_counter()
                    kira.warm()
                    times["warm_call"].append((time.perf_counter() - t) * 1000.0)
                question, second = (" ".join(rng.choice(WORDS, 3)) for _ in range(2))
                t = time.perf_counter()
                kira.ask(question, top_k=top_k)
                times["warm" if warmed else "cold"].append((time.perf_counter() - t) * 1000.0)
                t = time.perf_counter()
                kira.ask(second, top_k=top_k)
                times["second"].append((time.perf_counter() - t) * 1000.0)
            chunks = sum(kb.store.count_chunks().values())
        finally:
            reader.close()
            kb.close()
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"chunks": chunks, "index": index, "rounds": rounds, "median_ms": med,
            "ratio": med["cold"] / med["warm"] if med["warm"] > 0 else float("inf")}


def text_search_recall(kb, kira, questions: list[str]) -> dict[str, float]:
    """How accurate the timed text search is: recall@50 of path B's capped HNSW search (the
    questions and their expansions, as ask sends them) against an exact FlatIndex under the
    same cap, and the same for in-distribution queries (stored vectors plus small noise)."""
    from kira import _core
    from kira.retrieval.concepts import ConceptBank
    from kira.retrieval.encode import encode_query
    from kira.retrieval.expansion import expand_query

    cfg = kira.config.retrieval
    hnsw = kb.index("text")
    ids = hnsw.ids()
    vectors = np.ascontiguousarray(hnsw.get_vectors(ids))
    exact = _core.FlatIndex(vectors.shape[1])
    exact.add(ids, vectors)
    groups, k = kb.document_groups(), cfg.candidates
    asked = []
    for question in questions:
        q = encode_query(kb, kb.models, question, None)
        asked += [q.text_vector] + [v for _, v, _ in expand_query(kb.models, q, None, [ConceptBank('profile', kira.profile.concepts)] if kira.profile.concepts else [], cfg)]
    rng = np.random.default_rng(5)
    near = vectors[rng.choice(len(vectors), len(asked), replace=False)]
    near = near + 0.05 * rng.standard_normal(near.shape).astype(np.float32)

    def recall(queries: np.ndarray) -> float:
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        found, _ = hnsw.search(queries, k, groups=groups, per_group=cfg.text_chunks_per_document, ef=cfg.search_ef)
        truth, _ = exact.search(queries, k, groups=groups, per_group=cfg.text_chunks_per_document)
        return float(np.mean([len(set(a[a >= 0]) & set(b[b >= 0])) / max(int((b >= 0).sum()), 1)
                              for a, b in zip(found, truth)]))

    return {"asked": recall(np.stack(asked)), "in_distribution": recall(near)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--chunks-per-doc", type=int, default=10)
    parser.add_argument("--index", choices=("flat", "hnsw"), default="hnsw")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--variant", default="full")
    parser.add_argument("--ef", type=int, nargs="+", default=None,
                        help="RetrievalConfig.search_ef values to compare (default: the config's)")
    parser.add_argument("--first", type=int, default=0, metavar="ROUNDS",
                        help="instead: the first ask after a commit, cold vs after Kira.warm(), ROUNDS rounds each")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.first:
        first = first_ask_after_commit(args.docs, args.chunks_per_doc, args.index, args.first)
        if args.json:
            print(json.dumps(first, indent=2))
            return
        m = first["median_ms"]
        print(f"first ask after a commit: {first['chunks']:,} chunks, {first['index']} index, {first['rounds']} rounds each")
        print(f"cold {m['cold']:.1f} ms, after warm() {m['warm']:.1f} ms (cold/warm {first['ratio']:.1f}x); "
              f"steady-state ask {m['second']:.1f} ms; warm() itself {m['warm_call']:.0f} ms; "
              f"the one-document commit {m['commit']:.1f} ms; a reader's refresh after it {m['reader_refresh']:.1f} ms")
        return
    efs = tuple(dict.fromkeys(args.ef)) if args.ef else (None,)
    out = run(args.docs, args.chunks_per_doc, args.index, args.queries, variant=args.variant, efs=efs)
    runs = list(out["runs"].values()) if "runs" in out else [out]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    from kira import _core

    first = runs[0]
    print(f"kira ask latency: {first['chunks']:,} chunks, {first['index']} index, variant {first['variant']}, "
          f"{first['queries']} queries, simd {_core.simd_level()} (KB build {first['build_s']:.1f} s)")
    heads = "".join(f"{'p50 ef ' + str(r['search_ef']):>14}{'p99':>8}" for r in runs)
    print(f"{'stage':<15}{heads}")
    for stage in first["stages"]:
        print(f"{stage:<15}" + "".join(f"{r['stages'][stage]['p50']:>14.3f}{r['stages'][stage]['p99']:>8.3f}" for r in runs))
    for r in runs:
        if r["text_recall@50"]:
            rec = r["text_recall@50"]
            print(f"ef {r['search_ef']}: text search recall@50 vs exact (same cap): asked queries {rec['asked']:.3f}, "
                  f"in-distribution queries {rec['in_distribution']:.3f}")


if __name__ == "__main__":
    main()
