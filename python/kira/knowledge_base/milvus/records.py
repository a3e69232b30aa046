"""What a Milvus-backed knowledge base keeps besides its chunks: settings and documents, and its store reads.

A knowledge base on Milvus is two collections at one uri (no local file):

* ``<name>`` — every chunk (kira.knowledge_base.milvus.schema): created at the first write, when the
  model stack (and so the dimensions) is known;
* ``<name>__kb`` — small key/value rows (`KbRecords`): ``setting:<key>`` (the KiraConfig, the
  DomainProfile, the models' identity, the dimensions, levels, index kind, generation) and
  ``doc:<doc_id>`` (a document's source, caption, size, metadata, tags and provenance) and
  ``thumb:<doc_id>`` (its preview image). Another process on another machine opens the
  knowledge base from these alone.

`MilvusStore` answers the reads the pipeline and the server make of ``kb.store`` (chunks,
documents, provenances, document chunk ids, the generation) with Milvus queries.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from kira.knowledge_base.milvus.schema import MAX_NAME, require_pymilvus

log = logging.getLogger(__name__)

MAX_VALUE = 65535  # bytes of one value (Milvus's VARCHAR limit)
QUERY_IDS = 1000  # ids per "id in [...]" query


def records_name(collection: str) -> str:
    """The settings-and-documents collection of the knowledge base whose chunk collection is `collection`."""
    return f"{collection}__kb"


def quoted(values: Iterable[Any]) -> str:
    """A Milvus list literal of strings."""
    return "[" + ", ".join(json.dumps(str(v)) for v in values) + "]"


class KbRecords:
    """The ``<name>__kb`` collection: string keys to string values (settings, documents, thumbnails)."""

    def __init__(self, client: Any, collection: str) -> None:
        self.client, self.name = client, records_name(collection)

    def exists(self) -> bool:
        return bool(self.client.has_collection(self.name))

    def create(self) -> None:
        """Create the collection (ValueError where it already exists)."""
        pm = require_pymilvus()
        if self.exists():
            raise ValueError(f"collection {self.name!r} already exists")
        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False,
                                           description="kira knowledge base settings and documents")
        schema.add_field("key", pm.DataType.VARCHAR, is_primary=True, max_length=MAX_NAME + 16)
        schema.add_field("value", pm.DataType.VARCHAR, max_length=MAX_VALUE)
        schema.add_field("unused", pm.DataType.FLOAT_VECTOR, dim=2)  # Milvus wants a vector field in every collection
        params = self.client.prepare_index_params()
        params.add_index(field_name="unused", index_type="FLAT", metric_type="L2")
        self.client.create_collection(self.name, schema=schema, index_params=params, consistency_level="Strong")

    def load(self) -> None:
        self.client.load_collection(self.name)

    @staticmethod
    def check(items: dict[str, str]) -> None:
        """ValueError naming the first value over `MAX_VALUE` bytes (what `put` would refuse)."""
        for key, value in items.items():
            if len(value.encode("utf-8")) > MAX_VALUE:
                raise ValueError(f"{key}: {len(value.encode('utf-8'))} bytes, over Milvus's {MAX_VALUE}; shorten its "
                                 "caption, metadata or tags")

    def put(self, items: dict[str, str]) -> None:
        """Write key -> value rows (replacing). ValueError for a value over `MAX_VALUE` bytes (nothing written)."""
        self.check(items)
        rows = [{"key": key, "value": value, "unused": [1.0, 0.0]} for key, value in items.items()]
        if rows:
            self.client.upsert(self.name, rows)

    def get(self, keys: Sequence[str]) -> dict[str, str]:
        """The values of `keys` that are stored."""
        out: dict[str, str] = {}
        keys = list(dict.fromkeys(keys))
        for start in range(0, len(keys), QUERY_IDS):
            for row in self.client.get(self.name, ids=keys[start:start + QUERY_IDS], output_fields=["value"]):
                out[row["key"]] = row["value"]
        return out

    def get_one(self, key: str, default: str | None = None) -> str | None:
        return self.get([key]).get(key, default)

    def prefixed(self, prefix: str, *, values: bool = True) -> Iterator[tuple[str, str]]:
        """Every (key, value) whose key starts with `prefix` (a query iterator: any number of rows)."""
        it = self.client.query_iterator(self.name, batch_size=1000, filter=f"key like {json.dumps(prefix + '%')}",
                                        output_fields=["value"] if values else ["key"])
        try:
            while True:
                rows = it.next()
                if not rows:
                    return
                for row in rows:
                    yield row["key"], row.get("value", "")
        finally:
            it.close()

    def delete(self, keys: Sequence[str]) -> None:
        if keys:
            self.client.delete(self.name, ids=list(keys))

    def drop(self) -> None:
        if self.exists():
            self.client.drop_collection(self.name)


def thumbnail_value(png: bytes | None) -> str | None:
    """A thumbnail as stored: base64 PNG when it fits in one value, else base64 JPEG (quality 90)."""
    if not png:
        return None
    text = base64.b64encode(png).decode("ascii")
    if len(text) <= MAX_VALUE:
        return text
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        buf = io.BytesIO()
        im.convert("RGB").save(buf, format="JPEG", quality=90)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def piece_value(texts: Sequence[str], vectors: np.ndarray) -> str | None:
    """A document's text pieces as stored (``piece:<doc id>``: JSON texts + base64 little-endian float32
    vectors); None where they pass one value's `MAX_VALUE` bytes or there are none."""
    if not len(texts):
        return None
    raw = np.ascontiguousarray(vectors, dtype="<f4")
    value = json.dumps({"texts": list(texts), "dim": int(raw.shape[1]),
                        "vectors": base64.b64encode(raw.tobytes()).decode("ascii")})
    return value if len(value.encode("utf-8")) <= MAX_VALUE else None


def document_value(*, source: str | None, caption: str | None, width: int, height: int, metadata: dict[str, Any],
                   tags: Sequence[str], provenance: dict[str, Any]) -> str:
    """A document's ``doc:`` value (JSON). Captions past 16k characters are cut here (the chunk descriptions
    keep what retrieval reads)."""
    return json.dumps({"source": source, "caption": (caption or "")[:16384] if caption is not None else None,
                       "width": int(width), "height": int(height), "metadata": metadata,
                       "tags": sorted(dict.fromkeys(str(t) for t in tags)), "provenance": provenance},
                      sort_keys=True, default=str)


class MilvusStore:
    """The reads `kb.store` answers on the embedded backend, from the Milvus collections (module docstring)."""

    def __init__(self, kb: Any) -> None:
        self.kb = kb

    @property
    def records(self) -> KbRecords:
        return self.kb._records

    def _chunks(self) -> Any:
        return self.kb._collection

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

    def chunks(self, ids: Sequence[int] | np.ndarray) -> dict[int, Any]:
        """Rows (`ChunkRow`) of the given chunk ids (unknown ids are absent)."""
        from kira.knowledge_base.rows import ChunkRow

        out = {}
        for r in self.query_ids(ids, ["doc_id", "level", "parent", "box", "description"]):
            box = tuple(int(b) for b in r["box"]) if r["box"] else None
            out[int(r["id"])] = ChunkRow(int(r["id"]), r["doc_id"], r["level"],
                                         int(r["parent"]) if int(r["parent"]) >= 0 else None, box, r["description"] or "")
        return out

    def document_chunk_ids(self, doc_ids: Iterable[str]) -> dict[str, int]:
        """doc_id -> id of its document-level chunk."""
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

    def documents(self, doc_ids: Iterable[str] | None = None) -> dict[str, Any]:
        """Rows (`DocumentRow`) of the given documents (all when None), by doc id."""
        from kira.knowledge_base.rows import DocumentRow

        return {d: DocumentRow(d, v["source"], v["caption"], int(v["width"]), int(v["height"]), dict(v["metadata"]),
                               tuple(v["tags"])) for d, v in self._documents(doc_ids).items()}

    def provenances(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        return {d: dict(v.get("provenance") or {}) for d, v in self._documents(doc_ids).items()}

    def provenance(self, doc_id: str) -> dict[str, Any]:
        return self.provenances([doc_id]).get(doc_id, {})

    def piece_vectors(self, keys: Iterable[tuple[str, str]], dim: int) -> dict[tuple[str, str], np.ndarray]:
        """{(doc_id, text): float32 raw text vector} of the stored text pieces among `keys` (as the embedded
        store's); a piece not stored, or stored with another dimension, is absent."""
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
        """Chunks per level."""
        col = self._chunks()
        if col is None:
            return {}
        counts = {level: col.count(f'level == "{level}"') for level in ("document", "region", "patch", "passage")}
        return {k: v for k, v in counts.items() if v}

    def chunk_ids(self, *, levels: Iterable[str] | None = None) -> np.ndarray:
        """Sorted ids of the chunks (at `levels`, when given)."""
        flt = f"level in {quoted(levels)}" if levels is not None else "id >= 0"
        return np.array(sorted(int(r["id"]) for r in self.query_all(flt, ["id"])), dtype=np.int64)

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
        return col.count(f'level == "document" and array_contains(groups, {json.dumps(f"{kind}:{group_id}")})')

    def captioned_document_ids(self) -> np.ndarray:
        """Ids of document chunks whose document has a user caption or tags (the bridge's training pairs)."""
        docs = [d for d, v in self._documents(None).items() if v.get("caption") or v.get("tags")]
        chunk_of = self.document_chunk_ids(docs)
        have = {int(r["id"]) for r in self.query_ids(list(chunk_of.values()), ["has_visual", "has_text"])
                if r["has_visual"] and r["has_text"]}
        return np.array(sorted(i for i in chunk_of.values() if i in have), dtype=np.int64)

    def vectors(self, space: str, ids: Sequence[int] | np.ndarray, dim: int) -> np.ndarray:
        """The stored (unit) vectors of `ids` in `space`, rows in the order given."""
        index = self.kb.index(space)
        if index is None:
            return np.zeros((0, dim), dtype=np.float32)
        return index.get_vectors(np.asarray(ids, dtype=np.int64))
