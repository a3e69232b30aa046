"""Copy an embedded knowledge base into Milvus: the move from one machine to a shared Milvus.

`copy_to_milvus` creates a Milvus-backed knowledge base (kira.knowledge_base.milvus.kb) holding
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
from typing import Any

log = logging.getLogger(__name__)


def copy_to_milvus(kb: Any, path_or_name: str | os.PathLike, *, uri: str | None = None, token: str = "",
                   batch: int = 1024) -> Any:
    """Copy the embedded knowledge base `kb` to a new Milvus-backed one (`KnowledgeBase.create(path_or_name,
    backend="milvus", uri=uri, token=token)`, module docstring) and return it, open for writing and committed.

    Raises ValueError for a knowledge base with a domain adapter (its visual index holds projected vectors;
    the Milvus backend has no adapter yet), one that is not embedded, or a target that exists; what
    creating a Milvus knowledge base raises (ImportError naming ``kira[milvus]``, ConnectionError naming the uri).
    """
    from kira.knowledge_base.milvus.encode import CHUNKS_PER_IMAGE
    from kira.knowledge_base.milvus.records import document_value, thumbnail_value
    from kira.knowledge_base.milvus.collection_view import knowledge_base_records
    from kira.knowledge_base.milvus.writes import reserve_ordinals, upsert_chunks
    from kira.knowledge_base.milvus.kb import MilvusKnowledgeBase

    if getattr(kb, "backend", "embedded") != "embedded" or not hasattr(kb, "vectors"):
        raise ValueError(f"{kb!r} is not an embedded knowledge base; copy_to_milvus copies one into Milvus")
    if kb.adapter is not None:
        raise ValueError(f"{kb.path} has a domain adapter: its visual index holds projected vectors, which the Milvus "
                         "backend cannot query yet; remove it (kb.set_adapter(None)) before copying")
    store = kb.store
    target = MilvusKnowledgeBase.create(path_or_name, kb.config, kb._models, uri=uri, token=token,
                                        index=store.get_meta("index_kind", "flat") or "flat", levels=kb.levels,
                                        caption_children=kb.caption_children, profile=kb.profile)
    try:
        if kb.vectors is not None:
            from kira.knowledge_base.milvus.schema import MilvusCollection

            dims = dict(kb.vectors.dims)
            MilvusCollection.attach(target._client, target._milvus_config(dims), create=True)
            target._records.put({"setting:dims": json.dumps(dims),
                                 "setting:model_identity": json.dumps(kb.built_with())})
            target._attach_chunks()
            written = upsert_chunks(target._collection, knowledge_base_records(kb, batch=batch), batch_size=batch)
            top = int(store.max_chunk_id())
            reserve_ordinals(target._collection, top // CHUNKS_PER_IMAGE + 1)  # later images take ids above these
            log.info("copied %d chunks of %s to %s at %s", written, kb.path, target.name, target.uri)
        documents = kb.documents()
        provenances = store.provenances(list(documents))
        rows: dict[str, str] = {}
        for doc_id, doc in documents.items():
            rows[f"doc:{doc_id}"] = document_value(source=doc.source, caption=doc.caption, width=doc.width,
                                                   height=doc.height, metadata=dict(doc.metadata), tags=doc.tags,
                                                   provenance=provenances.get(doc_id, {}))
            thumb = thumbnail_value(store.thumbnail(doc_id))
            if thumb is not None:
                rows[f"thumb:{doc_id}"] = thumb
            if len(rows) >= batch:
                target._records.put(rows)
                rows = {}
        target._records.put(rows)
        target.note_external_writes()
        target.commit()
    except BaseException:
        target.close()
        raise
    return target
