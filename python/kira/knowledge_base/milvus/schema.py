"""One knowledge base's Milvus collection: its config, the schema and its index params, and the open collection.

One collection per knowledge base holds every chunk: its id (primary key), document, level,
parent, box, tags, metadata (JSON), group and sequence membership, description (with a BM25
sparse vector Milvus derives from it) and the vectors of both spaces. A chunk without a vector
in a space (a text passage has no visual vector) stores a placeholder and ``has_<space> = false``;
every search filters on it.

Opening checks everything before anything is written: Milvus not installed is an
ImportError naming ``kira[milvus]``; an unreachable server fails here naming the uri; an
existing collection whose fields or dimensions differ from the config is refused.

Connecting is kira.knowledge_base.milvus.connection's (`connect`, `close_client`,
`require_pymilvus`), the oldest server kira runs on kira.knowledge_base.milvus.server_version's
(`MIN_SERVER`, `ServerTooOld`, `check_server`); both are re-exported here.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any

from kira.knowledge_base.milvus.connection import close_client, connect, require_pymilvus
from kira.knowledge_base.milvus.lexical import terms_name
from kira.knowledge_base.milvus.server_version import MIN_SERVER, MIN_SERVER_WITHOUT_BM25, ServerTooOld, check_server

log = logging.getLogger(__name__)

SPACES = ("visual", "text")
# Sizes of the variable-length fields. A description longer than this is cut on write.
MAX_DESCRIPTION = 8192
MAX_TAGS = 256
MAX_GROUPS = 64
MAX_NAME = 512


@dataclass(frozen=True)
class MilvusConfig:
    """Where a knowledge base lives in Milvus and how its vector fields are indexed."""

    uri: str  # "path/kb.db" = Milvus Lite in-process; "http://host:19530" = a server
    collection: str  # collection name: letters, digits and "_", starting with a letter or "_"
    visual_dim: int  # dimension of the visual space (the image encoder's output)
    text_dim: int  # dimension of the text space (the sentence encoder's output)
    token: str = ""  # "user:password" or an API key for a server; empty for none
    index: str = "HNSW"  # "HNSW", "IVF_FLAT" or "FLAT" (exact)
    hnsw_m: int = 16  # HNSW graph degree
    ef_construction: int = 200  # HNSW build candidate list
    ef_search: int = 64  # HNSW search candidate list (a search may pass its own ``ef``)
    nlist: int = 128  # IVF cells
    nprobe: int = 16  # IVF cells visited per search
    bm25: bool = True  # derive a BM25 sparse vector from each description (Milvus full-text search)
    kira_terms: bool = True  # keep kira's BM25 terms and name words in ``<collection>__terms`` (knowledge_base.milvus.lexical)
    batch_size: int = 512  # rows per upsert call
    timeout: float = 10.0  # seconds for connecting and for each call
    extra_index_params: dict[str, Any] = field(default_factory=dict)  # passed through to the index

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,254}", self.collection):
            raise ValueError(f"collection name {self.collection!r}: use letters, digits and '_', "
                             "starting with a letter or '_' (e.g. 'kira_' + a slug of the knowledge base name)")
        if self.index not in ("HNSW", "IVF_FLAT", "FLAT"):
            raise ValueError(f"index {self.index!r}: choose 'HNSW', 'IVF_FLAT' or 'FLAT'")
        for name in ("visual_dim", "text_dim", "batch_size"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def is_lite(self) -> bool:
        """True where the uri is a local Milvus Lite file (run in this process)."""
        return self.uri.endswith(".db")

    def dim(self, space: str) -> int:
        """The dimension of `space` ("visual" or "text")."""
        if space not in SPACES:
            raise ValueError(f"space {space!r}: choose 'visual' or 'text'")
        return self.visual_dim if space == "visual" else self.text_dim

    def search_params(self, *, ef: int | None = None, nprobe: int | None = None) -> dict[str, Any]:
        """The per-search params of this index type (``ef`` for HNSW, ``nprobe`` for IVF)."""
        if self.index == "HNSW":
            return {"metric_type": "COSINE", "params": {"ef": int(ef or self.ef_search)}}
        if self.index == "IVF_FLAT":
            return {"metric_type": "COSINE", "params": {"nprobe": int(nprobe or self.nprobe)}}
        return {"metric_type": "COSINE", "params": {}}


def expected_fields(config: MilvusConfig) -> dict[str, tuple[str, int | None]]:
    """Field name -> (Milvus data type name, vector dimension or None) of the schema `config` asks for."""
    fields: dict[str, tuple[str, int | None]] = {
        "id": ("INT64", None), "doc_id": ("VARCHAR", None), "doc_chunk": ("INT64", None),
        "level": ("VARCHAR", None), "parent": ("INT64", None), "box": ("ARRAY", None),
        "tags": ("ARRAY", None), "metadata": ("JSON", None), "groups": ("ARRAY", None),
        "group_order": ("JSON", None), "description": ("VARCHAR", None),
        "has_visual": ("BOOL", None), "has_text": ("BOOL", None),
        "visual": ("FLOAT_VECTOR", config.visual_dim), "text": ("FLOAT_VECTOR", config.text_dim),
    }
    if config.bm25:
        fields["description_bm25"] = ("SPARSE_FLOAT_VECTOR", None)
    return fields


def build_schema(client: Any, config: MilvusConfig) -> Any:
    """The pymilvus CollectionSchema for `config` (fields as `expected_fields` lists them)."""
    pm = require_pymilvus()
    dt = pm.DataType
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False,
                                  description="kira knowledge base chunks")
    schema.add_field("id", dt.INT64, is_primary=True)
    schema.add_field("doc_id", dt.VARCHAR, max_length=MAX_NAME)
    schema.add_field("doc_chunk", dt.INT64)  # the document-level chunk id: the grouping key of a capped search
    schema.add_field("level", dt.VARCHAR, max_length=16)
    schema.add_field("parent", dt.INT64)  # -1: none
    schema.add_field("box", dt.ARRAY, element_type=dt.INT64, max_capacity=4)  # x0, y0, x1, y1; [] for none
    schema.add_field("tags", dt.ARRAY, element_type=dt.VARCHAR, max_capacity=MAX_TAGS, max_length=MAX_NAME)
    schema.add_field("metadata", dt.JSON)
    schema.add_field("groups", dt.ARRAY, element_type=dt.VARCHAR, max_capacity=MAX_GROUPS, max_length=MAX_NAME)
    schema.add_field("group_order", dt.JSON)  # "kind:group_id" -> position in that group
    if config.bm25:
        schema.add_field("description", dt.VARCHAR, max_length=MAX_DESCRIPTION, enable_analyzer=True)
        schema.add_field("description_bm25", dt.SPARSE_FLOAT_VECTOR)
        schema.add_function(pm.Function(name="description_bm25_fn", function_type=pm.FunctionType.BM25,
                                        input_field_names=["description"], output_field_names=["description_bm25"]))
    else:
        schema.add_field("description", dt.VARCHAR, max_length=MAX_DESCRIPTION)
    schema.add_field("has_visual", dt.BOOL)
    schema.add_field("has_text", dt.BOOL)
    schema.add_field("visual", dt.FLOAT_VECTOR, dim=config.visual_dim)
    schema.add_field("text", dt.FLOAT_VECTOR, dim=config.text_dim)
    return schema


def build_index_params(client: Any, config: MilvusConfig) -> Any:
    """Index params: both vector fields with `config.index` under COSINE, BM25 on the sparse field."""
    params = client.prepare_index_params()
    if config.index == "HNSW":
        knobs = {"M": config.hnsw_m, "efConstruction": config.ef_construction}
    elif config.index == "IVF_FLAT":
        knobs = {"nlist": config.nlist}
    else:
        knobs = {}
    knobs.update(config.extra_index_params)
    for space in SPACES:
        # Sent as one JSON "params" entry, the classic wire form every Milvus reads; pymilvus 3 would
        # otherwise send each knob as its own key, which Milvus Lite 3.2 ignores (it built IVF with
        # nlist 128 whatever was asked).
        params.add_index(field_name=space, index_type=config.index, metric_type="COSINE", params={"params": dict(knobs)})
    if config.bm25:
        params.add_index(field_name="description_bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    return params


def _field_signature(field_info: dict[str, Any]) -> tuple[str, int | None]:
    type_name = getattr(field_info.get("type"), "name", str(field_info.get("type")))
    dim = (field_info.get("params") or {}).get("dim")
    return type_name, int(dim) if dim is not None else None


def schema_mismatches(described: dict[str, Any], config: MilvusConfig) -> list[str]:
    """What differs between an existing collection (`describe_collection`'s dict) and `config`'s schema."""
    have = {f["name"]: _field_signature(f) for f in described.get("fields", [])}
    want = expected_fields(config)
    problems = [f"field {name!r} is missing" for name in want if name not in have]
    problems += [f"field {name!r} is not in kira's schema" for name in have if name not in want]
    for name, (kind, dim) in want.items():
        if name in have and have[name] != (kind, dim):
            got_kind, got_dim = have[name]
            what = f"dim {got_dim}, config says {dim}" if kind == got_kind else f"type {got_kind}, expected {kind}"
            problems.append(f"field {name!r}: {what}")
    return problems


def create_terms_collection(client: Any, name: str) -> None:
    """Create the terms collection `name` (kira.knowledge_base.milvus.lexical): id, doc_id, level, ``lexical`` with its BM25
    vector, ``names``, and the chunk's ``groups`` / ``group_order`` (kira.knowledge_base.milvus.compounds)."""
    from kira.knowledge_base.lexical import BM25_B, BM25_K1
    from kira.knowledge_base.milvus.lexical import MAX_TERMS_CHARS

    pm = require_pymilvus()
    dt = pm.DataType
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False,
                                  description="kira's BM25 terms and name words of document and passage chunks")
    schema.add_field("id", dt.INT64, is_primary=True)  # the chunk id
    schema.add_field("doc_id", dt.VARCHAR, max_length=MAX_NAME)
    schema.add_field("level", dt.VARCHAR, max_length=16)
    schema.add_field("lexical", dt.VARCHAR, max_length=MAX_TERMS_CHARS, enable_analyzer=True, enable_match=True)
    schema.add_field("lexical_bm25", dt.SPARSE_FLOAT_VECTOR)
    schema.add_field("names", dt.VARCHAR, max_length=MAX_TERMS_CHARS, enable_analyzer=True, enable_match=True)
    # the document's group memberships, as on its chunks: per-hit compound fetches read document rows only
    schema.add_field("groups", dt.ARRAY, element_type=dt.VARCHAR, max_capacity=MAX_GROUPS, max_length=MAX_NAME)
    schema.add_field("group_order", dt.JSON)
    schema.add_function(pm.Function(name="lexical_bm25_fn", function_type=pm.FunctionType.BM25,
                                    input_field_names=["lexical"], output_field_names=["lexical_bm25"]))
    params = client.prepare_index_params()
    # one JSON "params" entry, as kira.knowledge_base.milvus.schema sends its knobs (Milvus Lite 3.2 ignores
    # knobs sent as keys of their own, and its default k1 is 1.5)
    params.add_index(field_name="lexical_bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                     params={"params": {"bm25_k1": BM25_K1, "bm25_b": BM25_B}})
    client.create_collection(name, schema=schema, index_params=params, consistency_level="Strong")



class MilvusCollection:
    """A connected pymilvus client and one knowledge base's collection, checked at open.

    Thread safety: pymilvus's MilvusClient may be shared by threads; this object adds no state
    that changes after open.
    """

    def __init__(self, client: Any, config: MilvusConfig) -> None:
        self.client, self.config = client, config
        self.generation = 0  # bumped by every write through this object (kira.knowledge_base.milvus.writes)

    @property
    def name(self) -> str:
        return self.config.collection

    @classmethod
    def open(cls, config: MilvusConfig, *, create: bool = True) -> "MilvusCollection":
        """Connect to `config.uri` and open (or, with `create`, create) the collection.

        Raises ImportError (pymilvus / milvus-lite missing, naming ``kira[milvus]``),
        ConnectionError (the server at the uri does not answer), ValueError (an existing
        collection whose schema or dimensions differ from `config`: nothing is written),
        LookupError (no such collection and `create` is False).
        """
        client = connect(config.uri, config.token, config.timeout,
                         minimum=MIN_SERVER if config.bm25 else MIN_SERVER_WITHOUT_BM25)
        try:
            return cls.attach(client, config, create=create)
        except BaseException:
            close_client(client)
            raise

    @classmethod
    def attach(cls, client: Any, config: MilvusConfig, *, create: bool = True) -> "MilvusCollection":
        """`open` on an already connected pymilvus client (the caller keeps closing it)."""
        if client.has_collection(config.collection):
            if config.kira_terms and not client.has_collection(terms_name(config.collection)):
                config = replace(config, kira_terms=False)  # made before kira stored its terms (format 1)
            problems = schema_mismatches(client.describe_collection(config.collection), config)
            if problems:
                raise ValueError(f"collection {config.collection!r} at {config.uri!r} does not match this "
                                 f"knowledge base's config: {'; '.join(problems)}. Open it with the config it "
                                 "was created with, or use another collection name")
            client.load_collection(config.collection)
            if config.kira_terms:
                client.load_collection(terms_name(config.collection))
        elif create:
            client.create_collection(config.collection, schema=build_schema(client, config),
                                     index_params=build_index_params(client, config),
                                     consistency_level="Strong")
            if config.kira_terms:
                create_terms_collection(client, terms_name(config.collection))
            log.info("created Milvus collection %s at %s (%s)", config.collection, config.uri, config.index)
        else:
            raise LookupError(f"no collection {config.collection!r} at {config.uri!r}; create it first")
        return cls(client, config)

    def count(self, filter: str = "") -> int:
        """Rows matching the Milvus filter expression `filter` (all rows for "")."""
        rows = self.client.query(self.name, filter=filter, output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def flush(self) -> None:
        """Seal what was written into indexed segments. Call it after a bulk write: Milvus Lite searches
        unflushed rows by brute force in Python (5k rows: 290 ms a search before a flush, 27 ms after);
        a server flushes on its own and discourages frequent calls."""
        self.client.flush(self.name)
        if self.config.kira_terms:
            self.client.flush(terms_name(self.name))
        self.generation += 1

    def drop(self) -> None:
        """Delete the whole collection (every chunk of this knowledge base), its ``__meta`` and ``__terms``."""
        for name in (self.name, f"{self.name}__meta", terms_name(self.name)):
            if self.client.has_collection(name):
                self.client.drop_collection(name)

    def close(self) -> None:
        """Close the client (`close_client`: the last one of a Milvus Lite file releases the file)."""
        close_client(self.client)

    def __enter__(self) -> "MilvusCollection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["MAX_DESCRIPTION", "MAX_GROUPS", "MAX_NAME", "MAX_TAGS", "MIN_SERVER", "MIN_SERVER_WITHOUT_BM25", "SPACES",
           "MilvusCollection", "MilvusConfig", "ServerTooOld", "build_index_params", "build_schema", "check_server",
           "close_client", "connect", "create_terms_collection", "expected_fields", "require_pymilvus",
           "schema_mismatches"]
