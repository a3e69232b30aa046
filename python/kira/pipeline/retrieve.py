"""Retrieval only: the retrieval stages of a variant, without critic, generation or verification.

`retrieve` (behind `Kira.retrieve`) runs the stages a variant runs before it selects evidence
(encode, both paths, expansion, fusion, feedback, hops, compound expansion, re-rank) over a
question, an image, or a raw query vector, inside the chunks that `levels` and the document
filters allow, and returns the fused list's first `top_k` chunks with their documents,
scores and boxes; with `per_document`, at most that many chunks of one document (so top-k is not
spent on an image and its own regions).

A raw vector is a query already in one index's space (the dimension that index holds): in
the visual space it takes the place of a query image's vector, in the text space that of the
question's sentence vector, and the stages treat it as they would treat those.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.pipeline.request import Request, retrieval_part, run_stages
from kira.query_state import QueryState, Stage, StageContext
from kira.retrieval.stages import EncodeQuery, ExpandQuery


class VectorError(ValueError):
    """A raw query vector that cannot be searched (wrong dimension, NaN or inf, no such space)."""


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk."""

    chunk_id: int
    doc_id: str
    level: str  # "document", "region", "patch" or "passage"
    score: float  # the fused score (the first hit scores 1)
    box: tuple[int, int, int, int] | None  # (x0, y0, x1, y1) in the document's pixels; None for a whole document
    paths: tuple[str, ...]  # which searches found it ("visual", "text", "lexical", "hop2", ...)
    cosine: float | None = None  # the best raw cosine over the paths that found it


@dataclass(frozen=True)
class Retrieval:
    """What `Kira.retrieve` returns: the hits best first, stage -> milliseconds, and what the stages noted."""

    hits: tuple[Hit, ...]
    timings: dict[str, float] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def chunk_ids(self) -> list[int]:
        return [h.chunk_id for h in self.hits]

    @property
    def doc_ids(self) -> list[str]:
        """The hits' documents, each once, in the order of their best hit."""
        return list(dict.fromkeys(h.doc_id for h in self.hits))


@dataclass(frozen=True)
class _GivenVector:
    """The query encoding, with the raw vector in place of the image's (visual) or the question's (text) vector."""

    inner: Stage
    space: str
    vector: np.ndarray
    name: str = "encode"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        state = self.inner.run(state, ctx)
        if state.query is None:
            raise ValueError(f"{self.inner!r} left no query encoding to put the given vector in")
        if self.space == "visual":
            query = dataclasses.replace(state.query, image_vector=self.vector)
        else:  # the question's vector, weighed as a question's (not as a description of the query image)
            query = dataclasses.replace(state.query, text_vector=self.vector, text_from_caption=False)
        return state.evolve(query=query)


def check_vector(kb: KnowledgeBaseLike, vector: npt.ArrayLike, space: str) -> np.ndarray:
    """`vector` as a unit float32 query for the `space` index; VectorError saying what to send otherwise."""
    if space not in ("visual", "text"):
        raise VectorError(f"space must be 'visual' or 'text'; got {space!r}")
    index = kb.index(space)
    if index is None:
        raise VectorError(f"the knowledge base has no {space} index to search with a vector; use the other space")
    v = np.asarray(vector, dtype=np.float32)
    if v.ndim != 1 or v.shape[0] != int(index.dim):
        raise VectorError(f"the vector has shape {v.shape} but the {space} index holds {int(index.dim)}-d vectors; "
                          f"send a flat list of exactly {int(index.dim)} numbers for space={space!r}")
    if not np.all(np.isfinite(v)):
        raise VectorError("the vector holds NaN or infinite values; send finite numbers only")
    norm = float(np.linalg.norm(v))
    if norm == 0.0:
        raise VectorError("the vector is all zeros and points nowhere; send a non-zero vector")
    return v / norm


def allowed_ids(kb: KnowledgeBaseLike, levels: Sequence[str] | None, metadata: Mapping[str, Any] | None,
                tags: Sequence[str], doc_ids: Sequence[str] | None) -> np.ndarray | None:
    """Sorted int64 ids of the chunks a search may return (None: all): at `levels`, of documents whose
    metadata holds every `metadata` item, that carry every tag in `tags`, and are among `doc_ids`.
    The documents are read once per commit (`KnowledgeBase.memo`)."""
    allow = kb.level_ids(levels) if levels is not None else None
    if not metadata and not tags and doc_ids is None:
        return allow
    docs = kb.memo("retrieve:documents", kb.documents)
    wanted_ids = None if doc_ids is None else set(doc_ids)
    wanted_tags = set(tags)
    matched = [d for d, row in docs.items()
               if (wanted_ids is None or d in wanted_ids)
               and all(key in row.metadata and row.metadata[key] == value for key, value in (metadata or {}).items())
               and wanted_tags <= set(row.tags)]
    ids = chunk_ids_of(kb, matched)
    return ids if allow is None else np.intersect1d(ids, allow)


def chunk_ids_of(kb: KnowledgeBaseLike, doc_ids: Sequence[str]) -> np.ndarray:
    """Every indexed chunk id of these documents, sorted."""
    if not doc_ids:
        return np.zeros(0, np.int64)
    doc_chunks = np.array(sorted(kb.document_chunk_ids(doc_ids).values()), dtype=np.int64)
    ids = [kb.index(s).ids() for s in ("visual", "text") if kb.index(s) is not None]
    if not ids:
        return np.zeros(0, np.int64)
    every = np.unique(np.concatenate(ids)).astype(np.int64)
    return every[np.isin(kb.document_chunk_of(every), doc_chunks)]


retrieval_stages = retrieval_part  # the name kira.pipeline.retrieve has always exported


def per_document_head(kb: KnowledgeBaseLike, ids: np.ndarray, top_k: int, per_document: int | None) -> np.ndarray:
    """The first `top_k` of the fused `ids`, at most `per_document` of any one document (None: no limit)."""
    if per_document is None:
        return ids[:top_k]
    docs = kb.document_chunk_of(ids)
    counts: dict[int, int] = {}
    keep: list[int] = []
    for n, d in enumerate(docs.tolist()):
        key = d if d >= 0 else -1 - n  # a chunk of no known document counts as its own
        if counts.get(key, 0) < per_document:
            counts[key] = counts.get(key, 0) + 1
            keep.append(n)
            if len(keep) >= top_k:
                break
    return ids[np.asarray(keep, dtype=np.int64)]


def retrieve(ctx: StageContext, stages: Sequence[Stage], request: Request, *, vector: np.ndarray | None, space: str,
             allow: np.ndarray | None, per_document: int | None = None) -> Retrieval:
    """Run the retrieval `stages` (`retrieval_part` of a list) over `request` and return the first `top_k` fused
    chunks, at most `per_document` of one document (None: any number).

    `vector` must already be checked (`check_vector`); `allow` the chunks the search may return.
    """
    run: list[Stage] = list(stages)
    if vector is not None:
        run = [_GivenVector(s, space, vector) if isinstance(s, EncodeQuery) else s for s in run]
        if not request.question:  # expansions are written from the question's words; a vector has none
            run = [s for s in run if not isinstance(s, ExpandQuery)]
    state = request.state(allow, {"notes": []})
    timings: dict[str, float] = {}
    if allow is None or len(allow):
        state, timings = run_stages(state, ctx, run)
    start = time.perf_counter()
    fused = state.fused
    head = per_document_head(ctx.kb, fused.ids, request.top_k, per_document)
    score_of = dict(zip(fused.ids.tolist(), fused.scores.tolist()))
    ids = head.tolist()
    rows = ctx.kb.chunks(ids)
    hits = tuple(
        Hit(int(cid), rows[cid].doc_id, rows[cid].level, float(score_of[cid]), rows[cid].box,
            tuple(fused.paths.get(cid, ())), fused.cosine.get(cid))
        for cid in ids if cid in rows
    )
    timings["hits"] = (time.perf_counter() - start) * 1000.0
    timings["total"] = sum(timings.values())
    trace = dict(state.trace)
    trace["stages"] = [s.name for s in run]
    return Retrieval(hits, timings, trace)


__all__ = ["Hit", "Retrieval", "VectorError", "allowed_ids", "check_vector", "chunk_ids_of", "per_document_head",
           "retrieval_stages", "retrieve"]
