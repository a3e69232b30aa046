"""Opening and creating a knowledge base from a path or a uri: the one place that picks the backend.

* a directory holding ``kira.sqlite`` is an embedded knowledge base (SQLite + the core's indexes,
  `kira.knowledge_base.embedded`);
* a directory holding a Milvus Lite file, or any name with a ``uri``, is a Milvus-backed one
  (`kira.knowledge_base.milvus`, where `kira.knowledge_base.milvus.location` says how a name
  and a uri become a collection).

`KnowledgeBase.create` and `KnowledgeBase.open` build their storage with `create_storage` and
`open_storage`; `kira check`, `kira ingest` and `kira serve` ask `is_knowledge_base`, `exists`,
`backend_of` or `built_with` instead of looking for the files themselves. This module imports
no `KnowledgeBase`: the backends sit below it, the knowledge base above.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from kira.knowledge_base.embedded.store import DB_NAME
from kira.knowledge_base.milvus.location import LITE_FILE
from kira.knowledge_base.storage import Storage

BACKENDS = ("embedded", "milvus")


def is_embedded_directory(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a directory holding an embedded knowledge base's database."""
    return (Path(path) / DB_NAME).is_file()


def is_milvus_directory(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a local directory holding a Milvus Lite knowledge base (and no embedded one)."""
    return (Path(path) / LITE_FILE).exists() and not is_embedded_directory(path)


def is_knowledge_base(path: str | os.PathLike[str]) -> bool:
    """Whether the local directory `path` holds a knowledge base of either backend."""
    return is_embedded_directory(path) or is_milvus_directory(path)


def backend_of(path: str | os.PathLike[str], *, backend: str | None = None, uri: str | None = None) -> str:
    """The backend to open `path` with: `backend` when given (checked against `uri`), else "milvus" for a uri
    or a directory holding a Milvus Lite file, "embedded" otherwise. ValueError for an unknown backend or an
    embedded one given a uri."""
    if backend is None:
        return "milvus" if uri is not None or is_milvus_directory(path) else "embedded"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'embedded' or 'milvus'; got {backend!r}")
    if backend == "embedded" and uri is not None:
        raise ValueError("a uri is for the Milvus backend: pass backend='milvus', or drop uri for an embedded one")
    return backend


def create_storage(path: str | os.PathLike[str], settings: Mapping[str, str], *, backend: str = "embedded",
                   uri: str | None = None, token: str = "") -> Storage:
    """The storage of a new, empty knowledge base at `path` (or named `path` at `uri`) holding `settings`, open
    for writing (`KnowledgeBase.create` says what is refused)."""
    if backend_of(path, backend=backend, uri=uri) == "milvus":
        from kira.knowledge_base.milvus.storage import MilvusStorage

        return MilvusStorage.create(path, settings, uri=uri, token=token)
    from kira.knowledge_base.embedded.storage import EmbeddedStorage

    return EmbeddedStorage.create(path, settings)


def open_storage(path: str | os.PathLike[str], *, read_only: bool = False, backend: str | None = None,
                 uri: str | None = None, token: str = "") -> Storage:
    """The storage of the existing knowledge base at `path` (or named `path` at `uri`); `backend` None finds
    it (`backend_of`)."""
    if backend_of(path, backend=backend, uri=uri) == "milvus":
        from kira.knowledge_base.milvus.storage import MilvusStorage

        return MilvusStorage.open(path, uri=uri, token=token, read_only=read_only)
    from kira.knowledge_base.embedded.storage import EmbeddedStorage

    return EmbeddedStorage.open(path, read_only=read_only)


def exists(path: str | os.PathLike[str], *, uri: str | None = None, token: str = "") -> bool:
    """Whether a knowledge base is at `path` (a local directory of either backend), or named `path` at `uri`."""
    if uri is None:
        return is_knowledge_base(path)
    from kira.knowledge_base.milvus.storage import MilvusStorage

    return MilvusStorage.exists(path, uri=uri, token=token)


def built_with(path: str | os.PathLike[str], *, uri: str | None = None, token: str = "") -> dict[str, str]:
    """Part -> model identity of the stack that built the knowledge base at `path` (or named `path` at `uri`);
    {} before its first image. Read from its settings alone (an embedded one's index files are not loaded).
    ValueError where there is no knowledge base."""
    from kira.knowledge_base.model_identity import recorded_identity

    if backend_of(path, uri=uri) == "embedded":
        from kira.knowledge_base.embedded.store import Store

        if not is_embedded_directory(path):
            raise ValueError(f"{path} is not a kira knowledge base (no {DB_NAME}, no Milvus Lite file); build one "
                             "with `kira ingest`")
        store = Store(Path(path), read_only=True)
        try:
            return recorded_identity(store.get_meta)
        finally:
            store.close()
    storage = open_storage(path, read_only=True, uri=uri, token=token)
    try:
        return recorded_identity(storage.get_setting)
    finally:
        storage.close()
