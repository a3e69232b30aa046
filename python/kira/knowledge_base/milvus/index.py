"""`MilvusIndex`: one vector field of a knowledge base's Milvus collection as a `kira.backends.VectorIndex`.

What the pipeline asks of an index maps onto Milvus's own features:
* ``allow`` (the chunk ids a query may return) -> the filter ``id in [...]``; the
  knowledge base's level and user-metadata filters are Milvus expressions too
  (``levels=``, ``where=``, `filter_expression`), so on this backend they need no
  allow list at all;
* ``groups`` / ``per_group`` (at most n chunks of one document) -> a grouping search
  on the ``doc_chunk`` field (``group_by_field``, ``group_size``);
* ``ef`` (HNSW) / ``nprobe`` (IVF) -> the search params of that index type.
Milvus returns cosine similarities for a COSINE index, so scores mean what the core's
indexes' scores mean. `hybrid_search` and `lexical_search` use Milvus's BM25 full-text
search over descriptions and its (unweighted) RRF ranker; kira's weighted fusion, hops
and compound expansion still run in the kira process over what the searches return.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Mapping, Sequence

import numpy as np

from kira.knowledge_base.milvus.schema import SPACES, MilvusCollection

log = logging.getLogger(__name__)

MAX_TOPK = 16384  # Milvus's limit on k (and on k x group_size for a grouping search)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return repr(value.item() if isinstance(value, np.generic) else value)
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"filter value {value!r}: use a str, int, float or bool (or a list of them)")


def filter_expression(*, space: str | None = None, allow: np.ndarray | Sequence[int] | None = None,
                      levels: Sequence[str] | None = None, where: Mapping[str, Any] | None = None,
                      expr: str = "") -> str:
    """A Milvus boolean expression for these restrictions, ANDed ("" for none).

    space: only chunks with a vector in it; allow: only these chunk ids; levels: only these
    chunk levels; where: user metadata key -> value (equality) or list of values (any of
    them), read from the ``metadata`` JSON field; expr: a raw Milvus expression added as is.
    """
    parts: list[str] = []
    if space is not None:
        if space not in SPACES:
            raise ValueError(f"space {space!r}: choose 'visual' or 'text'")
        parts.append(f"has_{space} == true")
    if allow is not None:
        ids = np.unique(np.asarray(allow, dtype=np.int64))
        parts.append("id in [" + ", ".join(str(int(i)) for i in ids) + "]")
    if levels is not None:
        parts.append("level in [" + ", ".join(_literal(str(level)) for level in levels) + "]")
    for key, value in (where or {}).items():
        field = f"metadata[{json.dumps(str(key))}]"
        if isinstance(value, (list, tuple, set, frozenset)):
            # "json_field[key] in [...]" is not parsed by Milvus Lite 3.2; an OR of equalities is, everywhere.
            alternatives = [f"{field} == {_literal(v)}" for v in value] or ["false"]
            parts.append("(" + " or ".join(alternatives) + ")")
        else:
            parts.append(f"{field} == {_literal(value)}")
    if expr:
        parts.append(f"({expr})")
    return " and ".join(parts)


class MilvusIndex:
    """The ``visual`` or ``text`` vectors of a `MilvusCollection` as a `VectorIndex`.

    Searches run on the server (or Milvus Lite); the object holds no vectors. ``groups``
    must be the knowledge base's document grouping (what `KnowledgeBase.document_groups`
    returns, the only grouping the pipeline passes): the collection stores each chunk's
    document chunk id in ``doc_chunk`` and Milvus groups on it. Thread safety: as the
    pymilvus client (safe to share between threads).
    """

    def __init__(self, collection: MilvusCollection, space: str, *, len_ttl: float = 5.0) -> None:
        if space not in SPACES:
            raise ValueError(f"space {space!r}: choose 'visual' or 'text'")
        self.collection, self.space = collection, space
        # len() is a count query (about 0.2-0.9 s on Milvus Lite at 5k rows) and the pipeline asks it per
        # search, so it is cached: refreshed after a write through this collection object, or after
        # len_ttl seconds (writes by other processes show within that time).
        self.len_ttl = float(len_ttl)
        self._len: tuple[int, int, float] | None = None  # (generation, count, when)
        self._named_allows: dict[int, tuple[np.ndarray, tuple[str, ...]]] = {}  # id(array) -> (array, levels)
        if collection.config.index == "HNSW":
            # `kira.backends.search_options` hands ``ef`` only to an index with a candidate list.
            self.ef_search = collection.config.ef_search

    def name_allow(self, ids: np.ndarray, levels: Sequence[str]) -> None:
        """Say that the array `ids` (this very object) is "every chunk at `levels`": a search given it as
        ``allow`` sends the filter ``level in [...]`` instead of an id list (the knowledge base's `level_ids`
        does this; an array computed from it, even with the same ids, is sent as ids)."""
        if len(self._named_allows) >= 16:
            self._named_allows.pop(next(iter(self._named_allows)))
        self._named_allows[id(ids)] = (ids, tuple(levels))

    def forget_len(self) -> None:
        """Count the rows again at the next ``len()`` (another process wrote to the collection)."""
        self._len = None

    @property
    def dim(self) -> int:
        return self.collection.config.dim(self.space)

    def __len__(self) -> int:
        now = time.monotonic()
        cached = self._len
        if cached is None or cached[0] != self.collection.generation or now - cached[2] > self.len_ttl:
            # All rows less those without a vector here (few: passages have no visual vector), not a count of
            # ``has_<space> == true``: Milvus Lite 3.2 answers a filtered count by reading every matching row
            # (50k rows: 14 s), an unfiltered one from its row count (0.1 s).
            without = self.collection.count(f"has_{self.space} == false")
            cached = (self.collection.generation, self.collection.count() - without, now)
            self._len = cached
        return cached[1]

    def resolve_allow(self, allow: np.ndarray | None) -> tuple[np.ndarray | None, list[str] | None]:
        """(ids or None, levels or None) a search sends for `allow`: a level array `name_allow` was told of
        becomes its levels (a filter, no id list); any other array stays ids."""
        named = self._named_allows.get(id(allow)) if allow is not None else None
        if named is not None and named[0] is allow:
            return None, list(named[1])
        return allow, None

    def search(self, queries: np.ndarray, k: int, *, allow: np.ndarray | None = None, groups: Any = None,
               per_group: int = 1, ef: int | None = None, nprobe: int | None = None,
               levels: Sequence[str] | None = None, where: Mapping[str, Any] | None = None,
               expr: str = "") -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), each (m, k), best first, -1 padded, for float32 (m, dim) `queries`.

        allow / levels / where / expr restrict the candidates (`filter_expression`);
        groups + per_group cap chunks per document; ef / nprobe tune HNSW / IVF.
        ValueError for a wrong shape or k outside 1..16384.
        """
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must be (m, {self.dim}) float32, got shape {q.shape}")
        if not 0 < k <= MAX_TOPK or (groups is not None and k * per_group > MAX_TOPK):
            raise ValueError(f"k={k} (x per_group={per_group}) must be in 1..{MAX_TOPK} for Milvus")
        m = q.shape[0]
        out_ids = np.full((m, k), -1, dtype=np.int64)
        out_scores = np.full((m, k), -1.0, dtype=np.float32)
        if m == 0 or (allow is not None and len(allow) == 0):
            return out_ids, out_scores
        if levels is None:
            allow, levels = self.resolve_allow(allow)  # "every chunk at these levels": a Milvus filter, no id list
        kwargs: dict[str, Any] = {}
        if groups is not None:
            kwargs = {"group_by_field": "doc_chunk", "group_size": int(per_group)}
        cfg = self.collection.config
        hits = self.collection.client.search(
            self.collection.name, data=q.tolist(), anns_field=self.space, limit=k,
            filter=filter_expression(space=self.space, allow=allow, levels=levels, where=where, expr=expr),
            output_fields=[], search_params=cfg.search_params(ef=ef, nprobe=nprobe),
            timeout=cfg.timeout, **kwargs)
        for row, row_hits in enumerate(hits):
            pairs = sorted(((float(h["distance"]), int(h["id"])) for h in row_hits), key=lambda p: (-p[0], p[1]))[:k]
            for j, (score, cid) in enumerate(pairs):
                out_ids[row, j], out_scores[row, j] = cid, score
        return out_ids, out_scores

    def ids(self) -> np.ndarray:
        """Every chunk id with a vector in this space, ascending (a query iterator: any number of rows)."""
        col = self.collection
        it = col.client.query_iterator(col.name, batch_size=4096, filter=filter_expression(space=self.space),
                                       output_fields=["id"])
        found: list[int] = []
        try:
            while True:
                rows = it.next()
                if not rows:
                    break
                found += [int(r["id"]) for r in rows]
        finally:
            it.close()
        return np.array(sorted(found), dtype=np.int64)

    def contains(self, id: int) -> bool:
        rows = self.collection.client.get(self.collection.name, ids=[int(id)], output_fields=[f"has_{self.space}"])
        return bool(rows) and bool(rows[0][f"has_{self.space}"])

    def get_vectors(self, ids: np.ndarray) -> np.ndarray:
        """The stored unit vectors of `ids`, (n, dim) float32, in the order given; ValueError for an id not here."""
        wanted = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not len(wanted):
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = self.collection.client.get(self.collection.name, ids=[int(i) for i in np.unique(wanted)],
                                          output_fields=[self.space, f"has_{self.space}"])
        found = {int(r["id"]): r[self.space] for r in rows if r[f"has_{self.space}"]}
        missing = [int(i) for i in wanted if int(i) not in found]
        if missing:
            raise ValueError(f"no {self.space} vector for chunk id(s) {missing[:10]} in {self.collection.name!r}")
        return np.asarray([found[int(i)] for i in wanted], dtype=np.float32)


def lexical_search(collection: MilvusCollection, text: str, k: int, *, allow: np.ndarray | None = None,
                   levels: Sequence[str] | None = None, where: Mapping[str, Any] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Milvus's BM25 full-text search of `text` over chunk descriptions: (ids, scores) best first.

    Scores are BM25 as the server reports them (Milvus Lite 3.2 reports them negated; only the
    order is meant to be used, as kira's fusion does). ValueError where the collection was made
    without ``bm25``.
    """
    if not collection.config.bm25:
        raise ValueError(f"collection {collection.name!r} has no BM25 field; create it with MilvusConfig(bm25=True)")
    hits = collection.client.search(
        collection.name, data=[text], anns_field="description_bm25", limit=int(k), output_fields=[],
        filter=filter_expression(allow=allow, levels=levels, where=where), search_params={"metric_type": "BM25"})[0]
    return (np.asarray([int(h["id"]) for h in hits], dtype=np.int64),
            np.asarray([float(h["distance"]) for h in hits], dtype=np.float32))


def hybrid_search(collection: MilvusCollection, text: str, vector: np.ndarray, space: str, k: int, *,
                  rrf_k: int = 60, candidates: int | None = None, levels: Sequence[str] | None = None,
                  where: Mapping[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One server-side hybrid search: BM25 over descriptions and `vector` against `space`, fused by
    Milvus's RRF ranker (score sum of 1 / (rrf_k + rank), unweighted). Returns (ids, RRF scores).

    Unlike kira's weighted RRF (visual alpha 0.6) this weighs both lists equally; use it where a
    single round trip matters more than the paper's weights.
    """
    pm = __import__("pymilvus")
    if not collection.config.bm25:
        raise ValueError(f"collection {collection.name!r} has no BM25 field; create it with MilvusConfig(bm25=True)")
    n = int(candidates or k)
    dense_filter = filter_expression(space=space, levels=levels, where=where)
    text_filter = filter_expression(levels=levels, where=where)
    requests = [
        pm.AnnSearchRequest(data=[np.asarray(vector, np.float32).reshape(-1).tolist()], anns_field=space,
                            param=collection.config.search_params(), limit=n, expr=dense_filter or None),
        pm.AnnSearchRequest(data=[text], anns_field="description_bm25", param={"metric_type": "BM25"}, limit=n,
                            expr=text_filter or None),
    ]
    hits = collection.client.hybrid_search(collection.name, requests, pm.RRFRanker(rrf_k), limit=int(k),
                                           output_fields=[])[0]
    return (np.asarray([int(h["id"]) for h in hits], dtype=np.int64),
            np.asarray([float(h["distance"]) for h in hits], dtype=np.float32))


class DocumentGroups:
    """`groups=` for a `MilvusIndex` search: "at most n chunks per document", done by Milvus on ``doc_chunk``.

    Given a knowledge base's `document_chunk_of` and a chunk count, it also reads like the core's
    `GroupMap` (``len``, ``group_of``), without holding the map in this process.
    """

    def __init__(self, group_of: Any = None, count: Any = None) -> None:
        self._group_of, self._count = group_of, count

    def __len__(self) -> int:
        """Chunks that have a group (every chunk of the knowledge base)."""
        if self._count is None:
            raise TypeError("this DocumentGroups was made without a chunk count")
        return int(self._count())

    def group_of(self, ids: np.ndarray) -> np.ndarray:
        """The document chunk id of each chunk id (-1 for unknown ids)."""
        if self._group_of is None:
            raise TypeError("this DocumentGroups was made without a chunk -> document map")
        documents: np.ndarray = self._group_of(np.asarray(ids, dtype=np.int64))
        return documents

    def __repr__(self) -> str:
        return "DocumentGroups(field='doc_chunk')"
