"""Opening and creating a knowledge base from a path or a uri: the one place that picks the backend.

* a directory holding ``kira.sqlite`` is an embedded knowledge base (SQLite + the core's indexes,
  `kira.knowledge_base.embedded`);
* a directory holding a Milvus Lite file, or any name with a ``uri``, is a Milvus-backed one
  (`kira.knowledge_base.milvus`, where `kira.knowledge_base.milvus.location` says how a name
  and a uri become a collection).

`KnowledgeBase.create` and `KnowledgeBase.open` call `create_knowledge_base` and `open_knowledge_base`; `kira check`,
`kira ingest` and `kira serve` ask `is_knowledge_base` / `backend_of` instead of looking for
the files themselves.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kira.knowledge_base.embedded.store import DB_NAME
from kira.knowledge_base.milvus.location import LITE_FILE

BACKENDS = ("embedded", "milvus")


def is_embedded_directory(path: str | os.PathLike) -> bool:
    """Whether `path` is a directory holding an embedded knowledge base's database."""
    return (Path(path) / DB_NAME).is_file()


def is_milvus_directory(path: str | os.PathLike) -> bool:
    """Whether `path` is a local directory holding a Milvus Lite knowledge base (and no embedded one)."""
    return (Path(path) / LITE_FILE).exists() and not is_embedded_directory(path)


def is_knowledge_base(path: str | os.PathLike) -> bool:
    """Whether the local directory `path` holds a knowledge base of either backend."""
    return is_embedded_directory(path) or is_milvus_directory(path)


def backend_of(path: str | os.PathLike, *, backend: str | None = None, uri: str | None = None) -> str:
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


def built_with(path: str | os.PathLike, *, uri: str | None = None, token: str = "") -> dict[str, str]:
    """Part -> model identity of the stack that built the knowledge base at `path` (or named `path` at `uri`);
    {} before its first image. An embedded one is read from its database alone (its index files are not
    loaded); a Milvus one is opened read-only. ValueError where there is no knowledge base."""
    if backend_of(path, uri=uri) == "embedded":
        from kira.knowledge_base.embedded.store import Store
        from kira.knowledge_base.model_identity import recorded_identity

        if not is_embedded_directory(path):
            raise ValueError(f"{path} is not a kira knowledge base (no {DB_NAME}, no Milvus Lite file); build one "
                             "with `kira ingest`")
        store = Store(Path(path), read_only=True)
        try:
            return recorded_identity(store.get_meta)
        finally:
            store.close()
    kb = open_knowledge_base(path, read_only=True, uri=uri, token=token)
    try:
        return dict(kb.built_with())
    finally:
        kb.close()


def create_knowledge_base(path: str | os.PathLike, config: Any = None, models: Any = None, *, backend: str = "embedded",
           uri: str | None = None, token: str = "", **options: Any) -> Any:
    """A new, empty knowledge base at `path` (or named `path` at `uri`), open for writing (`KnowledgeBase.create`
    documents the options)."""
    if backend_of(path, backend=backend, uri=uri) == "milvus":
        from kira.knowledge_base.milvus.kb import MilvusKnowledgeBase

        return MilvusKnowledgeBase.create(path, config, models, uri=uri, token=token, **options)
    from kira.knowledge_base.kb import KnowledgeBase

    return KnowledgeBase.create_embedded(path, config, models, **options)


def open_knowledge_base(path: str | os.PathLike, models: Any = None, *, read_only: bool = False, backend: str | None = None,
         uri: str | None = None, token: str = "") -> Any:
    """The existing knowledge base at `path` (or named `path` at `uri`); `backend` None finds it (`backend_of`)."""
    if backend_of(path, backend=backend, uri=uri) == "milvus":
        from kira.knowledge_base.milvus.kb import MilvusKnowledgeBase

        return MilvusKnowledgeBase.open(path, models, uri=uri, token=token, read_only=read_only)
    from kira.knowledge_base.kb import KnowledgeBase

    return KnowledgeBase.open_embedded(path, models, read_only=read_only)
