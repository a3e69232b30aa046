"""The knowledge base's SQLite schema, by version, and the statements that migrate it.

Version 1: documents, chunks (with their visual and text vectors as float32 BLOBs),
passages, tags, temporal and multiview groups, provenance, meta. Version 2 adds the removal
log that derived views kept across commits read (`Store.removed_since`). Version 3 adds the
text pieces table: each document's chunk descriptions split as the grounding verifier reads
them, with their sentence vectors, written with the chunks and deleted with their document.
"""

from __future__ import annotations

import hashlib

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

# Version 3: the text pieces of every chunk description (`kira.text.pieces.summary_pieces`:
# the whole description and each sentence / ";" part) with their raw text-encoder vectors, so that
# verifying an answer encodes the claims only, not the evidence (1.1 s of a cold ask on 9.7k
# chunks). Keyed by (document, text): the caption's sentences and the tags, which every chunk of
# a document repeats, are stored once per document; removing the document removes them.
# The text index lets a new document reuse a piece another document already holds (a patch's location
# in images of the same size, a shared tag) instead of encoding it again.
_SCHEMA_V3 = (
    ("CREATE TABLE IF NOT EXISTS text_pieces (doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE, "
     "text TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (doc_id, text))"),
    "CREATE INDEX IF NOT EXISTS text_pieces_text ON text_pieces(text)",
)

# Version 4: a digest of each chunk's stored vectors, written with the chunk (`chunk_digest`), so
# that `kira check` tells a vector rewritten inside the database (which still parses, and which a
# repair would otherwise copy into the index) from the one kira stored. Chunks stored before have
# none (NULL): they are checked for sanity only.
_SCHEMA_V4 = ("ALTER TABLE chunks ADD COLUMN digest BLOB",)

# version -> the statements that upgrade from version - 1. Version 1 is the initial schema.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: tuple(statement for statement in _SCHEMA_V1.split(";") if statement.strip()),
    2: _SCHEMA_V2,
    3: _SCHEMA_V3,
    4: _SCHEMA_V4,
}


def chunk_digest(visual: bytes | None, text: bytes | None) -> bytes:
    """The 32-byte digest of one chunk's stored vector BLOBs (either may be None), as the
    ``chunks.digest`` column keeps it: 16 bytes of blake2b per space, visual then text, so that
    a rewritten vector is found in its own space (`space_digest`)."""
    return space_digest(visual) + space_digest(text)


def space_digest(blob: bytes | None) -> bytes:
    """The 16-byte half of `chunk_digest` for one space's vector BLOB (None: no vector)."""
    h = hashlib.blake2b(digest_size=16, person=b"kira-vector-v1")
    h.update(b"\x00" if blob is None else b"\x01" + bytes(blob))
    return h.digest()
