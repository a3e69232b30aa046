"""Read queries of the knowledge base's database (a part of `Store`).

`StoreReads` is a mixin of `kira.knowledge_base.embedded.store.Store`: stored vectors (decoded,
validated, in batches), chunk and document rows, thumbnails, provenance, groups, and the
rows the derived views read. Every SQL statement kira runs lives in the store.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable, Iterator, Sequence, cast

import numpy as np

from kira.knowledge_base.embedded.store_schema import space_digest
from kira.knowledge_base.rows import ChunkRow, DocumentRow


_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def _space_column(space: str) -> str:
    if space not in ("visual", "text"):
        raise ValueError(f"vector space must be 'visual' or 'text'; got {space!r}")
    return space


class StoreReads:
    """Mixin of `Store`: its read queries (module docstring). Needs ``conn``."""

    conn: sqlite3.Connection  # the Store's connection

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
        """As `stored_vectors`, but a damaged vector is left out too: (ids, vectors, {chunk id: what is
        wrong with its vector}). Damaged: the wrong length, bytes that differ from the digest stored
        with the chunk (rewritten inside the database), NaN/inf, all zeros, or a squared norm that
        float32 cannot hold (its dot products overflow or vanish: no encoder's output)."""
        column = _space_column(space)
        digests = self.has_digests()
        half = slice(0, 16) if space == "visual" else slice(16, 32)
        rows: dict[int, tuple[Any, ...]] = {}
        id_list = list(dict.fromkeys(int(i) for i in ids))
        for start in range(0, len(id_list), 900):  # one read of each blob, with its digest
            part = id_list[start : start + 900]
            rows.update((int(r[0]), r) for r in self.conn.execute(
                f"SELECT id, {column}{', digest' if digests else ''} FROM chunks "
                f"WHERE id IN ({','.join('?' * len(part))}) AND {column} IS NOT NULL", part))
        damaged: dict[int, str] = {}
        keep_ids: list[int] = []
        keep: list[bytes] = []
        intact: list[bool] = []  # as the digest written with it says (True where there is none)
        for cid in id_list:
            row = rows.get(cid)
            if row is None:
                continue
            blob = row[1]
            if len(blob) != 4 * dim:
                damaged[cid] = f"{len(blob)} bytes instead of {4 * dim}"
                continue
            keep_ids.append(cid)
            keep.append(blob)
            intact.append(not digests or row[2] is None or space_digest(blob) == bytes(row[2])[half])
        found = np.asarray(keep_ids, dtype=np.int64)
        vecs = np.frombuffer(b"".join(keep), dtype="<f4").reshape(len(keep), dim).astype(np.float32)
        finite = cast("np.ndarray", np.isfinite(vecs).all(axis=1))  # numpy's stub: maybe a scalar
        clean = np.where(np.isfinite(vecs), vecs, 0).astype(np.float64)
        squared = np.einsum("ij,ij->i", clean, clean)
        sane = finite & (squared <= _FLOAT32_MAX) & (squared >= _FLOAT32_TINY)
        ok = sane & np.asarray(intact, dtype=bool)
        for cid, fin, sq, good in zip(found[~ok].tolist(), finite[~ok].tolist(), squared[~ok].tolist(),
                                      sane[~ok].tolist()):
            if good:  # sane values, yet not the bytes kira stored
                damaged[int(cid)] = "differs from the digest stored with it (rewritten outside kira)"
            elif not fin:
                damaged[int(cid)] = "NaN or inf values"
            elif sq == 0:
                damaged[int(cid)] = "all zeros"
            else:
                damaged[int(cid)] = (f"norm {np.sqrt(sq):.3g}: its dot products "
                                     f"{'overflow' if sq > 1 else 'vanish in'} float32")
        return found[ok], np.ascontiguousarray(vecs[ok]), damaged

    def has_digests(self) -> bool:
        """Whether the chunks table has the digest column (schema 4; a read-only open of an older
        database has not)."""
        if not hasattr(self, "_has_digests"):
            columns = {r[1] for r in self.conn.execute("PRAGMA table_info(chunks)")}
            self._has_digests = "digest" in columns
        return self._has_digests

    def digest_counts(self) -> tuple[int, int]:
        """(chunks with a stored digest, chunks without one)."""
        total = int(self.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        if not self.has_digests():
            return 0, total
        with_digest = int(self.conn.execute("SELECT COUNT(*) FROM chunks WHERE digest IS NOT NULL").fetchone()[0])
        return with_digest, total - with_digest

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

    def piece_vectors(self, keys: Iterable[tuple[str, str]], dim: int) -> dict[tuple[str, str], np.ndarray]:
        """{(doc_id, text): float32 raw text vector} of the stored text pieces among `keys`.

        A key not stored is absent; so is a vector that does not hold `dim` float32 values (the
        caller encodes what is absent). A database without the table (schema < 3, opened
        read-only) holds none: {}.
        """
        by_doc: dict[str, dict[str, None]] = {}
        for d, t in keys:
            by_doc.setdefault(str(d), {})[str(t)] = None
        out: dict[tuple[str, str], np.ndarray] = {}
        try:
            for doc, wanted in by_doc.items():  # one primary-key range per document
                texts = list(wanted)
                for start in range(0, len(texts), 900):
                    part = texts[start : start + 900]
                    rows = self.conn.execute(
                        f"SELECT text, vector FROM text_pieces WHERE doc_id = ? AND text IN ({','.join('?' * len(part))})",
                        [doc, *part],
                    )
                    out.update(((doc, t), np.frombuffer(blob, dtype="<f4").astype(np.float32))
                               for t, blob in rows if len(blob) == 4 * dim)
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # a knowledge base from before schema 3, opened read-only
                return {}
            raise
        return out

    def stored_piece_texts(self, texts: Iterable[str], dim: int) -> dict[str, np.ndarray]:
        """{text: float32 raw vector} for the `texts` some document already stores as a text piece (any
        document's; the same text has the same encoding). Texts not stored, or stored with a vector of
        another length, are absent; a database without the table gives {}."""
        wanted = list(dict.fromkeys(str(t) for t in texts))
        out: dict[str, np.ndarray] = {}
        try:
            for start in range(0, len(wanted), 900):
                part = wanted[start : start + 900]
                rows = self.conn.execute(
                    f"SELECT text, vector FROM text_pieces WHERE text IN ({','.join('?' * len(part))})", part)
                out.update((t, np.frombuffer(blob, dtype="<f4").astype(np.float32))
                           for t, blob in rows if len(blob) == 4 * dim and t not in out)
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise
        return out

    def documents_without_pieces(self) -> list[str]:
        """Ids of the documents that have chunks but no stored text pieces (stored before kira kept them),
        sorted; every document with chunks when the database has no text_pieces table."""
        try:
            rows = self.conn.execute(
                "SELECT DISTINCT c.doc_id FROM chunks c WHERE NOT EXISTS "
                "(SELECT 1 FROM text_pieces p WHERE p.doc_id = c.doc_id) ORDER BY c.doc_id")
            return [r[0] for r in rows]
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
        return [r[0] for r in self.conn.execute("SELECT DISTINCT doc_id FROM chunks ORDER BY doc_id")]

    def descriptions(self, doc_ids: Iterable[str], *, patches: bool = True) -> dict[str, list[str]]:
        """doc_id -> the descriptions of its chunks, by chunk id (without patch chunks' unless `patches`)."""
        docs = list(dict.fromkeys(doc_ids))
        out: dict[str, list[str]] = {d: [] for d in docs}
        levels = "" if patches else " AND level != 'patch'"
        for start in range(0, len(docs), 900):
            part = docs[start : start + 900]
            rows = self.conn.execute(
                f"SELECT doc_id, description FROM chunks WHERE doc_id IN ({','.join('?' * len(part))}){levels} "
                "ORDER BY id", part)
            for doc, description in rows:
                out[doc].append(description or "")
        return out

    def described_chunks(self, doc_ids: Iterable[str], *, levels: Iterable[str]
                         ) -> dict[str, tuple[str | None, bool, list[tuple[str, str]]]]:
        """doc_id -> (its caption, whether it has an image, [(level, description)] of its chunks of the given
        `levels`, by chunk id): what `kira.knowledge_base.pieces.pieces_to_store` reads."""
        docs = list(dict.fromkeys(doc_ids))
        out: dict[str, tuple[str | None, bool, list[tuple[str, str]]]] = {}
        wanted = sorted(set(levels))
        for start in range(0, len(docs), 900):
            part = docs[start : start + 900]
            heads = self.conn.execute(
                f"SELECT doc_id, caption, width FROM documents WHERE doc_id IN ({','.join('?' * len(part))})", part)
            for doc, caption, width in heads:
                out[doc] = (caption, bool(width), [])
            rows = self.conn.execute(
                f"SELECT c.doc_id, c.level, c.description FROM chunks c WHERE c.doc_id IN ({','.join('?' * len(part))})"
                f" AND c.level IN ({','.join('?' * len(wanted))}) ORDER BY c.id", [*part, *wanted])
            for doc, level, description in rows:
                if doc in out:
                    out[doc][2].append((level, description or ""))
        return out

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

    def lexical_rows(self, after: int, upto: int) -> list[tuple[int, str, str, str]]:
        """(chunk id, description, doc id, document metadata JSON) of the document and passage chunks with
        after < id <= upto, by id: what the lexical index reads."""
        return self.conn.execute(
            "SELECT c.id, c.description, c.doc_id, d.metadata FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
            "WHERE c.level IN ('document', 'passage') AND c.id > ? AND c.id <= ? ORDER BY c.id", (int(after), int(upto))
        ).fetchall()

    def document_chunk_rows(self, after: int, upto: int) -> list[tuple[int, int]]:
        """(chunk id, its document's chunk id) for the chunks with after < id <= upto, by id."""
        return self.conn.execute(
            "SELECT c.id, d.id FROM chunks c JOIN chunks d ON d.doc_id = c.doc_id AND d.level = 'document' "
            "WHERE c.id > ? AND c.id <= ? ORDER BY c.id", (int(after), int(upto))
        ).fetchall()

    def quick_check(self, limit: int = 20) -> list[str]:
        """SQLite's quick_check: ["ok"] for a sound database, else up to `limit` problems.
        Raises sqlite3.DatabaseError when the file is not a readable database."""
        return [r[0] for r in self.conn.execute(f"PRAGMA quick_check({int(limit)})")]

    def foreign_key_problems(self) -> list[tuple[Any, ...]]:
        """(table, row id, parent table, constraint) for every row that points at a row that does not exist."""
        return [tuple(r) for r in self.conn.execute("PRAGMA foreign_key_check").fetchall()]
