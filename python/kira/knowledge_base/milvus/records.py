"""What a Milvus-backed knowledge base keeps besides its chunks: settings and documents, and its store reads.

A knowledge base on Milvus is two collections at one uri (no local file):

* ``<name>`` — every chunk (kira.knowledge_base.milvus.schema): created at the first write, when the
  model stack (and so the dimensions) is known;
* ``<name>__kb`` — small key/value rows (`KbRecords`): ``setting:<key>`` (the KiraConfig, the
  DomainProfile, the models' identity, the dimensions, levels, index kind, generation) and
  ``doc:<doc_id>`` (a document's source, caption, size, metadata, tags and provenance) and
  ``thumb:<doc_id>`` (its preview image). Another process on another machine opens the
  knowledge base from these alone.

`kira.knowledge_base.milvus.rows.MilvusRows` answers reads from both collections.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from kira.knowledge_base.milvus.connection import require_pymilvus
from kira.knowledge_base.milvus.schema import MAX_NAME

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
