"""Copy an embedded knowledge base into Milvus: the move from one machine to a shared Milvus.

`copy_to_milvus` creates a Milvus-backed knowledge base (kira.knowledge_base.milvus.storage) holding
everything the embedded one holds: its config, profile, levels, index kind and models' identity;
every chunk under the same id, with its vectors (as the embedded indexes hold them), fields,
tags, metadata and group memberships; every document's record, provenance and thumbnail. Nothing
is re-encoded, so both answer every question alike, with the same chunk ids. Images added to the
copy later take ids above every copied one.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Iterator

import numpy as np

from kira.knowledge_base.milvus.schema import SPACES
from kira.knowledge_base.milvus.writes import ChunkRecord

log = logging.getLogger(__name__)


def knowledge_base_records(kb: Any, *, batch: int = 1024) -> Iterator[ChunkRecord]:
    """Every chunk of an embedded `KnowledgeBase` as a `ChunkRecord` (same ids; the vectors its indexes
    hold, so searches agree), its document's tags, metadata and group memberships included."""
    store = kb.storage.rows
    memberships: dict[str, dict[str, float]] = {}
    for kind, gid, docs in store.groups():
        for order, doc in enumerate(docs):
            memberships.setdefault(doc, {})[f"{kind}:{gid}"] = float(order)
    documents = store.documents()
    ids = store.chunk_ids()
    indexes = {space: kb.index(space) for space in SPACES}
    for start in range(0, len(ids), batch):
        part = ids[start:start + batch]
        rows = store.chunks(part)
        doc_chunks = kb.document_chunk_of(part)
        vectors: dict[str, dict[int, np.ndarray]] = {}
        for space, index in indexes.items():
            have = np.array([i for i in part if index is not None and index.contains(int(i))], np.int64)
            vectors[space] = dict(zip(have.tolist(), index.get_vectors(have))) if len(have) else {}
        for cid, doc_chunk in zip(part.tolist(), doc_chunks.tolist()):
            row = rows[cid]
            doc = documents[row.doc_id]
            yield ChunkRecord(
                id=cid, doc_id=row.doc_id, doc_chunk=doc_chunk if doc_chunk >= 0 else cid, level=row.level,
                parent=row.parent_id if row.parent_id is not None else -1, box=row.box,
                description=row.description, tags=doc.tags, metadata=dict(doc.metadata),
                groups=memberships.get(row.doc_id, {}),
                visual=vectors["visual"].get(cid), text=vectors["text"].get(cid))


def copy_to_milvus(kb: Any, path_or_name: str | os.PathLike[str], *, uri: str | None = None, token: str = "",
                   batch: int = 1024) -> Any:
    """Copy the embedded knowledge base `kb` to a new Milvus-backed one (named `path_or_name` at `uri`, or Milvus
    Lite in the directory `path_or_name`; module docstring) and return it (a knowledge base of `kb`'s class),
    open for writing and committed.

    Raises ValueError for a knowledge base with a domain adapter (its visual index holds projected vectors,
    which the Milvus backend does not keep), one that is not embedded, or a target that exists; what creating
    a Milvus knowledge base raises (ImportError naming ``kira[milvus]``, ConnectionError naming the uri).
    """
    from kira.knowledge_base.milvus.kb_writes import CHUNKS_PER_IMAGE
    from kira.knowledge_base.milvus.records import document_value, thumbnail_value
    from kira.knowledge_base.milvus.storage import MilvusStorage
    from kira.knowledge_base.milvus.writes import reserve_ordinals, upsert_chunks

    source = kb.storage
    if source.kind != "embedded":
        raise ValueError(f"{kb!r} is not an embedded knowledge base; copy_to_milvus copies one into Milvus")
    if kb.adapter is not None:
        raise ValueError(f"{kb.path} has a domain adapter: its visual index holds projected vectors, which the Milvus "
                         "backend does not keep; remove it (kb.set_adapter(None)) before copying")
    keys = ("config", "profile", "index_kind", "levels", "caption_children", "dims", "models", "model_identity")
    settings = {k: v for k in keys if (v := source.get_setting(k)) is not None}
    dims = json.loads(settings.pop("dims", "null") or "null")
    target = MilvusStorage.create(path_or_name, settings, uri=uri, token=token)
    try:
        rows = source.rows
        if dims is not None:
            target.put_settings({"dims": json.dumps(dims)})
            target.open_spaces(dims, create=True)
            written = upsert_chunks(target.collection, knowledge_base_records(kb, batch=batch), batch_size=batch)
            top = int(rows.max_chunk_id())
            reserve_ordinals(target.collection, top // CHUNKS_PER_IMAGE + 1)  # later images take ids above these
            log.info("copied %d chunks of %s to %s", written, kb.path, target.where)
        documents = kb.documents()
        provenances = rows.provenances(list(documents))
        out: dict[str, str] = {}
        for doc_id, doc in documents.items():
            out[f"doc:{doc_id}"] = document_value(source=doc.source, caption=doc.caption, width=doc.width,
                                                  height=doc.height, metadata=dict(doc.metadata), tags=doc.tags,
                                                  provenance=provenances.get(doc_id, {}))
            thumb = thumbnail_value(rows.thumbnail(doc_id))
            if thumb is not None:
                out[f"thumb:{doc_id}"] = thumb
            if len(out) >= batch:
                target.records.put(out)
                out = {}
        target.records.put(out)
        target.note_external_writes()
        target.commit()
        return type(kb)(target, kb._models)
    except BaseException:
        target.close()
        raise
