"""`MilvusStorage`: a knowledge base whose chunks, vectors, documents and settings live in Milvus.

Where it lives is `kira.knowledge_base.milvus.location`'s: the Milvus Lite file ``<dir>/milvus.db``,
or the collection named after the knowledge base at a uri, from which any process on any machine
opens it. Two collections hold it: ``<name>`` (every chunk, kira.knowledge_base.milvus.schema;
created at the first write, when the model stack fixes the dimensions) and ``<name>__kb`` (settings,
document records, thumbnails, text pieces: kira.knowledge_base.milvus.records).

Writes go to Milvus at once, batched and idempotent by chunk id (kira.knowledge_base.milvus.kb_writes);
`commit` flushes them and bumps the generation, which other processes' `refresh` looks at. Milvus
has no transactions: `rollback` cannot undo writes already sent (it says so in the log). One writer
at a time per knowledge base, on any machine: a lease row in ``<name>__kb``, taken at open for writing and
checked before every write and commit (kira.knowledge_base.milvus.lease).
The level filter and the per-document grouping of a search run in Milvus, and so do the lexical
search, the names a question uses and the compound groups of a query's hits (the optional
capabilities of kira.knowledge_base.storage, in the base class kira.knowledge_base.milvus.query_views);
the bridge is stored at commit (kira.knowledge_base.milvus.stored_views). Nothing is read whole into
the process for a query.
A server that stops answering during a write raises `MilvusUnavailable` (kira.knowledge_base.milvus.faults).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from kira.knowledge_base.batch import WriteBatch
from kira.knowledge_base.milvus.location import LITE_FILE, target
from kira.knowledge_base.milvus.query_views import MilvusQueryViews
from kira.knowledge_base.milvus.records import KbRecords, piece_value
from kira.knowledge_base.milvus.rows import MilvusRows
from kira.knowledge_base.milvus.stored_views import StoredBridge

log = logging.getLogger(__name__)
FORMAT = 2  # 2: <name>__terms holds kira's terms, names and groups (milvus.lexical); the bridge is stored
KIRA_KEYS = {"index_kind": "index", "levels": "levels", "caption_children": "caption_children"}
"""Settings kept inside the ``setting:kira`` row (as every Milvus knowledge base since format 1 has them)."""


class MilvusStorage(MilvusQueryViews, StoredBridge):
    """The `kira.knowledge_base.storage.Storage` of a Milvus knowledge base (module docstring)."""

    kind = "milvus"

    def __init__(self, uri: str, name: str, client: Any, *, path: Path | None, token: str, read_only: bool) -> None:
        self.uri, self.name, self.token = uri, name, token
        self.path = path if path is not None else Path(name)
        self.local = path
        self.read_only = read_only
        self.client = client
        self.records: Any = KbRecords(client, name)
        self.rows = self.store = MilvusRows(self)
        self.collection: Any = None
        self._indexes: dict[str, Any] = {}
        self.settings: dict[str, Any] = {}
        self._seen_generation = 0
        self._changed = False  # written since the last generation bump
        self._unflushed = False  # written since the last flush
        self._doc_chunk: dict[int, int] = {}  # chunk id -> document chunk id, of the ids asked about since a commit
        self._lexical: Any = None  # this commit's lexical index (MilvusLexical, or format 1: an in-process one)
        self._names: Any = None  # format 1: this commit's IdentifierIndex
        self.lease: Any = None  # the WriterLease of a writer (kira.knowledge_base.milvus.lease); None read-only

    @property
    def where(self) -> str:
        return f"{self.name} at {self.uri}"

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def create(cls, path_or_name: str | os.PathLike[str], settings: Mapping[str, str], *, uri: str | None = None,
               token: str = "") -> MilvusStorage:
        """A new, empty knowledge base with `settings`, open for writing. ValueError where it (or a non-empty
        local directory) exists; ImportError naming ``kira[milvus]``; ConnectionError naming the uri."""
        from kira.knowledge_base.milvus.connection import connect

        uri, name, local = target(path_or_name, uri)
        if local is not None:
            if local.exists() and (not local.is_dir() or any(local.iterdir())):
                raise ValueError(f"{local} exists and is not an empty directory; use KnowledgeBase.open or pick a new path")
            local.mkdir(parents=True, exist_ok=True)
        storage = cls(uri, name, connect(uri, token), path=local, token=token, read_only=False)
        try:
            if storage.records.exists() or storage.client.has_collection(name):
                raise ValueError(f"a knowledge base {name!r} already exists at {uri!r}; open it with "
                                 "KnowledgeBase.open(..., backend='milvus') or pick another name")
            storage.records.create()
            storage._take_lease()
            storage.settings = {"format": FORMAT}
            storage.records.put({"setting:kira": json.dumps(storage.settings), "setting:generation": "0"})
            storage.put_settings(settings)
            storage._changed = False
        except BaseException:
            storage.close()
            raise
        return storage

    @classmethod
    def exists(cls, path_or_name: str | os.PathLike[str], *, uri: str | None = None, token: str = "") -> bool:
        """Whether a knowledge base of this name is at `uri` (or, without one, in the directory)."""
        from kira.knowledge_base.milvus.connection import close_client, connect

        uri, name, local = target(path_or_name, uri)
        if local is not None:
            return (local / LITE_FILE).exists()
        client = connect(uri, token)
        try:
            return KbRecords(client, name).exists()
        finally:
            close_client(client)

    @classmethod
    def open(cls, path_or_name: str | os.PathLike[str], *, uri: str | None = None, token: str = "",
             read_only: bool = False) -> MilvusStorage:
        """The knowledge base named `path_or_name` (checked before anything is written: ValueError where there
        is none, where it is not a kira knowledge base or was written by a newer kira; for writing,
        `WriterLeaseHeld`, a ValueError naming the writer, where another one holds it: milvus.lease)."""
        from kira.knowledge_base.milvus.orphans import recover
        from kira.knowledge_base.milvus.connection import connect

        uri, name, local = target(path_or_name, uri)
        if local is not None and not (local / LITE_FILE).exists():
            raise ValueError(f"{local} is not a Milvus-backed kira knowledge base (no {LITE_FILE}); create one with "
                             "KnowledgeBase.create(..., backend='milvus')")
        storage = cls(uri, name, connect(uri, token), path=local, token=token, read_only=read_only)
        try:
            if not storage.records.exists():
                raise ValueError(f"no kira knowledge base {name!r} at {uri!r} (no collection {storage.records.name!r}); "
                                 "create it with KnowledgeBase.create(..., backend='milvus')")
            storage.records.load()
            stored = storage.records.get_one("setting:kira")
            if stored is None:
                raise ValueError(f"{storage.records.name!r} at {uri!r} holds no kira settings; it is not a kira "
                                 "knowledge base")
            storage.settings = json.loads(stored)
            if int(storage.settings.get("format", 0)) > FORMAT:
                raise ValueError(f"knowledge base {name!r} was written by a newer kira (format "
                                 f"{storage.settings['format']}); upgrade kira")
            if not read_only:
                storage._take_lease()  # WriterLeaseHeld (a ValueError) where another writer holds it
            dims = json.loads(storage.get_setting("dims", "null") or "null")
            if dims:
                storage.open_spaces(dims, create=False)
            storage._seen_generation = storage.generation()
            recover(storage)  # chunks a stopped writer left without a document record (milvus.orphans)
        except BaseException:
            storage.close()
            raise
        return storage

    # ---- the writer lease (kira.knowledge_base.milvus.lease) ---------------------------------
    def _take_lease(self) -> None:
        from kira.knowledge_base.milvus.lease import WriterLease

        self.lease = WriterLease.take(self.records, self.where, lite=self.uri.endswith(".db"))

    def _keep_lease(self, *, renew: bool = False) -> None:
        """Before a write or commit: WriterLeaseLost where another writer took this one's lease over."""
        if self.lease is not None:
            self.lease.keep(renew=renew)

    # ---- settings ---------------------------------------------------------------------
    def get_setting(self, key: str, default: str | None = None) -> str | None:
        if key in KIRA_KEYS:
            if KIRA_KEYS[key] not in self.settings:
                return default
            value = self.settings[KIRA_KEYS[key]]
            spelled: dict[str, Callable[[], str]] = {"levels": lambda: json.dumps(value),
                                                     "caption_children": lambda: "1" if value else "0"}
            return spelled.get(key, lambda: str(value))()
        setting: str | None = self.records.get_one(f"setting:{key}", default)
        return setting

    def put_settings(self, values: Mapping[str, str]) -> None:
        self._keep_lease()
        rows = {f"setting:{k}": v for k, v in values.items() if k not in KIRA_KEYS}
        if any(k in KIRA_KEYS for k in values):
            for key, value in values.items():
                if key in KIRA_KEYS:
                    self.settings[KIRA_KEYS[key]] = (json.loads(value) if key == "levels" else
                                                     value == "1" if key == "caption_children" else value)
            rows["setting:kira"] = json.dumps(self.settings)
        self.records.put(rows)
        self._changed = True

    def generation(self) -> int:
        return self.rows.generation()

    def describe(self) -> dict[str, Any]:
        return {"path": str(self.path), "uri": self.uri, "collection": self.name, "backend": self.kind,
                "index_kind": self.settings.get("index", "flat"),
                "index_sizes": {s: len(ix) for s, ix in self._indexes.items()},
                "dims": json.loads(self.get_setting("dims", "null") or "null")}

    # ---- the chunk collection -----------------------------------------------------------
    def open_spaces(self, dims: Mapping[str, int], *, create: bool) -> None:
        from kira.knowledge_base.milvus.index import MilvusIndex
        from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig

        config = MilvusConfig(uri=self.uri, collection=self.name, visual_dim=int(dims["visual"]),
                              text_dim=int(dims["text"]), token=self.token,
                              index="HNSW" if self.settings.get("index") == "hnsw" else "FLAT",
                              # format 1 has no terms; one cut short while upgrading is format 1 until it is whole
                              kira_terms=int(self.settings.get("format", 1)) >= 2)
        if create:
            MilvusCollection.attach(self.client, config, create=True)
        self.collection = MilvusCollection.attach(self.client, config, create=False)
        self._indexes = {s: MilvusIndex(self.collection, s) for s in ("visual", "text")}

    def index(self, space: str) -> Any:
        if space not in ("visual", "text"):
            raise ValueError(f"space {space!r}: choose 'visual' or 'text'")
        return self._indexes.get(space)

    @contextmanager
    def writing(self, doing: str) -> Iterator[None]:
        """A context turning "the server stopped answering" into one `MilvusUnavailable` that names what is kept
        (kira.knowledge_base.milvus.faults); the writer lease is then checked again at the next write."""
        from kira.knowledge_base.milvus.faults import MilvusUnavailable, writing_to

        try:
            with writing_to(self.uri, self.name, self._seen_generation, doing):
                yield
        except MilvusUnavailable:
            if self.lease is not None:
                self.lease.abandon()
            raise

    # ---- writing ----------------------------------------------------------------------
    def write(self, batch: WriteBatch) -> None:
        """Reserve the batch's ordinals (only once it converted: no ids wasted on errors) and write it."""
        from kira.knowledge_base.milvus.kb_writes import CHUNKS_PER_IMAGE, milvus_rows, write_items
        from kira.knowledge_base.milvus.writes import reserve_ordinals

        rows = milvus_rows(batch, list(range(len(batch.documents))))
        self.records.check(rows.documents)
        with self.writing("adding images to"):
            self._keep_lease()
            shift = reserve_ordinals(self.collection, len(batch.documents)) * CHUNKS_PER_IMAGE
            for r in rows.records:
                r.id += shift
                r.doc_chunk += shift
                if r.parent >= 0:
                    r.parent += shift
            write_items(self.collection, self.records, rows)
        self.note_external_writes()

    def note_external_writes(self) -> None:
        """Say that chunks were written (by this process or a Ray job's actors): the next commit flushes them
        and publishes the new generation. Renews the writer lease (a Ray driver calls this per batch it hears of)."""
        self._keep_lease()
        self._changed = self._unflushed = True
        self._forget()

    def write_pieces(self, pieces: Mapping[str, tuple[Sequence[str], np.ndarray]]) -> None:
        self._keep_lease()
        rows = {f"piece:{d}": piece_value(list(texts), vectors) for d, (texts, vectors) in pieces.items()}
        self.records.put({k: v for k, v in rows.items() if v is not None})

    def remove(self, doc_id: str) -> bool:
        """Remove a document and all its chunks (every chunk with its ``doc_id``), also chunks a stopped writer
        left without the document's record."""
        from kira.knowledge_base.milvus.orphans import orphaned
        from kira.knowledge_base.milvus.writes import delete_documents

        if not self.rows.has_document(doc_id) and not orphaned(self, [doc_id]):
            return False
        with self.writing("removing a document from"):
            self._keep_lease()
            if self.collection is not None:
                delete_documents(self.collection, [doc_id])
            self.records.delete([f"doc:{doc_id}", f"thumb:{doc_id}", f"piece:{doc_id}"])
        self.note_external_writes()
        return True

    def commit(self, *, checkpoint: bool | None = None) -> int:
        """Flush the chunks written since the last flush (Milvus seals them into indexed segments; not with
        `checkpoint` False) and, where anything changed, bump the generation other processes' `refresh` reads.
        A writer that lost its lease raises WriterLeaseLost and commits nothing (kira.knowledge_base.milvus.lease)."""
        with self.writing("committing"):
            if self._changed or self._unflushed:
                self._keep_lease(renew=True)
            if checkpoint is not False and self._unflushed and self.collection is not None:
                self.collection.flush()
                self._unflushed = False
            if not self._changed:
                return self._seen_generation
            generation = self.generation() + 1
            self.records.put({"setting:generation": str(generation)})
            self.records.client.flush(self.records.name)
        self._seen_generation = generation
        self._changed = False
        return generation

    def rollback(self) -> None:
        if not self.read_only and (self._changed or self._unflushed):
            log.warning("%s: rollback on the Milvus backend cannot undo writes already sent to %s", self.name, self.uri)

    def refresh(self) -> bool:
        if self.records is None:
            return False
        generation = self.generation()
        if generation == self._seen_generation:
            return False
        if self.collection is None:
            dims = json.loads(self.get_setting("dims", "null") or "null")
            if dims:
                self.open_spaces(dims, create=False)
        for index in self._indexes.values():
            index.forget_len()  # another process wrote: its count is not this collection object's to know
        self._forget()
        self._seen_generation = generation
        return True

    def close(self) -> None:
        """Close the client; the last client of a Milvus Lite file in this process releases the file, so
        another process can open the knowledge base next. Safe to call twice."""
        from kira.knowledge_base.milvus.connection import close_client

        if self.records is None:
            return
        try:
            if self.lease is not None:
                self.lease.release()
        finally:
            close_client(self.client)
            self.records, self.collection, self._indexes = None, None, {}

    def drop(self) -> None:
        """Delete the knowledge base from Milvus (its chunk, terms, settings and ordinal collections), and close."""
        from kira.knowledge_base.milvus.connection import close_client

        self._keep_lease()
        if self.lease is not None:
            self.lease.stop()  # no heartbeat into the collections being dropped
        for name in (self.name, f"{self.name}__meta", f"{self.name}__terms", self.records.name):
            if self.client.has_collection(name):
                self.client.drop_collection(name)
        close_client(self.client)
        self.records, self.collection, self._indexes = None, None, {}


__all__ = ["FORMAT", "MilvusStorage"]
