"""`KnowledgeBase`: a persistent, durable store of chunked, embedded images and passages.

A knowledge base is a directory::

    kira.sqlite (+ -wal, -shm)   documents, chunks, vectors (BLOBs), tags, groups, provenance
    visual.index, text.index     the core's index files (a cache of the database's vectors)
    manifest.json                which database generation the index files match
    config.json                  the KiraConfig it was built with
    profile.json                 the user's DomainProfile (domain knowledge; empty by default)
    bridge.*                     the fitted text->image bridge (default stack only)
    adapter/                     the domain adapter, when one is set

Writes go into one open transaction; `commit()` makes them durable (the database), then
saves the index files and the manifest once enough rows changed since they were last
saved (`checkpoint_share`), and `close()` always does. `ingest` commits every batch. Any number of
processes may open a knowledge base with ``read_only=True`` while one writer works;
a second writer is refused. See `kira.knowledge_base.embedded.vectors` for how index files that
are behind the database (a deferred checkpoint, a crash) are brought up to date on open.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence, TypeVar

from kira.config import KiraConfig
from kira.knowledge_base.chunker import LEVELS, levels_arg
from kira.knowledge_base.kb_adaptation import AdapterAndBridge
from kira.knowledge_base.kb_views import DerivedViews
from kira.knowledge_base.kb_writing import MAX_ENCODED_CHARS, Writing
from kira.knowledge_base.model_fallbacks import recorded_fallbacks
from kira.knowledge_base.model_identity import RecordedModels
from kira.knowledge_base.embedded.store import Store
from kira.knowledge_base.embedded.vectors import (INDEX_CHECKPOINT_SHARE, RepairReport, VectorSpaces, remove_stale_temporaries,
                                         write_json_atomic)

log = logging.getLogger(__name__)
__all__ = ["KnowledgeBase", "MAX_ENCODED_CHARS", "CONFIG_FILE", "PROFILE_FILE", "LOCK_FILE"]
T = TypeVar("T")

CONFIG_FILE = "config.json"
PROFILE_FILE = "profile.json"  # the user's DomainProfile (kira.profile)
LOCK_FILE = "writer.lock"


def _read_config(path: Path) -> KiraConfig:
    """The stored KiraConfig. Raises ValueError naming the file and the fix when it is missing (never
    replaced by the defaults in silence: the constants a knowledge base answers with are part of it)
    or is not a JSON object of config fields."""
    fix = (f"restore it from a backup, or delete it and run `kira check {path.parent} --repair` to write the "
           "default constants")
    if not path.is_file():
        raise ValueError(f"{path} is missing: the constants this knowledge base was built and answers with are "
                         f"unknown. Restore it from a backup, or run `kira check {path.parent} --repair` to write "
                         "the default constants")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); {fix}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object of config fields; {fix}")
    try:
        return KiraConfig.from_dict(data)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise ValueError(f"{path} does not hold a kira configuration ({exc}); {fix}") from None


class KnowledgeBase(RecordedModels, Writing, DerivedViews, AdapterAndBridge):
    """A knowledge base directory opened for reading or writing. Use `create` or `open`.

    Thread safety: one instance belongs to one thread. Several processes may read at once
    (``read_only=True``) while one process writes.
    """

    def __init__(self, path: Path, store: Store, config: KiraConfig, models: Any, *, read_only: bool) -> None:
        self.path = Path(path)
        self.store = store
        self.config = config
        self._models = models
        self.read_only = read_only
        self._lock_fd: int | None = None
        self._adapter: Any = None
        self._profile: Any = None
        self._caches: dict[str, Any] = {}
        self._adapter_version = store.get_meta("adapter_version", "0")  # what the loaded visual index was projected with
        # derived views kept across commits and updated with what changed ({name: (largest chunk id
        # seen, removal-log position read, view)}); a rollback drops them (they may hold undone rows)
        self._derived: dict[str, tuple[int, int, Any]] = {}
        # a commit saves the index files once this share of their rows has changed (`commit`)
        self.checkpoint_share = INDEX_CHECKPOINT_SHARE
        self._seen_generation = store.generation()
        self.repair: RepairReport | None = None
        self.levels: tuple[str, ...] = tuple(json.loads(store.get_meta("levels", json.dumps(LEVELS)) or "[]"))
        self.caption_children = (store.get_meta("caption_children", "1") == "1")
        dims = json.loads(store.get_meta("dims", "null") or "null")
        self.vectors: VectorSpaces | None = None
        if dims is not None:
            self._open_vectors(dims)
            if models is not None:
                self.check_models(models)  # another image encoder's queries would return noise: refused at open
                self._check_dims(models, dims)

    @property
    def profile(self) -> Any:
        """The knowledge base's `kira.DomainProfile` (``profile.json``; the empty profile when none is stored)."""
        if self._profile is None:
            from kira.profile import DomainProfile

            file = self.path / PROFILE_FILE
            self._profile = DomainProfile.load(file) if file.is_file() else DomainProfile()
        return self._profile

    def set_profile(self, profile: Any) -> None:
        """Store `profile` (a `kira.DomainProfile`, a mapping or a .toml/.json file; None: empty) with the
        knowledge base, atomically. It takes effect for the next `Kira` built on this knowledge base."""
        self._writable()
        from kira.profile import as_profile

        profile = as_profile(profile)
        profile.save(self.path / PROFILE_FILE)
        self._profile = profile

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        config: KiraConfig | None = None,
        models: Any = None,
        *,
        index: str = "flat",
        levels: Sequence[str] = LEVELS,
        caption_children: bool = False,
        profile: Any = None,
        backend: str = "embedded",
        uri: str | None = None,
        token: str = "",
    ) -> KnowledgeBase:
        """Create a new, empty knowledge base directory at `path` and open it for writing.

        Parameters
        ----------
        config: the constants to build and answer with (stored with the knowledge base).
        models: a `kira.models.stack.ModelStack`; `kira.models.load_default()` when None
            (loaded on first use).
        index: 'flat' (exact search) or 'hnsw' (graph index for large bases).
        levels: chunk levels to store per image (the document level is always stored).
        caption_children: describe each region/patch crop with the captioner too (one
            sentence-encoder pass per chunk instead of per document: slower ingest).
        profile: the user's domain knowledge (`kira.DomainProfile`, a mapping, or a .toml /
            .json file); stored with the knowledge base. None: the empty profile.

        backend: "embedded" (SQLite + the core's indexes in the directory `path`) or "milvus"
            (`kira.knowledge_base.milvus.kb`: chunks, vectors and settings in Milvus at `uri`,
            authenticated with `token`; without a uri, Milvus Lite in the directory `path`).

        Raises ValueError if `path` already holds a knowledge base or a non-empty directory.
        """
        from kira.knowledge_base.opening import create_knowledge_base

        return create_knowledge_base(path, config, models, backend=backend, uri=uri, token=token, index=index,
                                     levels=levels, caption_children=caption_children, profile=profile)

    @classmethod
    def create_embedded(cls, path: str | os.PathLike, config: KiraConfig | None = None, models: Any = None, *,
                        index: str = "flat", levels: Sequence[str] = LEVELS, caption_children: bool = False,
                        profile: Any = None) -> KnowledgeBase:
        """`create` of an embedded knowledge base (SQLite + the core's indexes in the directory `path`)."""
        path = Path(path)
        from kira.profile import as_profile

        profile = as_profile(profile)  # validated before anything is written
        if index not in ("flat", "hnsw"):
            raise ValueError(f"index must be 'flat' or 'hnsw'; got {index!r}")
        levels = levels_arg(levels)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ValueError(f"{path} exists and is not an empty directory; use KnowledgeBase.open or pick a new path")
        path.mkdir(parents=True, exist_ok=True)
        config = config or KiraConfig()
        write_json_atomic(path / CONFIG_FILE, config.to_dict())  # before the database: never one without it
        store = Store(path, create=True)
        kb = cls(path, store, config, models, read_only=False)
        kb._take_lock()
        store.set_meta("index_kind", index)
        store.set_meta("levels", json.dumps(list(dict.fromkeys(["document", *levels]))))
        store.set_meta("caption_children", "1" if caption_children else "0")
        store.commit()
        kb.levels = tuple(json.loads(store.get_meta("levels") or "[]"))
        kb.caption_children = caption_children
        profile.save(path / PROFILE_FILE)
        kb._profile = profile
        return kb

    @classmethod
    def open(cls, path: str | os.PathLike, models: Any = None, *, read_only: bool = False, backend: str | None = None,
             uri: str | None = None, token: str = "") -> KnowledgeBase:
        """Open an existing knowledge base; index files are loaded, never rebuilt
        (a gap left by a crash is repaired from the stored vectors).

        backend / uri / token: as `create`; backend None finds it (a uri, or a directory holding
        a Milvus Lite file, means "milvus").
        Raises ValueError if `path` is not a knowledge base, or (writing) if another
        process holds it open for writing.
        """
        from kira.knowledge_base.opening import open_knowledge_base

        return open_knowledge_base(path, models, read_only=read_only, backend=backend, uri=uri, token=token)

    @classmethod
    def open_embedded(cls, path: str | os.PathLike, models: Any = None, *, read_only: bool = False) -> KnowledgeBase:
        """`open` of an embedded knowledge base (the directory `path` holding kira.sqlite)."""
        from kira.knowledge_base.opening import is_embedded_directory

        path = Path(path)
        if not is_embedded_directory(path):
            raise ValueError(f"{path} is not a kira knowledge base (no kira.sqlite); create one with "
                             f"`kira ingest {path} FOLDER` or KnowledgeBase.create")
        config = _read_config(path / CONFIG_FILE)
        lock_fd = None
        if not read_only:
            probe = cls.__new__(cls)
            probe.path = path
            probe._lock_fd = None
            probe._take_lock()
            lock_fd = probe._lock_fd
        store = None
        try:
            if lock_fd is not None:
                remove_stale_temporaries(path)  # the lock is ours: no save is in flight
            store = Store(path, read_only=read_only)
            kb = cls(path, store, config, models, read_only=read_only)
        except BaseException:
            if store is not None:
                store.close()
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        kb._lock_fd = lock_fd
        return kb

    def _take_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory lock
            return
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ValueError(
                f"{self.path} is open for writing in another process; open it with read_only=True to read"
            ) from None
        self._lock_fd = fd

    def _open_vectors(self, dims: dict[str, int]) -> None:
        kind = self.store.get_meta("index_kind", "flat") or "flat"
        self._adapter_version = self.store.get_meta("adapter_version", "0")
        self._adapter = self._load_adapter()
        transform, vdim = self._adapter_transform(dims["visual"])
        self.vectors = VectorSpaces(self.path, kind, dims, transform=transform, visual_dim=vdim)
        self.repair = self.vectors.open(self.store)
        if not self.repair.clean and not self.read_only:
            self.vectors.save(self.store.generation())
        elif self.vectors.manifest_outdated and not self.read_only and not self.vectors.unsaved:
            self.vectors.write_manifest(self.store.generation())  # the files hold every row: add the digests

    # ---- models (what built it: kira.knowledge_base.model_identity.RecordedModels) -----
    def _check_dims(self, stack: Any, dims: dict[str, int]) -> None:
        mine = {"visual": int(stack.image.dim), "text": int(stack.text.dim)}
        if mine != dims:
            raise ValueError(f"the model stack encodes {mine} but {self.path} was built with {dims} "
                             f"({self.built_with()}); open it with the models it was built with")

    def _ensure_dims(self) -> VectorSpaces:
        stack = self.models
        dims = {"visual": int(stack.image.dim), "text": int(stack.text.dim)}
        if self.vectors is None:
            self.store.set_meta("dims", json.dumps(dims))
            self.store.set_meta(
                "models",
                json.dumps({"image": type(stack.image).__name__, "text": type(stack.text).__name__}),
            )
            if hasattr(stack, "identity"):
                self.store.set_meta("model_identity", json.dumps(stack.identity()))
            self._open_vectors(dims)
        else:
            self.check_models(stack)
            self._record_ocr(stack)
        if dims != self.vectors.dims:
            raise ValueError(
                f"the model stack encodes {dims} but this knowledge base was built with {self.vectors.dims}; "
                "open it with the models it was built with"
            )
        assert self.vectors is not None
        return self.vectors

    # ---- writing ----------------------------------------------------------------------
    def _writable(self) -> None:
        if self.read_only:
            raise ValueError(f"{self.path} is open read-only; open it without read_only=True to change it")

    def commit(self, *, checkpoint: bool | None = None) -> int:
        """Make every change since the last commit durable; returns the new generation.

        The database commits first (one transaction): that is what makes the change
        durable. Then the index files and the manifest, a cache of the database, are
        saved atomically when `checkpoint` is True, or (None, the default) when the rows
        changed since they were last saved exceed `checkpoint_share` of the indexes
        (see kira.knowledge_base.embedded.vectors): a 10-chunk commit to a 100k-chunk knowledge
        base does not rewrite 280 MB of index files. False: never now. `close` always
        checkpoints. Files behind the database (a deferred checkpoint, or a crash in
        between) are brought up to date from the stored vectors on the next open.
        """
        self._writable()
        generation = self.store.commit()
        self._seen_generation = generation
        if self.vectors is not None:
            self.vectors.checkpoint(generation, force=checkpoint, share=self.checkpoint_share)
        self._caches.clear()
        if self.vectors is not None and self._models is not None and getattr(self._models, "image_text", None) is None:
            self.bridge()  # refit and save now, so read-only openers find it current
        return generation

    def commit_database(self) -> int:
        """Commit the database only (index files are checkpointed later by `commit`)."""
        self._writable()
        generation = self.store.commit()
        self._seen_generation = generation
        self._caches.clear()
        return generation

    def rollback(self) -> None:
        """Discard uncommitted changes (database and in-memory indexes)."""
        if self.read_only:
            return
        self.store.rollback()
        if self.vectors is not None:
            for space in ("visual", "text"):
                self.vectors._sync(self.store, space)
        self._caches.clear()
        self._derived.clear()

    def close(self) -> None:
        """Commit pending changes (writers), then release files. Safe to call twice."""
        if self.store is None:
            return
        try:
            if not self.read_only:
                self.commit(checkpoint=bool(self.vectors is not None and self.vectors.unsaved))
        finally:
            self.store.close()
            self.store = None  # type: ignore[assignment]
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and not self.read_only and self.store is not None:
            self.rollback()
        self.close()

    # ---- reading ----------------------------------------------------------------------
    def refresh(self) -> bool:
        """Pick up commits made by another process since this one looked; returns whether any were."""
        if self.store is None or self.store.in_transaction:
            return False
        with self.store.snapshot():  # the generation and every row read below from one committed state
            return self._refresh()

    def _refresh(self) -> bool:
        generation = self.store.generation()
        if generation == self._seen_generation:
            return False
        adapter_version = self.store.get_meta("adapter_version", "0")
        if self.vectors is None or adapter_version != self._adapter_version:
            # first vectors, or the writer set another domain adapter: load the (re-projected) indexes
            dims = json.loads(self.store.get_meta("dims", "null") or "null")
            if dims is not None:
                self._open_vectors(dims)
        else:
            for space in ("visual", "text"):
                self.vectors.catch_up(self.store, space)  # what changed since this process last looked
        self._caches.clear()
        self._seen_generation = generation
        return True

    def index(self, space: str) -> Any:
        """The core index of `space` ('visual' or 'text'), or None for an empty knowledge base."""
        if self.vectors is None:
            return None
        return self.vectors.indexes[space]

    def __len__(self) -> int:
        return self.store.count_documents()

    def stats(self) -> dict[str, Any]:
        """What the knowledge base holds: documents, chunks per level, groups, index sizes."""
        groups = self.store.groups()
        return {
            "path": str(self.path),
            "documents": self.store.count_documents(),
            "chunks": self.store.count_chunks(),
            "groups": {k: sum(1 for g in groups if g[0] == k) for k in ("temporal", "multiview")},
            "index_kind": self.store.get_meta("index_kind", "flat"),
            "index_sizes": {s: len(ix) for s, ix in (self.vectors.indexes.items() if self.vectors else [])},
            "dims": self.vectors.index_dims if self.vectors else None,
            "generation": self.store.generation(),
            "adapter": self.store.get_meta("adapter_class"),
            "levels": list(self.levels),
            "models": self.built_with(),
            "profile": "" if self.profile.empty else (self.profile.name or "(unnamed)"),
            "model_fallbacks": recorded_fallbacks(self),  # models that fell back when it was built
        }
