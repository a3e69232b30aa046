"""`MilvusKnowledgeBase`: a knowledge base whose chunks, vectors, fields and settings live in Milvus.

``KnowledgeBase.create(name, backend="milvus", uri=..., token=...)`` and ``KnowledgeBase.open(name,
backend="milvus", uri=...)`` give one. Without a uri, `name` is a local directory and the
knowledge base is the Milvus Lite file ``<name>/milvus.db`` in it (``KnowledgeBase.open(name)``
finds it there). With a uri (``http://host:19530``, Zilliz Cloud, or another ``.db`` file),
`name` is the knowledge base's collection name and nothing is kept in a local file: its
KiraConfig, DomainProfile, models' identity, dimensions and generation are rows of the
``<name>__kb`` collection (kira.knowledge_base.milvus.records), so any process on any machine
opens it from the uri alone.

Writes go to Milvus at once, batched and idempotent by chunk id (kira.knowledge_base.milvus.kb_writes);
`commit` flushes them and bumps the generation, which is what other processes' `refresh`
looks at. Milvus has no transactions: `rollback` cannot undo writes already sent (it says so
in the log). One writer at a time per knowledge base, as with the embedded backend (not
enforced across machines). It satisfies `kira.knowledge_base.protocols.KnowledgeBaseLike`,
so `kira.Kira` and `kira serve` take it as they take the embedded one.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

from kira.config import KiraConfig
from kira.knowledge_base.chunker import LEVELS, levels_arg
from kira.knowledge_base.kb_writing import Writing
from kira.knowledge_base.milvus.views import MilvusViews
from kira.knowledge_base.milvus.location import LITE_FILE, target
from kira.knowledge_base.model_identity import LoadsItsModels

log = logging.getLogger(__name__)
FORMAT = 2  # 2: a <name>__terms collection holds kira's terms, names and groups (milvus.lexical); bridge stored at commit


class MilvusKnowledgeBase(LoadsItsModels, MilvusViews, Writing):
    """A knowledge base on Milvus (module docstring). Use `KnowledgeBase.create` / `KnowledgeBase.open` with
    ``backend="milvus"``. Thread safety: one instance belongs to one thread."""

    backend = "milvus"

    def __init__(self, uri: str, name: str, client: Any, models: Any, *, path: Path | None, token: str,
                 read_only: bool) -> None:
        from kira.knowledge_base.milvus.records import KbRecords, MilvusStore

        self.uri, self.name, self.token = uri, name, token
        self.path = path if path is not None else Path(name)
        self.read_only = read_only
        self._client = client
        self._records: Any = KbRecords(client, name)
        self.store = MilvusStore(self)
        self._models = models
        self._collection: Any = None
        self._indexes: dict[str, Any] = {}
        self._caches: dict[Any, Any] = {}
        self._profile: Any = None
        self.settings: dict[str, Any] = {}
        self.config = KiraConfig()
        self.levels: tuple[str, ...] = LEVELS
        self.caption_children = False
        self._seen_generation = 0
        self._changed = False  # written since the last generation bump
        self._unflushed = False  # written since the last flush
        self._documents_changed = False  # documents added or removed since the bridge was last stored

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def create(cls, path_or_name: str | os.PathLike, config: KiraConfig | None = None, models: Any = None, *,
               uri: str | None = None, token: str = "", index: str = "flat", levels: Sequence[str] = LEVELS,
               caption_children: bool = False, profile: Any = None) -> MilvusKnowledgeBase:
        """Create a new, empty knowledge base on Milvus and open it for writing (parameters as
        `KnowledgeBase.create`; `uri` / `token` as the module docstring says).

        Raises ValueError where the knowledge base (or a non-empty local directory) exists,
        ImportError naming ``kira[milvus]`` without pymilvus / milvus-lite, ConnectionError
        naming the uri where no Milvus answers there.
        """
        from kira.knowledge_base.milvus.schema import close_client, connect
        from kira.profile import as_profile

        profile = as_profile(profile)
        if index not in ("flat", "hnsw"):
            raise ValueError(f"index must be 'flat' or 'hnsw'; got {index!r}")
        levels = levels_arg(levels)
        uri, name, local = target(path_or_name, uri)
        if local is not None:
            if local.exists() and (not local.is_dir() or any(local.iterdir())):
                raise ValueError(f"{local} exists and is not an empty directory; use KnowledgeBase.open or pick a new path")
            local.mkdir(parents=True, exist_ok=True)
        config = config or KiraConfig()
        client = connect(uri, token)
        try:
            kb = cls(uri, name, client, models, path=local, token=token, read_only=False)
            if kb._records.exists() or client.has_collection(name):
                raise ValueError(f"a knowledge base {name!r} already exists at {uri!r}; open it with "
                                 "KnowledgeBase.open(..., backend='milvus') or pick another name")
            kb._records.create()
            kb.settings = {"format": FORMAT, "index": index, "levels": list(dict.fromkeys(["document", *levels])),
                           "caption_children": bool(caption_children)}
            kb._records.put({"setting:kira": json.dumps(kb.settings), "setting:config": json.dumps(config.to_dict()),
                             "setting:profile": json.dumps(profile.to_dict()), "setting:generation": "0"})
            kb._apply_settings()
            kb.config, kb._profile = config, profile
        except BaseException:
            close_client(client)
            raise
        return kb

    @classmethod
    def exists(cls, path_or_name: str | os.PathLike, *, uri: str | None = None, token: str = "") -> bool:
        """Whether a knowledge base of this name is at `uri` (or, without one, in the directory). Raises what
        connecting raises (ConnectionError naming the uri, ImportError naming ``kira[milvus]``)."""
        from kira.knowledge_base.milvus.records import KbRecords
        from kira.knowledge_base.milvus.schema import close_client, connect

        uri, name, local = target(path_or_name, uri)
        if local is not None:
            return (local / LITE_FILE).exists()
        client = connect(uri, token)
        try:
            return KbRecords(client, name).exists()
        finally:
            close_client(client)

    @classmethod
    def open(cls, path_or_name: str | os.PathLike, models: Any = None, *, uri: str | None = None, token: str = "",
             read_only: bool = False) -> MilvusKnowledgeBase:
        """Open a knowledge base on Milvus. Everything is checked before anything is written: ValueError
        where there is no such knowledge base, where its collection's schema or dimensions differ from its
        stored settings, or where `models` encodes with other models than it was built with;
        ConnectionError naming the uri where no Milvus answers; ImportError naming ``kira[milvus]``."""
        from kira.knowledge_base.milvus.schema import close_client, connect

        uri, name, local = target(path_or_name, uri)
        if local is not None and not (local / LITE_FILE).exists():
            raise ValueError(f"{local} is not a Milvus-backed kira knowledge base (no {LITE_FILE}); create one with "
                             "KnowledgeBase.create(..., backend='milvus')")
        client = connect(uri, token)
        try:
            kb = cls(uri, name, client, models, path=local, token=token, read_only=read_only)
            if not kb._records.exists():
                raise ValueError(f"no kira knowledge base {name!r} at {uri!r} (no collection {kb._records.name!r}); "
                                 "create it with KnowledgeBase.create(..., backend='milvus')")
            kb._records.load()
            kb._apply_settings()
            if kb._setting("dims"):
                kb._attach_chunks()
            if models is not None:
                kb.check_models(models)
                kb._check_dims(models)
            kb._seen_generation = kb.store.generation()
            from kira.knowledge_base.milvus.orphans import recover

            recover(kb)  # chunks a stopped writer left without a document record (kira.knowledge_base.milvus.orphans)
        except BaseException:
            close_client(client)
            raise
        return kb

    def _setting(self, key: str, default: str | None = None) -> str | None:
        return self._records.get_one(f"setting:{key}", default)

    def _apply_settings(self) -> None:
        stored = self._records.get(["setting:kira", "setting:config"])
        if "setting:kira" not in stored:
            raise ValueError(f"{self._records.name!r} at {self.uri!r} holds no kira settings; it is not a kira "
                             "knowledge base")
        self.settings = json.loads(stored["setting:kira"])
        if int(self.settings.get("format", 0)) > FORMAT:
            raise ValueError(f"knowledge base {self.name!r} was written by a newer kira (format "
                             f"{self.settings['format']}); upgrade kira")
        self.levels = tuple(self.settings.get("levels", LEVELS))
        self.caption_children = bool(self.settings.get("caption_children", False))
        try:
            self.config = KiraConfig.from_dict(json.loads(stored.get("setting:config", "{}")))
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            raise ValueError(f"the stored config of {self.name!r} at {self.uri!r} is not a kira configuration "
                             f"({exc})") from None

    def _milvus_config(self, dims: dict[str, int]) -> Any:
        from kira.knowledge_base.milvus.schema import MilvusConfig

        return MilvusConfig(uri=self.uri, collection=self.name, visual_dim=int(dims["visual"]),
                            text_dim=int(dims["text"]), token=self.token,
                            index="HNSW" if self.settings.get("index") == "hnsw" else "FLAT")

    def _attach_chunks(self) -> None:
        from kira.knowledge_base.milvus.index import MilvusIndex
        from kira.knowledge_base.milvus.schema import MilvusCollection

        dims = json.loads(self._setting("dims", "null") or "null")
        if not dims:
            return
        self._collection = MilvusCollection.attach(self._client, self._milvus_config(dims), create=False)
        self._indexes = {s: MilvusIndex(self._collection, s) for s in ("visual", "text")}

    # ---- settings, models -------------------------------------------------------------
    @property
    def profile(self) -> Any:
        """The knowledge base's `kira.DomainProfile` (stored in Milvus; the empty profile when none is)."""
        if self._profile is None:
            from kira.profile import DomainProfile

            stored = self._setting("profile")
            self._profile = DomainProfile.from_dict(json.loads(stored)) if stored else DomainProfile()
        return self._profile

    def set_profile(self, profile: Any) -> None:
        """Store `profile` (as `KnowledgeBase.set_profile`) in Milvus."""
        self._writable()
        from kira.profile import as_profile

        profile = as_profile(profile)
        self._records.put({"setting:profile": json.dumps(profile.to_dict())})
        self._profile = profile
        self._changed = True

    def built_with(self) -> dict[str, str]:
        """Part -> model identity of the stack that built this knowledge base ({} before the first image)."""
        return dict(json.loads(self._setting("model_identity", "{}") or "{}"))

    def check_models(self, stack: Any) -> None:
        """ValueError when `stack`'s image encoder is not the one this knowledge base was built with."""
        built = self.built_with().get("image")
        if not built or stack is None or getattr(stack, "image", None) is None:
            return
        mine = stack.identity().get("image", "") if hasattr(stack, "identity") else type(stack.image).__name__
        from kira.knowledge_base.model_identity import refuse_other_image_encoder

        refuse_other_image_encoder(f"{self.name} at {self.uri}", built, mine)

    def _check_dims(self, stack: Any) -> None:
        dims = json.loads(self._setting("dims", "null") or "null")
        mine = {"visual": int(stack.image.dim), "text": int(stack.text.dim)}
        if dims and dims != mine:
            raise ValueError(f"the model stack encodes {mine} but {self.name} at {self.uri} was built with {dims}; "
                             "open it with the models it was built with")

    def _ensure_chunks(self) -> Any:
        """The chunk collection, created at the first write (the model stack fixes its dimensions)."""
        stack = self.models
        if self._collection is None:
            dims = {"visual": int(stack.image.dim), "text": int(stack.text.dim)}
            from kira.knowledge_base.milvus.schema import MilvusCollection

            MilvusCollection.attach(self._client, self._milvus_config(dims), create=True)
            identity = stack.identity() if hasattr(stack, "identity") else {
                "image": type(stack.image).__name__, "text": type(stack.text).__name__}
            self._records.put({"setting:dims": json.dumps(dims), "setting:model_identity": json.dumps(identity)})
            self._attach_chunks()
        else:
            self.check_models(stack)
            self._check_dims(stack)
        return self._collection

    # ---- writing ----------------------------------------------------------------------
    def _writable(self) -> None:
        if self.read_only:
            raise ValueError(f"{self.name} at {self.uri} is open read-only; open it without read_only=True to change it")
        if self._records is None:
            raise ValueError(f"{self.name} is closed; open it again with KnowledgeBase.open")

    def _add_images(self, items: list[dict[str, Any]]) -> list[str]:
        """Encode and store a batch (`kira.knowledge_base.milvus.kb_writes.add_items`); a duplicate doc id ->
        ValueError, nothing written."""
        from kira.knowledge_base.milvus.kb_writes import add_items

        self._writable()
        with self._writing("adding images to"):
            add_items(self, self._ensure_chunks(), items)
        self._changed = self._unflushed = self._documents_changed = True
        self._caches.clear()
        return [item["doc_id"] for item in items]

    def remove(self, doc_id: str) -> None:
        """Remove a document and all its chunks (a cascade in Milvus: every chunk with its ``doc_id``), also
        chunks a stopped writer left without the document's record. Unknown id -> ValueError."""
        from kira.knowledge_base.milvus.orphans import orphaned
        from kira.knowledge_base.milvus.writes import delete_documents

        self._writable()
        if not self.store.has_document(doc_id) and not orphaned(self, [doc_id]):
            raise ValueError(f"no document {doc_id!r} in the knowledge base")
        with self._writing("removing a document from"):
            if self._collection is not None:
                delete_documents(self._collection, [doc_id])
            self._records.delete([f"doc:{doc_id}", f"thumb:{doc_id}", f"piece:{doc_id}"])
        self._changed = self._unflushed = self._documents_changed = True
        self._caches.clear()

    def note_external_writes(self) -> None:
        """Say that other clients (a Ray ingest's actors) wrote to this knowledge base: the next `commit`
        flushes and publishes their writes too."""
        self._changed = self._unflushed = self._documents_changed = True

    def commit(self, *, checkpoint: bool | None = None) -> int:
        """Flush the writes sent since the last flush (Milvus seals them into indexed segments) and, where
        anything changed since the last commit, bump the generation other processes' `refresh` reads;
        returns the generation. With nothing written it writes nothing. `checkpoint` is accepted for the
        embedded knowledge base's signature (Milvus keeps its own files)."""
        self._writable()
        with self._writing("committing"):
            if self._unflushed and self._collection is not None:
                self._collection.flush()
            self._unflushed = False
            if self._documents_changed and self._collection is not None and self._models is not None \
                    and getattr(self._models, "image_text", None) is None:
                from kira.knowledge_base.milvus.stored_views import refresh_bridge

                refresh_bridge(self)  # stored with the knowledge base: readers load it, never refit it
                self._changed = True
            self._documents_changed = False
            return self.commit_database()

    def _writing(self, doing: str) -> Any:
        """A context that turns "the server stopped answering" into one `MilvusUnavailable` naming what is kept
        (kira.knowledge_base.milvus.faults)."""
        from kira.knowledge_base.milvus.faults import writing_to

        return writing_to(self.uri, self.name, self._seen_generation, doing)

    def commit_database(self) -> int:
        """Publish what changed: bump the generation (no flush; `ingest` calls this per batch and `commit`
        once at the end, as on the embedded backend). Returns the generation."""
        self._writable()
        if not self._changed:
            return self._seen_generation
        with self._writing("committing"):
            generation = self.store.generation() + 1
            self._records.put({"setting:generation": str(generation)})
            self._records.client.flush(self._records.name)
        self._seen_generation = generation
        self._changed = False
        self._caches.clear()
        return generation

    def rollback(self) -> None:
        """Milvus has no transactions: writes already sent stay (logged). Drops the cached views."""
        if not self.read_only:
            log.warning("%s: rollback on the Milvus backend cannot undo writes already sent to %s", self.name, self.uri)
        self._caches.clear()

    def close(self) -> None:
        """Commit (writers), then close the client; the last client of a Milvus Lite file in this process
        releases the file, so another process can open the knowledge base next. Safe to call twice."""
        if self._records is None:
            return
        from kira.knowledge_base.milvus.schema import close_client

        try:
            if not self.read_only:
                self.commit()
        finally:
            close_client(self._client)
            self._records = None
            self._collection = None
            self._indexes = {}

    def drop(self) -> None:
        """Delete the knowledge base from Milvus (its chunk, terms, settings and ordinal collections)."""
        self._writable()
        for name in (self.name, f"{self.name}__meta", f"{self.name}__terms", self._records.name):
            if self._client.has_collection(name):
                self._client.drop_collection(name)
        from kira.knowledge_base.milvus.schema import close_client

        close_client(self._client)  # closed: nothing is left to commit to
        self._records, self._collection, self._indexes = None, None, {}

    def __enter__(self) -> MilvusKnowledgeBase:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and not self.read_only and self._records is not None:
            self.rollback()
        self.close()

    def __len__(self) -> int:
        return self.store.count_documents()

    def __repr__(self) -> str:
        return f"MilvusKnowledgeBase(name={self.name!r}, uri={self.uri!r}, read_only={self.read_only})"
