"""`EmbeddedStorage`: a knowledge base kept in one local directory, SQLite plus the core's index files.

    kira.sqlite (+ -wal, -shm)   documents, chunks, vectors (BLOBs), tags, groups, provenance, pieces
    visual.index, text.index     the core's index files (a cache of the database's vectors)
    manifest.json                which database generation the index files match
    config.json, profile.json    the KiraConfig and the DomainProfile (settings ``config`` / ``profile``)
    writer.lock, adapter/, bridge.*   (kira.knowledge_base.embedded.files)

Writes go into one open transaction; `commit` makes them durable (the database), then saves the
index files and the manifest once enough rows changed since they were last saved
(`checkpoint_share`), and `close` always does. Any number of processes may open the directory
read-only while one writer works; a second writer is refused. See `kira.knowledge_base.embedded.vectors`
for how index files behind the database (a deferred checkpoint, a crash) are brought up to date on open.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from kira.knowledge_base.batch import WriteBatch
from kira.atomic import write_json_atomic
from kira.knowledge_base.embedded import files
from kira.knowledge_base.embedded.store import DB_NAME, Store
from kira.knowledge_base.embedded.vectors import (INDEX_CHECKPOINT_SHARE, RepairReport, VectorSpaces,
                                                  remove_stale_temporaries)

if TYPE_CHECKING:
    from kira.models.bridge import TextToImageBridge


def _adapter_transform(adapter: Any, raw_dim: int) -> tuple[Any, int]:
    if adapter is None:
        return None, raw_dim
    probe = np.zeros((1, raw_dim), dtype=np.float32)
    probe[0, 0] = 1.0
    return adapter.apply, int(np.asarray(adapter.apply(probe)).shape[1])


class EmbeddedStorage:
    """The `kira.knowledge_base.storage.Storage` of a local directory (module docstring). Use `create` / `open`."""

    kind = "embedded"

    def __init__(self, path: Path, store: Store, *, read_only: bool, lock_fd: int | None) -> None:
        self.path = Path(path)
        self.rows = self.store = store
        self.read_only = read_only
        self._lock_fd = lock_fd
        self.spaces: VectorSpaces | None = None  # the index files' contents, once the first image fixed the dims
        self.repair: RepairReport | None = None  # what opening the index files repaired
        self.adapter: Any = None
        self._adapter_version = store.get_meta("adapter_version", "0")  # what the loaded visual index holds
        self.checkpoint_share = INDEX_CHECKPOINT_SHARE  # a commit saves the index files past this share of change
        self._seen_generation = store.generation()

    @property
    def where(self) -> str:
        return str(self.path)

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike[str], settings: Mapping[str, str]) -> EmbeddedStorage:
        """A new, empty knowledge base directory at `path` holding `settings` (``config``: a KiraConfig's JSON),
        open for writing. ValueError where `path` is a file or a non-empty directory."""
        path = Path(path)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ValueError(f"{path} exists and is not an empty directory; use KnowledgeBase.open or pick a new path")
        path.mkdir(parents=True, exist_ok=True)
        # the config before the database: never one without it
        write_json_atomic(path / files.CONFIG_FILE, json.loads(settings.get("config") or "{}"))
        storage = cls(path, Store(path, create=True), read_only=False, lock_fd=files.take_lock(path))
        storage.put_settings({k: v for k, v in settings.items() if k != "config"})
        storage.commit()
        return storage

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, read_only: bool = False) -> EmbeddedStorage:
        """The knowledge base directory at `path`; its index files are loaded, never rebuilt (a gap left by a
        crash is repaired from the stored vectors). ValueError where `path` holds no knowledge base, its
        config.json is missing or broken, or (writing) another process writes to it."""
        path = Path(path)
        if not (path / DB_NAME).is_file():
            raise ValueError(f"{path} is not a kira knowledge base (no {DB_NAME}); create one with "
                             f"`kira ingest {path} FOLDER` or KnowledgeBase.create")
        files.read_config_text(path / files.CONFIG_FILE)
        lock_fd = None if read_only else files.take_lock(path)
        store = None
        try:
            if lock_fd is not None:
                remove_stale_temporaries(path)  # the lock is ours: no save is in flight
            store = Store(path, read_only=read_only)
            storage = cls(path, store, read_only=read_only, lock_fd=lock_fd)
            dims = json.loads(store.get_meta("dims", "null") or "null")
            if dims is not None:
                storage.open_spaces(dims, create=False)
        except BaseException:
            if store is not None:
                store.close()
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        return storage

    # ---- settings ---------------------------------------------------------------------
    def get_setting(self, key: str, default: str | None = None) -> str | None:
        if key == "config":
            return files.read_config_text(self.path / files.CONFIG_FILE)
        if key == "profile":
            file = self.path / files.PROFILE_FILE
            return file.read_text(encoding="utf-8") if file.is_file() else default
        return self.store.get_meta(key, default)

    def put_settings(self, values: Mapping[str, str]) -> None:
        for key, value in values.items():
            if key in ("config", "profile"):
                name = files.CONFIG_FILE if key == "config" else files.PROFILE_FILE
                write_json_atomic(self.path / name, json.loads(value))
            else:
                self.store.set_meta(key, value)

    def generation(self) -> int:
        return self.store.generation()

    def describe(self) -> dict[str, Any]:
        spaces = self.spaces
        return {"path": str(self.path), "backend": self.kind, "index_kind": self.store.get_meta("index_kind", "flat"),
                "index_sizes": {s: len(ix) for s, ix in (spaces.indexes.items() if spaces else [])},
                "dims": spaces.index_dims if spaces else None}

    # ---- vectors ----------------------------------------------------------------------
    def open_spaces(self, dims: Mapping[str, int], *, create: bool) -> None:
        kind = self.store.get_meta("index_kind", "flat") or "flat"
        self._adapter_version = self.store.get_meta("adapter_version", "0")
        self.adapter = files.load_adapter(self.path, self.store.get_meta("adapter_class") or "")
        transform, vdim = _adapter_transform(self.adapter, int(dims["visual"]))
        self.spaces = VectorSpaces(self.path, kind, dict(dims), transform=transform, visual_dim=vdim)
        self.repair = self.spaces.open(self.store)
        if not self.repair.clean and not self.read_only:
            self.spaces.save(self.store.generation())
        elif self.spaces.manifest_outdated and not self.read_only and not self.spaces.unsaved:
            self.spaces.write_manifest(self.store.generation())  # the files hold every row: add the digests

    def index(self, space: str) -> Any:
        return None if self.spaces is None else self.spaces.indexes[space]

    def set_adapter(self, adapter: Any, name: str) -> None:
        """Store `adapter` under `name` (None: remove it) and re-project the visual index (`KeepsAdapter`)."""
        assert self.spaces is not None
        files.save_adapter(self.path, adapter)
        self.store.set_meta("adapter_class", name if adapter is not None else "")
        # readers compare this on refresh: a changed adapter means a re-projected visual index to load
        self._adapter_version = str(int(self.store.get_meta("adapter_version", "0") or 0) + 1)
        self.store.set_meta("adapter_version", self._adapter_version)
        self.adapter = adapter
        transform, dim = _adapter_transform(adapter, self.spaces.dims["visual"])
        self.spaces.reproject_visual(self.store, transform, dim)

    # ---- the text->image bridge (`KeepsBridge`) ----------------------------------------
    def bridge_fitted_on(self) -> int:
        return int(self.store.get_meta("bridge_fitted_on", "0") or 0) if self.store.get_meta("bridge_file") else 0

    def load_bridge(self) -> TextToImageBridge | None:
        return files.load_bridge(self.path / (self.store.get_meta("bridge_file") or ""))

    def save_bridge(self, bridge: Any, fitted_on: int) -> None:
        if self.read_only or self.store.in_transaction:
            return  # saved by the next commit that refits it
        self.store.set_meta("bridge_file", files.save_bridge(self.path, bridge))
        self.store.set_meta("bridge_fitted_on", str(int(fitted_on)))
        self.store.commit_meta()

    # ---- writing ----------------------------------------------------------------------
    def write(self, batch: WriteBatch) -> None:
        assert self.spaces is not None, "open_spaces first"
        store = self.store
        new: dict[str, tuple[list[int], list[np.ndarray]]] = {"visual": ([], []), "text": ([], [])}
        was_open = store.in_transaction
        store.begin()
        try:
            with store.savepoint("kira_batch"):  # the batch is stored whole or not at all
                for doc in batch.documents:
                    store.insert_document(doc.doc_id, source=doc.source, caption=doc.caption, width=doc.width,
                                          height=doc.height, metadata=doc.metadata, tags=doc.tags,
                                          thumbnail=doc.thumbnail, provenance=doc.provenance)
                    ids: list[int] = []
                    for chunk in doc.chunks:
                        cid = store.insert_chunk(doc.doc_id, chunk.level,
                                                 parent_id=ids[chunk.parent] if chunk.parent is not None else None,
                                                 box=chunk.box, description=chunk.description, visual=chunk.visual,
                                                 text=chunk.text)
                        ids.append(cid)
                        for space, vector in (("visual", chunk.visual), ("text", chunk.text)):
                            if vector is not None:
                                new[space][0].append(cid)
                                new[space][1].append(vector)
                    passage_ids = ids[len(ids) - len(doc.passages):] if doc.passages else []
                    for order, (cid, passage) in enumerate(zip(passage_ids, doc.passages)):
                        store.insert_passage(cid, doc.doc_id, order, passage)
                    dim = int(doc.chunks[0].text.shape[-1])
                    store.insert_pieces(doc.doc_id, list(doc.piece_texts), doc.piece_vectors
                                        if doc.piece_vectors is not None else np.zeros((0, dim), np.float32))
                    for kind, gid, position in doc.groups:
                        store.add_to_group(kind, gid, doc.doc_id, position)
        except BaseException:
            if not was_open:
                store.rollback()
            raise
        for space, (ids, rows) in new.items():
            if ids:
                self.spaces.add(space, np.array(ids, dtype=np.int64), np.stack(rows))

    def write_pieces(self, pieces: Mapping[str, tuple[Sequence[str], np.ndarray]]) -> None:
        self.store.begin()
        for doc_id, (texts, vectors) in pieces.items():
            self.store.insert_pieces(doc_id, list(texts), vectors)
        self.store.commit_meta()  # no index reads the pieces: nothing for readers to rebuild

    def remove(self, doc_id: str) -> bool:
        if not self.store.has_document(doc_id):
            return False
        ids = self.store.delete_document(doc_id)
        if self.spaces is not None:
            self.spaces.remove(np.array(ids, dtype=np.int64))
        return True

    def commit(self, *, checkpoint: bool | None = None) -> int:
        """The database commits first (one transaction): that makes the change durable. Then the index files
        and the manifest, a cache of the database, are saved atomically when `checkpoint` is True, or (None)
        when the rows changed since they were last saved exceed `checkpoint_share` of the indexes; False:
        not now. Files behind the database are brought up to date from the stored vectors on the next open."""
        generation = self.store.commit()
        self._seen_generation = generation
        if self.spaces is not None:
            self.spaces.checkpoint(generation, force=checkpoint, share=self.checkpoint_share)
        return generation

    def rollback(self) -> None:
        self.store.rollback()
        if self.spaces is not None:
            for space in ("visual", "text"):
                self.spaces._sync(self.store, space)

    def refresh(self) -> bool:
        if self.store.in_transaction:
            return False
        with self.store.snapshot():  # the generation and every row read below from one committed state
            generation = self.store.generation()
            if generation == self._seen_generation:
                return False
            if self.spaces is None or self.store.get_meta("adapter_version", "0") != self._adapter_version:
                # first vectors, or the writer set another domain adapter: load the (re-projected) indexes
                dims = json.loads(self.store.get_meta("dims", "null") or "null")
                if dims is not None:
                    self.open_spaces(dims, create=False)
            else:
                for space in ("visual", "text"):
                    self.spaces.catch_up(self.store, space)  # what changed since this process last looked
            self._seen_generation = generation
            return True

    def close(self) -> None:
        """Save index files still behind the database (writers), then release the database and the lock."""
        try:
            if not self.read_only and self.spaces is not None and self.spaces.unsaved:
                self.spaces.checkpoint(self.store.generation(), force=True, share=self.checkpoint_share)
        finally:
            self.store.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None


__all__ = ["EmbeddedStorage"]
