"""The read side of a Milvus-backed knowledge base (a part of `MilvusKnowledgeBase`).

Each derived view the embedded knowledge base computes from SQLite comes from Milvus here, and
nothing is read whole into the kira process (a knowledge base made before kira stored its terms,
format 1, keeps the in-process views noted "format 1"):

* ``index(space)`` -> `kira.knowledge_base.milvus.index.MilvusIndex` (searches run in Milvus);
* ``level_ids`` -> a filter query ``level in [...]``; the array it returns, passed back as a
  search's ``allow``, becomes the filter ``level in [...]`` in Milvus (no id list is sent);
* ``document_chunk_of`` -> the ``doc_chunk`` field, fetched for the ids asked about;
* ``document_groups`` -> a marker that makes a `MilvusIndex` search group on ``doc_chunk``
  (Milvus's grouping search);
* ``compounds_for(doc_ids=, chunk_ids=)`` -> the groups the hits reach, fetched by filter
  (kira.knowledge_base.milvus.compounds); ``compounds()`` still reads every group (for callers that
  want them all);
* ``lexical`` -> `kira.knowledge_base.milvus.lexical.MilvusLexical`: Milvus's BM25 over kira's own
  terms, stored per chunk at write, so both backends rank alike; ``identifier_postings`` ->
  ``text_match`` on the stored name words (format 1: kira's `LexicalIndex` / `IdentifierIndex`
  built in this process from rows read from Milvus);
* ``bridge`` -> the text->image bridge the writer stored at commit
  (kira.knowledge_base.milvus.stored_views; format 1, or none stored: fitted here once per commit).
Every view is cached until a write through this object, a commit, or a `refresh` that finds
another process's commit.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from kira.knowledge_base.compound import CompoundQueries

T = TypeVar("T")
MAX_LEXICAL_CHARS = 20_000  # as kira.knowledge_base.kb_views


class MilvusViews(CompoundQueries):
    """Mixin of `MilvusKnowledgeBase` (module docstring). Needs ``store``, ``_collection``, ``_caches``,
    ``_indexes``, ``models`` and ``_records`` of the knowledge base."""

    def _cached(self, key: Any, build: Callable[[], T]) -> T:
        if key not in self._caches:
            self._caches[key] = build()
        return self._caches[key]

    def index(self, space: str) -> Any:
        """The `MilvusIndex` of `space` ('visual' or 'text'), or None before the first image."""
        if space not in ("visual", "text"):
            raise ValueError(f"space {space!r}: choose 'visual' or 'text'")
        return self._indexes.get(space)

    def level_ids(self, levels: Iterable[str]) -> np.ndarray:
        """Sorted int64 ids of chunks at `levels` (a Milvus filter query; cached per commit)."""
        key = ("levels", tuple(sorted(set(levels))))

        def build() -> np.ndarray:
            ids = self.store.chunk_ids(levels=key[1])
            for index in self._indexes.values():
                index.name_allow(ids, key[1])  # searched with it, the index sends `level in [...]`
            return ids

        return self._cached(key, build)

    def document_chunk_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document-level chunk id of each chunk id (-1 for unknown ids); fetched from Milvus for the ids
        not yet seen since the last commit."""
        ids = np.asarray(chunk_ids, dtype=np.int64).reshape(-1)
        known: dict[int, int] = self._cached("doc_chunk_of", dict)
        missing = [int(i) for i in np.unique(ids) if int(i) not in known]
        if missing:
            found = {int(r["id"]): int(r["doc_chunk"]) for r in self.store.query_ids(missing, ["doc_chunk"])}
            known.update({i: found.get(i, -1) for i in missing})
        return np.array([known[int(i)] for i in ids], dtype=np.int64)

    def document_groups(self) -> Any:
        """`groups=` for a search of this knowledge base's indexes: at most n chunks per document (Milvus
        groups on ``doc_chunk``)."""
        from kira.knowledge_base.milvus.collection_view import DocumentGroups

        def build() -> Any:
            count = (lambda: self._collection.count()) if self._collection is not None else (lambda: 0)
            return DocumentGroups(group_of=self.document_chunk_of, count=count)

        return self._cached("document_groups", build)

    def compounds(self) -> Any:
        """The compound groups of this commit (`kira.knowledge_base.compound.CompoundIndex`)."""
        from kira.knowledge_base.kb_views import build_compounds

        return self._cached("compounds", lambda: build_compounds(self))

    def _kira_terms(self) -> bool:
        """Whether the chunk collection stores kira's terms and name words (format 2; `lexical`)."""
        return self._collection is not None and self._collection.config.kira_terms

    def lexical(self) -> Any:
        """The lexical index of this commit: `MilvusLexical` (Milvus's BM25 over kira's stored terms), or for a
        format-1 collection kira's `LexicalIndex` built here over the document and passage rows read from
        Milvus (each with its description, doc id and metadata values, as the embedded one)."""
        if self._kira_terms():
            from kira.knowledge_base.milvus.lexical import MilvusLexical

            from kira.knowledge_base.milvus.schema import terms_name

            collection = self._collection
            return self._cached("lexical", lambda: MilvusLexical(
                collection.client, terms_name(collection.name), resolve_allow=self._indexes["text"].resolve_allow,
                timeout=collection.config.timeout))

        def build() -> Any:
            from kira.knowledge_base.lexical import LexicalIndex

            rows = sorted(self.store.query_all('level in ["document", "passage"]', ["description", "doc_id", "metadata"]),
                          key=lambda r: int(r["id"]))
            texts = []
            for r in rows:
                values = r["metadata"] if isinstance(r["metadata"], dict) else {}
                extra = " ".join(str(v) for _, v in sorted(values.items()))
                texts.append(f"{(r['description'] or '')[:MAX_LEXICAL_CHARS]} {r['doc_id'].replace('-', ' ')} "
                             f"{extra[:MAX_LEXICAL_CHARS]}")
            return LexicalIndex.build(np.array([int(r["id"]) for r in rows], dtype=np.int64), texts)

        return self._cached("lexical", build)

    def identifier_postings(self, text: str, *, allow: np.ndarray | None = None) -> Mapping[str, np.ndarray]:
        """{word of `text`: the document chunk ids (ascending) it names} (`CompoundQueries.identifier_postings`),
        one ``text_match`` query per word of `text` (format 1: from every document read once per commit)."""
        if self._kira_terms():
            return self.lexical().named(text, allow=allow)
        return super().identifier_postings(text, allow=allow)

    def compounds_for(self, *, doc_ids: Iterable[str] = (), chunk_ids: Iterable[int] = ()) -> Any:
        """The `CompoundIndex` of the groups these documents (doc ids, or document chunk ids) reach, fetched by
        filter (kira.knowledge_base.milvus.compounds); empty before the first image."""
        from kira.knowledge_base.compound import CompoundIndex
        from kira.knowledge_base.milvus.compounds import compounds_for

        if self._collection is None:
            return CompoundIndex.build([], {})
        from kira.knowledge_base.milvus.schema import terms_name

        col = self._collection
        rows = terms_name(col.name) if self._kira_terms() else col.name  # the terms collection: document rows only
        return compounds_for(col.client, rows, doc_ids=doc_ids, chunk_ids=chunk_ids, timeout=col.config.timeout)

    def documents(self, doc_ids: Iterable[str] | None = None) -> dict[str, Any]:
        return self.store.documents(doc_ids)

    # ---- rows a query reads by id (stages read these, never ``store``) -------------------
    def chunks(self, ids: Sequence[int] | np.ndarray) -> Mapping[int, Any]:
        """chunk id -> `ChunkRow` (id, doc_id, level, parent_id, box, description); unknown ids absent."""
        return self.store.chunks(ids)

    def provenances(self, doc_ids: Iterable[str]) -> Mapping[str, dict[str, Any]]:
        """doc id -> how the document was made (encoders, labels, text read)."""
        return self.store.provenances(doc_ids)

    def document_chunk_ids(self, doc_ids: Iterable[str]) -> Mapping[str, int]:
        """doc id -> its document-level chunk id (unknown ids absent)."""
        return self.store.document_chunk_ids(doc_ids)

    def piece_vectors(self, keys: Iterable[tuple[str, str]], dim: int) -> Mapping[tuple[str, str], np.ndarray]:
        """(doc id, piece text) -> its stored sentence vector of width `dim` (pieces not stored are absent)."""
        return self.store.piece_vectors(keys, dim)

    def has_document(self, doc_id: str) -> bool:
        return bool(self.store.has_document(doc_id))

    def generation(self) -> int:
        """How many commits the knowledge base has seen (any process's)."""
        return int(self.store.generation())

    def thumbnail_png(self, doc_id: str) -> bytes | None:
        """The PNG bytes of the document's stored preview, or None."""
        return self.store.thumbnail(doc_id)

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """`build()`'s value, computed once per commit (a caller's own views of the stored contents)."""
        return self._cached(f"memo:{key}", build)

    def visual_query(self, vectors: np.ndarray) -> np.ndarray:
        """Raw image-space query vectors -> the visual index's space (no adapter on this backend: as given)."""
        return np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)

    @property
    def adapter(self) -> Any:
        return None

    def set_adapter(self, adapter: Any) -> None:
        raise ValueError("a domain adapter is not supported on the Milvus backend yet; use an embedded knowledge base")

    def adapt(self, labels: Any, **options: Any) -> Any:
        """Refused: the Milvus backend cannot re-project its visual index through an adapter yet."""
        raise ValueError("few-shot adaptation (kb.adapt) is not supported on the Milvus backend yet: it may install "
                         "a domain adapter, which this backend cannot apply; adapt an embedded knowledge base")

    @property
    def adaptation(self) -> Any:
        """None: no adaptation on this backend (see `adapt`)."""
        return None

    def classify(self, doc_ids: Any) -> list[str]:
        """Refused, as `adapt`."""
        raise ValueError("few-shot classification (kb.classify) needs kb.adapt, which the Milvus backend does not "
                         "support yet; use an embedded knowledge base")

    def store_text_pieces(self, *, batch: int = 32) -> int:
        """Refused: on the Milvus backend each document's text pieces are written with it at ingest (local and
        Ray alike, ``piece:<doc id>`` rows, `GroundingConfig.pieces_at_ingest`); documents written without them
        are verified all the same (the verifier encodes the evidence it cites, same scores). Raises ValueError."""
        raise ValueError("store_text_pieces: not supported on the Milvus backend, whose ingest stores each document's "
                         "text pieces as it writes it (GroundingConfig.pieces_at_ingest); for documents without them "
                         "the verifier encodes the evidence it cites (same scores, more time per ask)")

    def bridge(self) -> Any:
        """The text->image bridge: the one the writer stored at its last commit (kira.knowledge_base.milvus.
        stored_views), None where it stored none (fewer than 2 captioned documents). A knowledge base with no
        stored bridge (format 1) has it fitted here on the captioned documents' vectors, once per commit."""
        def build() -> Any:
            from kira.knowledge_base.milvus.stored_views import load_bridge, stored_bridge_info
            from kira.models.bridge import TextToImageBridge

            if self._collection is None:
                return None
            if stored_bridge_info(self._records) is not None:
                return load_bridge(self._records)
            ids = self.store.captioned_document_ids()
            if len(ids) < 2:
                return None
            bridge = TextToImageBridge()
            bridge.fit(self.index("text").get_vectors(ids), self.index("visual").get_vectors(ids))
            return bridge

        return self._cached("bridge", build)

    def thumbnail(self, doc_id: str) -> np.ndarray | None:
        """The stored preview of a document's image (uint8 RGB), or None."""
        from kira.knowledge_base.kb_views import decode_thumbnail

        return decode_thumbnail(self.store.thumbnail(doc_id))

    def refresh(self) -> bool:
        """Pick up commits made by another process since this one looked; returns whether any were."""
        if self._records is None:
            return False
        generation = self.store.generation()
        if generation == self._seen_generation:
            return False
        if self._collection is None:
            self._attach_chunks()
        for index in self._indexes.values():
            index.forget_len()  # another process wrote: its count is not this collection object's to know
        self._caches.clear()
        self._seen_generation = generation
        return True

    def warm(self) -> dict[str, float]:
        """Pick up new commits, then build the views a query reads; returns {view: seconds}."""
        if self._records is None:
            raise ValueError(f"{self.name} is closed; open it again with KnowledgeBase.open before warming it")
        self.refresh()
        steps: dict[str, Callable[[], Any]] = {"lexical": self.lexical, "document_groups": self.document_groups}
        if not self._kira_terms():
            steps["compounds"] = self.compounds  # format 1 reads them whole; format 2 fetches them per hit
        if self._collection is not None and getattr(self.models, "image_text", None) is None:
            steps["bridge"] = self.bridge
        seconds = {}
        for name, build in steps.items():
            start = time.perf_counter()
            build()
            seconds[name] = time.perf_counter() - start
        return seconds

    def stats(self) -> dict[str, Any]:
        """What the knowledge base holds: documents, chunks per level, groups, index sizes, where it lives."""
        from kira.knowledge_base.model_fallbacks import recorded_fallbacks

        groups = self.store.groups()
        return {
            "path": str(self.path), "uri": self.uri, "collection": self.name, "backend": "milvus",
            "documents": self.store.count_documents(), "chunks": self.store.count_chunks(),
            "groups": {k: sum(1 for g in groups if g[0] == k) for k in ("temporal", "multiview")},
            "index_kind": self.settings.get("index", "flat"),
            "index_sizes": {s: len(ix) for s, ix in self._indexes.items()},
            "dims": json.loads(self._setting("dims", "null") or "null"),
            "generation": self.store.generation(), "adapter": None, "levels": list(self.levels),
            "models": self.built_with(), "profile": "" if self.profile.empty else (self.profile.name or "(unnamed)"),
            "model_fallbacks": recorded_fallbacks(self),
        }
