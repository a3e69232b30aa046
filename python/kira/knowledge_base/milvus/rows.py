"""`MilvusRows`: the reads of a Milvus-backed knowledge base (`kira.knowledge_base.storage.StoredRows`).

Chunks come from the chunk collection (one ``get`` per thousand ids, or a query iterator past
Milvus's 16384-row limit), documents, provenances, thumbnails and text pieces from the
``<name>__kb`` records (kira.knowledge_base.milvus.records). Milvus keeps no log of removed
chunks, so the knowledge base rebuilds its derived views per commit (`removal_log_position`: None).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Iterable, Sequence, cast

import numpy as np

from kira.knowledge_base.milvus.records import QUERY_IDS, KbRecords, quoted
from kira.knowledge_base.rows import ChunkRow, DocumentRow

LEVELS = ("document", "region", "patch", "passage")


class MilvusRows:
    """Reads over one knowledge base's collections; `storage` (a `MilvusStorage`) holds them."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    @property
    def records(self) -> KbRecords:
        records: KbRecords = self.storage.records
        return records

    def _chunks(self) -> Any:
        return self.storage.collection

    def generation(self) -> int:
        """How many commits this knowledge base has seen (read from Milvus: another process's commits count)."""
        return int(self.records.get_one("setting:generation", "0") or 0)

    def query_ids(self, ids: Sequence[int] | np.ndarray, fields: list[str]) -> list[dict[str, Any]]:
        col = self._chunks()
        id_list = sorted({int(i) for i in np.asarray(ids, dtype=np.int64).reshape(-1)})
        if col is None or not id_list:
            return []
        rows: list[dict[str, Any]] = []
        for start in range(0, len(id_list), QUERY_IDS):
            rows += col.client.get(col.name, ids=id_list[start:start + QUERY_IDS], output_fields=fields)
        return rows

    def query_all(self, filter: str, fields: list[str]) -> list[dict[str, Any]]:
        """Every chunk row matching `filter` (a query iterator: past Milvus's 16384-row query limit)."""
        col = self._chunks()
        if col is None:
            return []
        it = col.client.query_iterator(col.name, batch_size=4096, filter=filter, output_fields=fields)
        out: list[dict[str, Any]] = []
        try:
            while True:
                rows = it.next()
                if not rows:
                    return out
                out += rows
        finally:
            it.close()

    # ---- rows by id -------------------------------------------------------------------
    def chunks(self, ids: Sequence[int] | np.ndarray) -> dict[int, ChunkRow]:
        out = {}
        for r in self.query_ids(ids, ["doc_id", "level", "parent", "box", "description"]):
            box = cast("tuple[int, int, int, int]", tuple(int(b) for b in r["box"])) if r["box"] else None
            out[int(r["id"])] = ChunkRow(int(r["id"]), r["doc_id"], r["level"],
                                         int(r["parent"]) if int(r["parent"]) >= 0 else None, box, r["description"] or "")
        return out

    def document_chunk_ids(self, doc_ids: Iterable[str]) -> dict[str, int]:
        docs = list(dict.fromkeys(doc_ids))
        col = self._chunks()
        out: dict[str, int] = {}
        if col is None:
            return out
        for start in range(0, len(docs), QUERY_IDS):
            part = docs[start:start + QUERY_IDS]
            rows = col.client.query(col.name, filter=f'level == "document" and doc_id in {quoted(part)}',
                                    output_fields=["doc_id"], limit=len(part))
            out.update({r["doc_id"]: int(r["id"]) for r in rows})
        return out

    def _documents(self, doc_ids: Iterable[str] | None) -> dict[str, dict[str, Any]]:
        if doc_ids is None:
            found = {k[4:]: v for k, v in self.records.prefixed("doc:")}
        else:
            found = {k[4:]: v for k, v in self.records.get([f"doc:{d}" for d in doc_ids]).items()}
        return {d: json.loads(v) for d, v in sorted(found.items())}

    def documents(self, doc_ids: Iterable[str] | None = None) -> dict[str, DocumentRow]:
        return {d: DocumentRow(d, v["source"], v["caption"], int(v["width"]), int(v["height"]), dict(v["metadata"]),
                               tuple(v["tags"])) for d, v in self._documents(doc_ids).items()}

    def provenances(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        return {d: dict(v.get("provenance") or {}) for d, v in self._documents(doc_ids).items()}

    def provenance(self, doc_id: str) -> dict[str, Any]:
        return self.provenances([doc_id]).get(doc_id, {})

    def piece_vectors(self, keys: Iterable[tuple[str, str]], dim: int) -> dict[tuple[str, str], np.ndarray]:
        """{(doc_id, text): float32 raw text vector} of the stored text pieces among `keys`; a piece not stored,
        or stored with another dimension, is absent."""
        wanted: dict[str, set[str]] = {}
        for d, t in keys:
            wanted.setdefault(str(d), set()).add(str(t))
        out: dict[tuple[str, str], np.ndarray] = {}
        for key, value in self.records.get([f"piece:{d}" for d in wanted]).items():
            doc, stored = key[6:], json.loads(value)
            if int(stored.get("dim", -1)) != dim:
                continue
            vectors = np.frombuffer(base64.b64decode(stored["vectors"]), dtype="<f4").reshape(-1, dim)
            out.update(((doc, t), vectors[i].astype(np.float32)) for i, t in enumerate(stored["texts"])
                       if t in wanted[doc])
        return out

    def thumbnail(self, doc_id: str) -> bytes | None:
        value = self.records.get_one(f"thumb:{doc_id}")
        return base64.b64decode(value) if value else None

    def has_document(self, doc_id: str) -> bool:
        return bool(self.records.get([f"doc:{doc_id}"]))

    def count_documents(self) -> int:
        """Documents stored: a count of document records (one query, whatever the size), so chunks a stopped
        writer left without a record (kira.knowledge_base.milvus.orphans) are not counted."""
        rows = self.records.client.query(self.records.name, filter='key like "doc:%"', output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def count_chunks(self) -> dict[str, int]:
        col = self._chunks()
        if col is None:
            return {}
        counts = {level: col.count(f'level == "{level}"') for level in LEVELS}
        return {k: v for k, v in counts.items() if v}

    def groups(self) -> list[tuple[str, str, list[str]]]:
        """Every group as (kind, group id, doc ids in order), from the document chunks' ``groups``."""
        members: dict[str, list[tuple[float, str]]] = {}
        for r in self.query_all('level == "document" and array_length(groups) > 0', ["doc_id", "groups", "group_order"]):
            for key in r["groups"]:
                members.setdefault(key, []).append((float((r["group_order"] or {}).get(key, 0.0)), r["doc_id"]))
        out = []
        for key in sorted(members):
            kind, gid = key.split(":", 1)
            out.append((kind, gid, [d for _, d in sorted(members[key])]))
        return out

    def group_size(self, kind: str, group_id: str) -> int:
        col = self._chunks()
        if col is None:
            return 0
        size: int = col.count(f'level == "document" and array_contains(groups, {json.dumps(f"{kind}:{group_id}")})')
        return size

    def captioned_document_ids(self) -> np.ndarray:
        docs = [d for d, v in self._documents(None).items() if v.get("caption") or v.get("tags")]
        chunk_of = self.document_chunk_ids(docs)
        have = {int(r["id"]) for r in self.query_ids(list(chunk_of.values()), ["has_visual", "has_text"])
                if r["has_visual"] and r["has_text"]}
        return np.array(sorted(i for i in chunk_of.values() if i in have), dtype=np.int64)

    def vectors(self, space: str, ids: Sequence[int] | np.ndarray, dim: int) -> np.ndarray:
        index = self.storage.index(space)
        if index is None:
            return np.zeros((0, dim), dtype=np.float32)
        stored: np.ndarray = index.get_vectors(np.asarray(ids, dtype=np.int64))
        return stored

    # ---- what derived views read --------------------------------------------------------
    @staticmethod
    def _range(after: int, upto: int | None) -> str:
        return f"id > {int(after)}" + (f" and id <= {int(upto)}" if upto is not None else "")

    def chunk_ids(self, *, levels: Iterable[str] | None = None, after: int = 0, upto: int | None = None) -> np.ndarray:
        flt = self._range(after, upto) + (f" and level in {quoted(levels)}" if levels is not None else "")
        return np.array(sorted(int(r["id"]) for r in self.query_all(flt, ["id"])), dtype=np.int64)

    def lexical_rows(self, after: int, upto: int | None) -> list[tuple[int, str, str, str]]:
        rows = self.query_all(f'level in ["document", "passage"] and {self._range(after, upto)}',
                              ["description", "doc_id", "metadata"])
        return sorted((int(r["id"]), r["description"] or "", r["doc_id"],
                       json.dumps(r["metadata"] if isinstance(r["metadata"], dict) else {}, sort_keys=True))
                      for r in rows)

    def document_chunk_rows(self, after: int, upto: int | None) -> list[tuple[int, int]]:
        return sorted((int(r["id"]), int(r["doc_chunk"])) for r in self.query_all(self._range(after, upto), ["doc_chunk"]))

    def max_chunk_id(self) -> int:
        """No chunk id is above this: the ids of every image ordinal reserved so far."""
        from kira.knowledge_base.milvus.kb_writes import CHUNKS_PER_IMAGE
        from kira.knowledge_base.milvus.writes import reserved_ordinals

        col = self._chunks()
        return 0 if col is None else reserved_ordinals(col) * CHUNKS_PER_IMAGE

    def removal_log_position(self) -> int | None:
        return None

    def removed_since(self, position: int) -> tuple[np.ndarray, int] | None:
        return None

    # ---- what `store_text_pieces` reads ---------------------------------------------------
    def documents_without_pieces(self) -> list[str]:
        with_pieces = {key[6:] for key, _ in self.records.prefixed("piece:", values=False)}
        return sorted(key[4:] for key, _ in self.records.prefixed("doc:", values=False) if key[4:] not in with_pieces)

    def described_chunks(self, doc_ids: Iterable[str], *, levels: Iterable[str]
                         ) -> dict[str, tuple[str | None, bool, list[tuple[str, str]]]]:
        docs = self._documents(list(dict.fromkeys(doc_ids)))
        out: dict[str, tuple[str | None, bool, list[tuple[str, str]]]] = {
            d: (v["caption"], bool(v["width"]), []) for d, v in docs.items()}
        names = list(out)
        for start in range(0, len(names), QUERY_IDS):
            part = names[start:start + QUERY_IDS]
            rows = self.query_all(f"doc_id in {quoted(part)} and level in {quoted(sorted(set(levels)))}",
                                  ["doc_id", "level", "description"])
            for r in sorted(rows, key=lambda r: int(r["id"])):
                out[r["doc_id"]][2].append((r["level"], r["description"] or ""))
        return out


__all__ = ["MilvusRows"]
