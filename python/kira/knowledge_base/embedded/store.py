"""The knowledge base's SQLite store: documents, chunks, passages, tags, groups, provenance.

SQLite runs in WAL mode, so any number of readers (threads or processes) see the last
committed state while one writer appends. The database is the source of truth: every
chunk's vectors are stored here too, as float32 BLOBs, so the index files beside the
database can always be verified and repaired from it without re-running a model
(see `kira.knowledge_base.embedded.vectors`).

Schema (version 4; version 3 lacked chunks.digest, version 2 also text_pieces, version 1 also
the removal log and the two partial indexes)::

    meta(key TEXT PK, value TEXT)                 config JSON, generation counter, dims, ...
    documents(doc_id TEXT PK, source, caption, width, height, metadata JSON, thumbnail PNG BLOB,
              added_at REAL)
    chunks(id INTEGER PK AUTOINCREMENT, doc_id, level, parent_id, x0, y0, x1, y1, description,
           visual BLOB float32, text BLOB float32, digest BLOB: blake2b of visual and text, see
           store_schema.chunk_digest; NULL for chunks stored before version 4)
    passages(chunk_id INTEGER PK -> chunks.id, doc_id, ord, text)
    tags(doc_id, tag)                              PK (doc_id, tag)
    groups(kind 'temporal'|'multiview', group_id, doc_id, ord)   PK (kind, group_id, doc_id)
    provenance(doc_id PK, data JSON)               where each document came from and how it was encoded
    schema_version(version INTEGER)                one row
    removed_chunks(seq INTEGER PK AUTOINCREMENT, id)  every removed chunk id, logged by a trigger
    text_pieces(doc_id, text, vector BLOB float32)  PK (doc_id, text): the sentence pieces of the
                                                   document's chunk descriptions, encoded at ingest
    indexes: chunks(doc_id), chunks(level), chunks(id) WHERE visual IS NOT NULL, chunks(id) WHERE text IS NOT NULL

Chunk ids are never reused (AUTOINCREMENT), so an index file that still holds a removed
id is detected and repaired instead of silently pointing at a different chunk.
Thread safety: one `Store` object belongs to one thread; open another for another thread.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from kira.knowledge_base.embedded.store_reads import StoreReads, _space_column
from kira.knowledge_base.embedded.store_schema import _MIGRATIONS, chunk_digest
from kira.knowledge_base.rows import MAX_DESCRIPTION_CHARS

__all__ = ["DB_NAME", "SCHEMA_VERSION", "Store"]

SCHEMA_VERSION = 4
DB_NAME = "kira.sqlite"

def _blob(vector: np.ndarray | None) -> bytes | None:
    if vector is None:
        return None
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


class Store(StoreReads):
    """A connection to one knowledge base's database.

    Parameters
    ----------
    directory: the knowledge base directory (the database file is `DB_NAME` inside it).
    read_only: open with `mode=ro`; writes raise sqlite3.OperationalError.
    create: create the schema if the database is new.

    Raises ValueError when the database was written by a newer kira (schema too new), or
    (without `create`) when it holds no kira schema at all: a zero-byte or blank
    ``kira.sqlite`` is refused, never silently re-created as an empty knowledge base.
    """

    def __init__(self, directory: Path, *, read_only: bool = False, create: bool = False) -> None:
        self.path = Path(directory) / DB_NAME
        self.read_only = read_only
        if read_only:
            # percent-encoded: a '?' or '#' in a folder name would otherwise end the path early
            uri = f"file:{urllib.parse.quote(os.fsencode(self.path.absolute()))}?mode=ro"
            self.conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
        else:
            self.conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        if not create and self.schema_version() == 0:  # read before any pragma writes to the file
            size = self.path.stat().st_size if self.path.exists() else 0
            self.conn.close()
            raise ValueError(
                f"{self.path} holds no knowledge base (an empty database, {size} bytes): the index files beside "
                "it cannot be trusted to match anything. Restore kira.sqlite from a backup, or move the "
                "directory away and build a new knowledge base with `kira ingest`"
            )
        if not read_only:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._in_tx = False
        if create:
            self._migrate()
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"{self.path} has schema version {version}, newer than this kira understands "
                f"({SCHEMA_VERSION}); upgrade kira"
            )
        if version < SCHEMA_VERSION and not read_only:
            self._migrate()
        self._changes_at_commit = self.conn.total_changes  # rows written when the last commit ended

    # ---- schema ---------------------------------------------------------------------
    def schema_version(self) -> int:
        """The stored schema version (0 for an empty database)."""
        try:
            row = self.conn.execute("SELECT version FROM schema_version").fetchone()
        except sqlite3.OperationalError:
            return 0
        except sqlite3.DatabaseError as exc:  # "file is not a database" and the like
            raise ValueError(f"{self.path} is damaged or not a kira database ({exc}); restore it from a "
                             "backup") from None
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        current = self.schema_version()
        for version in range(current + 1, SCHEMA_VERSION + 1):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _MIGRATIONS[version]:
                    try:
                        self.conn.execute(statement)
                    except sqlite3.OperationalError as exc:
                        # ADD COLUMN has no IF NOT EXISTS: a column already there is what the statement wants
                        if "duplicate column name" not in str(exc):
                            raise
                self.conn.execute("DELETE FROM schema_version")
                self.conn.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    # ---- transactions ---------------------------------------------------------------
    def begin(self) -> None:
        """Open a write transaction if none is open (idempotent)."""
        if not self._in_tx:
            self.conn.execute("BEGIN IMMEDIATE")
            self._in_tx = True

    @property
    def in_transaction(self) -> bool:
        return self._in_tx

    @contextmanager
    def savepoint(self, name: str = "kira_batch") -> Iterator[None]:
        """A nested transaction: everything written inside is kept together or, on any exception, undone
        (the exception propagates); the enclosing transaction stays open either way."""
        if not name.isidentifier():
            raise ValueError(f"savepoint name must be an identifier; got {name!r}")
        self.conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
            raise
        self.conn.execute(f"RELEASE {name}")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Run the reads inside the block against one committed state of the database.

        Outside a transaction every statement sees the latest commit, so two reads (the new
        chunk ids, then their vectors) can straddle another process's commit. Inside this
        block they all see the state of the first read (a deferred read transaction; WAL
        readers never block the writer, nor the writer them). Within an open write
        transaction, or a snapshot already open, it adds nothing: those already read one state.
        """
        if self._in_tx or self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            if self.conn.in_transaction:
                self.conn.execute("COMMIT")  # a read transaction: commit and rollback both just end it

    def commit(self) -> int:
        """Bump the generation counter and commit; returns the new generation. With no row written
        since the last commit it only ends the transaction and returns the generation unchanged:
        readers rebuild what they derive from the database when the generation moves."""
        if self.conn.total_changes == self._changes_at_commit:
            if self._in_tx:
                self.conn.execute("COMMIT")
                self._in_tx = False
            return self.generation()
        self.begin()
        generation = self.generation() + 1
        self.set_meta("generation", str(generation))
        self.conn.execute("COMMIT")
        self._in_tx = False
        self._changes_at_commit = self.conn.total_changes
        return generation

    def commit_meta(self) -> None:
        """Commit without bumping the generation (only for bookkeeping that no index depends on)."""
        if self._in_tx:
            self.conn.execute("COMMIT")
            self._in_tx = False
        self._changes_at_commit = self.conn.total_changes

    def group_size(self, kind: str, group_id: str) -> int:
        return int(self.conn.execute(
            "SELECT COUNT(*) FROM groups WHERE kind = ? AND group_id = ?", (kind, str(group_id))
        ).fetchone()[0])

    def rollback(self) -> None:
        """Discard the open transaction, if any."""
        if self._in_tx:
            self.conn.execute("ROLLBACK")
            self._in_tx = False
            self._changes_at_commit = self.conn.total_changes

    def close(self) -> None:
        self.rollback()
        self.conn.close()

    # ---- meta -----------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.begin()
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def generation(self) -> int:
        """How many commits this knowledge base has seen; the index manifest records it."""
        return int(self.get_meta("generation", "0") or 0)

    # ---- writes ---------------------------------------------------------------------
    def has_document(self, doc_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM documents WHERE doc_id = ?", (doc_id,)).fetchone() is not None

    def insert_document(
        self,
        doc_id: str,
        *,
        source: str | None,
        caption: str | None,
        width: int,
        height: int,
        metadata: dict[str, Any],
        tags: Sequence[str],
        thumbnail: bytes | None,
        provenance: dict[str, Any],
    ) -> None:
        """Insert one document row with its tags and provenance. Duplicate id -> ValueError."""
        self.begin()
        if self.has_document(doc_id):
            raise ValueError(f"document {doc_id!r} is already in the knowledge base; remove it first or pick another id")
        self.conn.execute(
            "INSERT INTO documents(doc_id, source, caption, width, height, metadata, thumbnail, added_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (doc_id, source, caption, int(width), int(height), json.dumps(metadata, sort_keys=True, default=str),
             thumbnail, time.time()),
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO tags(doc_id, tag) VALUES (?, ?)", [(doc_id, str(t)) for t in tags]
        )
        self.conn.execute(
            "INSERT INTO provenance(doc_id, data) VALUES (?, ?)", (doc_id, json.dumps(provenance, sort_keys=True, default=str))
        )

    def insert_chunk(
        self,
        doc_id: str,
        level: str,
        *,
        parent_id: int | None,
        box: tuple[int, int, int, int] | None,
        description: str,
        visual: np.ndarray | None,
        text: np.ndarray | None,
    ) -> int:
        """Insert one chunk with its raw vectors; returns its new id. The description is cut at
        `MAX_DESCRIPTION_CHARS` (what retrieval and reasoning read of one chunk; the document's
        caption and a passage's text are stored whole in their own tables)."""
        self.begin()
        if len(description) > MAX_DESCRIPTION_CHARS:
            description = description[:MAX_DESCRIPTION_CHARS]
        x0, y0, x1, y1 = box if box is not None else (None, None, None, None)
        vblob, tblob = _blob(visual), _blob(text)
        cur = self.conn.execute(
            "INSERT INTO chunks(doc_id, level, parent_id, x0, y0, x1, y1, description, visual, text, digest) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (doc_id, level, parent_id, x0, y0, x1, y1, description, vblob, tblob, chunk_digest(vblob, tblob)),
        )
        assert cur.lastrowid is not None  # every INSERT sets it
        return int(cur.lastrowid)

    def insert_pieces(self, doc_id: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store the text pieces of `doc_id`'s chunk descriptions with their raw float32 text vectors
        (rows follow `texts`; a piece already stored for the document is kept as it is)."""
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"need one vector per piece: {len(texts)} pieces, vectors of shape {vectors.shape}")
        self.begin()
        self.conn.executemany(
            "INSERT OR IGNORE INTO text_pieces(doc_id, text, vector) VALUES (?, ?, ?)",
            [(doc_id, str(t), _blob(v)) for t, v in zip(texts, vectors)],
        )

    def insert_passage(self, chunk_id: int, doc_id: str, ord_: int, text: str) -> None:
        self.begin()
        self.conn.execute(
            "INSERT INTO passages(chunk_id, doc_id, ord, text) VALUES (?, ?, ?, ?)", (chunk_id, doc_id, ord_, text)
        )

    def add_to_group(self, kind: str, group_id: str, doc_id: str, order: float) -> None:
        """Put `doc_id` into the temporal sequence / multiview set `group_id` at position `order`."""
        if kind not in ("temporal", "multiview"):
            raise ValueError(f"group kind must be 'temporal' or 'multiview'; got {kind!r}")
        self.begin()
        self.conn.execute(
            "INSERT OR REPLACE INTO groups(kind, group_id, doc_id, ord) VALUES (?, ?, ?, ?)",
            (kind, str(group_id), doc_id, float(order)),
        )

    def delete_document(self, doc_id: str) -> list[int]:
        """Delete a document and everything hanging off it; returns the removed chunk ids."""
        self.begin()
        ids = [int(r[0]) for r in self.conn.execute("SELECT id FROM chunks WHERE doc_id = ?", (doc_id,))]
        self.conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))
        return ids

    # ---- reads ----------------------------------------------------------------------
    def count_documents(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def count_chunks(self) -> dict[str, int]:
        """Chunk counts by level."""
        return {lvl: int(n) for lvl, n in self.conn.execute("SELECT level, COUNT(*) FROM chunks GROUP BY level")}

    def chunk_ids(self, *, space: str | None = None, levels: Iterable[str] | None = None,
                  after: int | None = None, upto: int | None = None) -> np.ndarray:
        """Sorted int64 ids of chunks (those having a vector in `space` when given, at `levels` when
        given, with after < id <= upto when given)."""
        sql = "SELECT id FROM chunks WHERE 1=1"
        args: list[Any] = []
        if space is not None:
            sql += f" AND {_space_column(space)} IS NOT NULL"
        if levels is not None:
            levels = list(levels)
            sql += f" AND level IN ({','.join('?' * len(levels))})"
            args += levels
        if after is not None:
            sql += " AND id > ?"
            args.append(int(after))
        if upto is not None:
            sql += " AND id <= ?"
            args.append(int(upto))
        sql += " ORDER BY id"
        return np.fromiter((r[0] for r in self.conn.execute(sql, args)), dtype=np.int64)

    def removed_since(self, seq: int) -> tuple[np.ndarray, int] | None:
        """(ids of chunks removed after log position `seq`, the last position read), or None
        for a version-1 database, which keeps no log (sync by listing every id instead)."""
        try:
            rows = self.conn.execute("SELECT seq, id FROM removed_chunks WHERE seq > ? ORDER BY seq", (int(seq),)).fetchall()
        except sqlite3.OperationalError:
            return None
        # the last position read, not the log's current end: a removal committed meanwhile is read next time
        return np.array([r[1] for r in rows], dtype=np.int64), int(rows[-1][0]) if rows else int(seq)

    def max_chunk_id(self) -> int:
        """The largest chunk id stored (0 when there is none)."""
        return int(self.conn.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()[0])

    def removal_log_position(self) -> int | None:
        """The removal log's last position (0 when empty), or None for a version-1 database."""
        try:
            return int(self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM removed_chunks").fetchone()[0])
        except sqlite3.OperationalError:
            return None

