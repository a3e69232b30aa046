"""Retrieval only (POST /search): text, image or a raw vector against the knowledge base's indexes.

Text searches the text index with the stack's sentence encoder and the visual index
through the stack's image-space text tower, else the knowledge base's fitted bridge; an
image searches the visual index; a raw vector searches the index it names. With more than
one ranking they are fused by the core's weighted RRF (alpha = 0.6 visual). This is a small
stand-in for the pipeline's own retrieval, kept to the knowledge base's public API.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from kira import _core
from kira.serve.errors import ApiError


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def _search(index: Any, query: np.ndarray, k: int, allow: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if index is None or len(index) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    ids, scores = index.search(np.ascontiguousarray(query[None, :], dtype=np.float32), min(k, len(index)), allow=allow)
    keep = ids[0] >= 0
    return ids[0][keep].astype(np.int64), scores[0][keep].astype(np.float32)


def allowed_ids(kb: Any, levels: Sequence[str] | None, filters: Any) -> np.ndarray | None:
    """Chunk ids a search may return (sorted int64), or None for all. Filters are cached per commit."""
    allow = kb.level_ids(levels) if levels is not None else None
    if filters is None or not (filters.metadata or filters.tags or filters.doc_ids is not None):
        return allow
    docs = kb.memo("serve:documents", kb.documents)
    wanted_tags = set(filters.tags)
    matched = [
        d for d, row in docs.items()
        if (filters.doc_ids is None or d in filters.doc_ids)
        and all(row.metadata.get(key) == value for key, value in filters.metadata.items())
        and wanted_tags <= set(row.tags)
    ]
    ids = _chunk_ids_of(kb, matched)
    return ids if allow is None else np.intersect1d(ids, allow)


def _chunk_ids_of(kb: Any, doc_ids: Sequence[str]) -> np.ndarray:
    """Every chunk id of these documents (sorted), from the indexes' id lists and the chunk -> document map."""
    if not doc_ids:
        return np.zeros(0, np.int64)
    doc_chunks = np.array(sorted(kb.store.document_chunk_ids(doc_ids).values()), dtype=np.int64)
    ids = [kb.index(s).ids() for s in ("visual", "text") if kb.index(s) is not None]
    if not ids:
        return np.zeros(0, np.int64)
    every = np.unique(np.concatenate(ids)).astype(np.int64)
    return every[np.isin(kb.document_chunk_of(every), doc_chunks)]


def search(kb: Any, *, text: str | None, pixels: np.ndarray | None, vector: np.ndarray | None, space: str,
           top_k: int, allow: np.ndarray | None) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The `top_k` best chunks for the query, as dicts (chunk_id, doc_id, level, score, box, paths), and timings (ms).

    Raises ApiError 422 for a vector of the wrong dimension or with NaN/inf values.
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    stack = kb.models
    cfg = kb.config.retrieval
    queries: list[tuple[str, str, np.ndarray, float]] = []  # (path, space, unit vector, weight)
    if vector is not None:
        if not np.all(np.isfinite(vector)):
            raise ApiError(422, "bad_vector", "vector holds NaN or infinite values", "send finite numbers only")
        index = kb.index(space)
        dim = int(index.dim) if index is not None else None
        if dim is not None and vector.shape != (dim,):
            raise ApiError(422, "bad_vector", f"vector has {vector.size} values but the {space} index holds {dim}-d vectors",
                           f"send a vector of exactly {dim} numbers for space={space!r}")
        queries.append((space, space, _unit(vector), 1.0))
    if pixels is not None and kb.index("visual") is not None:
        raw = np.asarray(stack.image.encode([pixels]), dtype=np.float32)
        queries.append(("visual", "visual", _unit(kb.visual_query(raw)[0]), cfg.visual_weight))
    if text and kb.index("text") is not None:
        tv = _unit(np.asarray(stack.text.encode([text]), dtype=np.float32)[0])
        queries.append(("text", "text", tv, cfg.text_weight))
        image_text = getattr(stack, "image_text", None)
        raw = None
        if image_text is not None:
            raw = np.asarray(image_text.encode([text]), dtype=np.float32)
            weight = cfg.visual_weight
        elif kb.bridge() is not None:
            raw = np.asarray(kb.bridge().encode_vectors(tv[None, :]), dtype=np.float32)
            weight = cfg.visual_weight * cfg.bridge_weight_scale
        if raw is not None:
            queries.append(("visual", "visual", _unit(kb.visual_query(raw)[0]), weight))
    timings["encode"] = (time.perf_counter() - t0) * 1000
    t1 = time.perf_counter()
    k = max(top_k, cfg.candidates) if len(queries) > 1 else top_k
    found = [(path, weight, *_search(kb.index(sp), q, k, allow)) for path, sp, q, weight in queries]
    timings["search"] = (time.perf_counter() - t1) * 1000
    t2 = time.perf_counter()
    paths: dict[int, list[str]] = {}
    for path, _w, ids, _s in found:
        for cid in ids.tolist():
            paths.setdefault(cid, [])
            if path not in paths[cid]:
                paths[cid].append(path)
    if len(found) == 1:
        ids, scores = found[0][2][:top_k], found[0][3][:top_k]
    elif found:
        ids, fused = _core.rrf_fuse([f[2] for f in found], [f[1] for f in found], float(cfg.rrf_k), limit=top_k)
        scores = (fused / fused[0]).astype(np.float32) if len(fused) else fused
    else:
        ids, scores = np.zeros(0, np.int64), np.zeros(0, np.float32)
    rows = kb.store.chunks(ids)
    hits = [
        {"chunk_id": int(cid), "doc_id": rows[cid].doc_id, "level": rows[cid].level, "score": float(score),
         "box": rows[cid].box, "paths": paths.get(int(cid), [])}
        for cid, score in zip(ids.tolist(), np.asarray(scores).tolist()) if cid in rows
    ]
    timings["fuse"] = (time.perf_counter() - t2) * 1000
    return hits, timings
