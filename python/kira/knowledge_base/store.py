"""The knowledge base's SQLite store: documents, chunks, passages, tags, groups, provenance.

SQLite runs in WAL mode, so any number of readers (threads or processes) see the last
committed state while one writer appends. The database is the source of truth: every
chunk's vectors are stored here too, as float32 BLOBs, so the index files beside the
database can always be verified and repaired from it without re-running a model
(see `kira.knowledge_base.vectors`).

Schema (version 2; version 1 lacked the removal log and the two partial indexes)::

    meta(key TEXT PK, value TEXT)                 config JSON, generation counter, dims, ...
    documents(doc_id TEXT PK, source, caption, width, height, metadata JSON, thumbnail PNG BLOB,
              added_at REAL)
    chunks(id INTEGER PK AUTOINCREMENT, doc_id, level, parent_id, x0, y0, x1, y1, description,
           visual BLOB float32, text BLOB float32)
    passages(chunk_id INTEGER PK -> chunks.id, doc_id, ord, text)
    tags(doc_id, tag)                              PK (doc_id, tag)
    groups(kind 'temporal'|'multiview', group_id, doc_id, ord)   PK (kind, group_id, doc_id)
    provenance(doc_id PK, data JSON)               where each document came from and how it was encoded
    schema_version(version INTEGER)                one row
    removed_chunks(seq INTEGER PK AUTOINCREMENT, id)  every removed chunk id, logged by a trigger
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

SCHEMA_VERSION = 2
DB_NAME = "kira.sqlite"
MAX_DESCRIPTION_CHARS = 8192
"""A chunk description longer than this is cut when stored: a 10 MB caption made every ask
that retrieved it take 40 s and 3.5 GB (tokenised, verified and quoted whole)."""

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    source TEXT,
    caption TEXT,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    thumbnail BLOB,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    level TEXT NOT NULL CHECK (level IN ('document', 'region', 'patch', 'passage')),
    parent_id INTEGER,
    x0 INTEGER, y0 INTEGER, x1 INTEGER, y1 INTEGER,
    description TEXT NOT NULL DEFAULT '',
    visual BLOB,
    text BLOB
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE INDEX IF NOT EXISTS chunks_level ON chunks(level);
CREATE TABLE IF NOT EXISTS passages (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    ord INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tags (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (doc_id, tag)
);
CREATE TABLE IF NOT EXISTS groups (
    kind TEXT NOT NULL CHECK (kind IN ('temporal', 'multiview')),
    group_id TEXT NOT NULL,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    ord REAL NOT NULL,
    PRIMARY KEY (kind, group_id, doc_id)
);
CREATE TABLE IF NOT EXISTS provenance (
    doc_id TEXT PRIMARY KEY REFERENCES documents(doc_id) ON DELETE CASCADE,
    data TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
"""

# Version 2: what lets an index sync touch only what changed. The ids of the chunks that have
# a vector in each space, as partial indexes (a full sync lists them; without these it scanned
# the whole chunks table, BLOBs and all: 100 ms per space at 100k chunks, 24 ms now), and a
# log of removed chunk ids that a trigger fills (also on cascade from documents), so a
# reader's refresh reads the chunks added above the last id it saw and the removals logged
# since, not every id (`Store.chunk_ids(after=)`, `Store.removed_since`).
_SCHEMA_V2 = (
    "CREATE INDEX IF NOT EXISTS chunks_with_visual ON chunks(id) WHERE visual IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS chunks_with_text ON chunks(id) WHERE text IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS removed_chunks (seq INTEGER PRIMARY KEY AUTOINCREMENT, id INTEGER NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS chunks_removed AFTER DELETE ON chunks "
    "BEGIN INSERT INTO removed_chunks(id) VALUES (old.id); END",
)

# version -> the statements that upgrade from version - 1. Version 1 is the initial schema.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: tuple(statement for statement in _SCHEMA_V1.split(";") if statement.strip()),
    2: _SCHEMA_V2,
}


@dataclass(frozen=True)
class ChunkRow:
    """One stored chunk (vectors not included; fetch them with `Store.vectors`)."""

    id: int
    doc_id: str
    level: str
    parent_id: int | None
    box: tuple[int, int, int, int] | None
    description: str


@dataclass(frozen=True)
class DocumentRow:
    """One stored document."""

    doc_id: str
    source: str | None
    caption: str | None
    width: int
    height: int
    metadata: dict[str, Any]
    tags: tuple[str, ...]


def _blob(vector: np.ndarray | None) -> bytes | None:
    if vector is None:
        return None
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


class Store:
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
                    self.conn.execute(statement)
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
        """Bump the generation counter and commit; returns the new generation."""
        self.begin()
        generation = self.generation() + 1
        self.set_meta("generation", str(generation))
        self.conn.execute("COMMIT")
        self._in_tx = False
        return generation

    def commit_meta(self) -> None:
        """Commit without bumping the generation (only for bookkeeping that no index depends on)."""
        if self._in_tx:
            self.conn.execute("COMMIT")
            self._in_tx = False

    def group_size(self, kind: str, group_id: str) -> int:
        return int(self.conn.execute(
            "SELECT COUNT(*) FROM groups WHERE kind = ? AND group_id = ?", (kind, str(group_id))
        ).fetchone()[0])

    def rollback(self) -> None:
        """Discard the open transaction, if any."""
        if self._in_tx:
            self.conn.execute("ROLLBACK")
            self._in_tx = False

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
        cur = self.conn.execute(
            "INSERT INTO chunks(doc_id, level, parent_id, x0, y0, x1, y1, description, visual, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (doc_id, level, parent_id, x0, y0, x1, y1, description, _blob(visual), _blob(text)),
        )
        return int(cur.lastrowid)

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

    def vectors(self, space: str, ids: Sequence[int] | np.ndarray, dim: int) -> np.ndarray:
        """float32 (n, dim) raw vectors of `ids` in `space` ('visual' or 'text'), in the given order;
        a zero row for an id that is not stored or has no vector in `space` (see `stored_vectors`)."""
        out = np.zeros((len(ids), dim), dtype=np.float32)
        found, vecs = self.stored_vectors(space, ids, dim)
        position = {int(i): n for n, i in enumerate(ids)}
        for row, cid in enumerate(found.tolist()):
            out[position[cid]] = vecs[row]
        return out

    def stored_vectors(self, space: str, ids: Sequence[int] | np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(the ids of `ids` that have a stored vector in `space`, in the given order; their float32
        (m, dim) vectors). An id removed meanwhile, or without a vector in `space`, is left out.

        Raises ValueError naming the chunk when a stored vector does not hold `dim` float32 values.
        """
        column = _space_column(space)
        blobs: dict[int, bytes] = {}
        id_list = list(dict.fromkeys(int(i) for i in ids))
        for start in range(0, len(id_list), 900):
            part = id_list[start : start + 900]
            rows = self.conn.execute(
                f"SELECT id, {column} FROM chunks WHERE id IN ({','.join('?' * len(part))}) AND {column} IS NOT NULL",
                part,
            )
            blobs.update((int(cid), blob) for cid, blob in rows)
        found = [i for i in id_list if i in blobs]
        out = np.zeros((len(found), dim), dtype=np.float32)
        for row, cid in enumerate(found):
            blob = blobs[cid]
            if len(blob) != 4 * dim:
                raise ValueError(
                    f"chunk {cid}'s stored {space} vector holds {len(blob)} bytes, not {dim} float32 values; "
                    "the database is damaged (run `kira check` on the knowledge base)"
                )
            out[row] = np.frombuffer(blob, dtype="<f4", count=dim)
        return np.asarray(found, dtype=np.int64), out

    def usable_vectors(self, space: str, ids: Sequence[int] | np.ndarray,
                       dim: int) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
        """As `stored_vectors`, but a damaged vector (wrong length, NaN/inf, all zeros) is left
        out too: (ids, vectors, {chunk id: what is wrong with its vector})."""
        column = _space_column(space)
        damaged: dict[int, str] = {}
        try:
            found, vecs = self.stored_vectors(space, ids, dim)
        except ValueError:  # some blob has the wrong length: read them one by one
            keep_ids, keep = [], []
            for cid in dict.fromkeys(int(i) for i in ids):
                row = self.conn.execute(f"SELECT {column} FROM chunks WHERE id = ? AND {column} IS NOT NULL",
                                        (cid,)).fetchone()
                if row is None:
                    continue
                if len(row[0]) != 4 * dim:
                    damaged[cid] = f"{len(row[0])} bytes instead of {4 * dim}"
                    continue
                keep_ids.append(cid)
                keep.append(np.frombuffer(row[0], dtype="<f4", count=dim))
            found = np.asarray(keep_ids, dtype=np.int64)
            vecs = np.asarray(keep, dtype=np.float32).reshape(len(keep), dim)
        finite = np.isfinite(vecs).all(axis=1)
        nonzero = np.abs(np.where(np.isfinite(vecs), vecs, 0)).sum(axis=1) > 0
        ok = finite & nonzero
        for cid, fin in zip(found[~ok].tolist(), finite[~ok].tolist()):
            damaged[int(cid)] = "NaN or inf values" if not fin else "all zeros"
        return found[ok], np.ascontiguousarray(vecs[ok]), damaged

    def iter_vectors(self, space: str, dim: int, *, batch: int = 4096) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every (ids, vectors) in `space`, in batches, ordered by id."""
        column = _space_column(space)
        cur = self.conn.execute(f"SELECT id, {column} FROM chunks WHERE {column} IS NOT NULL ORDER BY id")
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                return
            ids = np.array([r[0] for r in rows], dtype=np.int64)
            vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), dim)
            yield ids, vecs.astype(np.float32)

    def chunks(self, ids: Sequence[int] | np.ndarray) -> dict[int, ChunkRow]:
        """Rows of the given chunk ids (unknown ids are absent from the result)."""
        out: dict[int, ChunkRow] = {}
        id_list = [int(i) for i in ids]
        for start in range(0, len(id_list), 900):
            part = id_list[start : start + 900]
            rows = self.conn.execute(
                "SELECT id, doc_id, level, parent_id, x0, y0, x1, y1, description FROM chunks "
                f"WHERE id IN ({','.join('?' * len(part))})",
                part,
            )
            for cid, doc, level, parent, x0, y0, x1, y1, desc in rows:
                box = None if x0 is None else (int(x0), int(y0), int(x1), int(y1))
                out[int(cid)] = ChunkRow(int(cid), doc, level, parent, box, desc or "")
        return out

    def document_chunk_ids(self, doc_ids: Iterable[str]) -> dict[str, int]:
        """doc_id -> id of its document-level chunk."""
        docs = list(doc_ids)
        out: dict[str, int] = {}
        for start in range(0, len(docs), 900):
            part = docs[start : start + 900]
            rows = self.conn.execute(
                # '+level' keeps SQLite on the doc_id index (the level index would scan every document)
                f"SELECT doc_id, id FROM chunks WHERE +level = 'document' AND doc_id IN ({','.join('?' * len(part))})",
                part,
            )
            out.update({d: int(i) for d, i in rows})
        return out

    def documents(self, doc_ids: Iterable[str] | None = None) -> dict[str, DocumentRow]:
        """Rows of the given documents (all when None)."""
        if doc_ids is None:
            rows = self.conn.execute("SELECT doc_id, source, caption, width, height, metadata FROM documents ORDER BY doc_id")
            docs = list(rows)
        else:
            wanted = list(dict.fromkeys(doc_ids))
            docs = []
            for start in range(0, len(wanted), 900):
                part = wanted[start : start + 900]
                docs += list(
                    self.conn.execute(
                        "SELECT doc_id, source, caption, width, height, metadata FROM documents "
                        f"WHERE doc_id IN ({','.join('?' * len(part))})",
                        part,
                    )
                )
        tags: dict[str, list[str]] = {}
        if doc_ids is None:
            tag_rows = list(self.conn.execute("SELECT doc_id, tag FROM tags ORDER BY doc_id, tag"))
        else:
            names = [d[0] for d in docs]
            tag_rows = []
            for start in range(0, len(names), 900):
                part = names[start : start + 900]
                tag_rows += list(self.conn.execute(
                    f"SELECT doc_id, tag FROM tags WHERE doc_id IN ({','.join('?' * len(part))}) ORDER BY doc_id, tag",
                    part,
                ))
        for doc, tag in tag_rows:
            tags.setdefault(doc, []).append(tag)
        return {
            d: DocumentRow(d, src, cap, int(w), int(h), json.loads(meta or "{}"), tuple(tags.get(d, ())))
            for d, src, cap, w, h, meta in docs
        }

    def thumbnail(self, doc_id: str) -> bytes | None:
        row = self.conn.execute("SELECT thumbnail FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        return row[0] if row else None

    def provenance(self, doc_id: str) -> dict[str, Any]:
        row = self.conn.execute("SELECT data FROM provenance WHERE doc_id = ?", (doc_id,)).fetchone()
        return json.loads(row[0]) if row else {}

    def provenances(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """doc_id -> provenance dict, for many documents in one query per 900."""
        docs = list(dict.fromkeys(doc_ids))
        out: dict[str, dict[str, Any]] = {}
        for start in range(0, len(docs), 900):
            part = docs[start : start + 900]
            rows = self.conn.execute(
                f"SELECT doc_id, data FROM provenance WHERE doc_id IN ({','.join('?' * len(part))})", part
            )
            out.update({d: json.loads(data) for d, data in rows})
        return out

    def groups(self) -> list[tuple[str, str, list[str]]]:
        """Every group as (kind, group_id, doc_ids in order)."""
        out: dict[tuple[str, str], list[str]] = {}
        for kind, gid, doc in self.conn.execute("SELECT kind, group_id, doc_id FROM groups ORDER BY kind, group_id, ord, doc_id"):
            out.setdefault((kind, gid), []).append(doc)
        return [(k, g, docs) for (k, g), docs in out.items()]

    def captioned_document_ids(self) -> np.ndarray:
        """Ids of document chunks whose document has a user caption or tags (bridge training pairs)."""
        rows = self.conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
            "WHERE c.level = 'document' AND c.visual IS NOT NULL AND c.text IS NOT NULL AND "
            "((d.caption IS NOT NULL AND d.caption != '') OR EXISTS (SELECT 1 FROM tags t WHERE t.doc_id = d.doc_id)) "
            "ORDER BY c.id"
        )
        return np.fromiter((r[0] for r in rows), dtype=np.int64)


def _space_column(space: str) -> str:
    if space not in ("visual", "text"):
        raise ValueError(f"vector space must be 'visual' or 'text'; got {space!r}")
    return space
