"""Stage 4 input: fused chunk ids -> kira.reasoning EvidenceItems with provenance and thumbnails."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from kira.knowledge_base.rows import MAX_DESCRIPTION_CHARS
from kira.reasoning.types import EvidenceItem


def build_items(kb: Any, ids: Sequence[int], scores: Sequence[float], paths: dict[int, list[str]],
                cosine: dict[int, float], *, thumbnails: bool = True, rows: dict[int, Any] | None = None
                ) -> list[EvidenceItem]:
    """One EvidenceItem per chunk id (numbered in the given order from 1; unknown ids skipped).

    provenance holds source, caption, tags, metadata, image_size (width, height), the
    parent chunk, how it was encoded, the best raw cosine score over the paths that
    found it and, for a document in a temporal or multiview group, "compound": the key
    of its compound document (`KnowledgeBase.compound_of`), and for one in a multiview group
    "views": that group's id (`KnowledgeBase.view_set_of`). `rows` may pass chunk rows already fetched.
    """
    ids = [int(i) for i in ids]
    if rows is None or any(i not in rows for i in ids):
        rows = kb.chunks(ids)
    doc_ids = {rows[i].doc_id for i in ids if i in rows}
    docs = kb.documents(doc_ids)
    stored = kb.provenances(doc_ids)
    compounds = kb.compounds_for(doc_ids=doc_ids)  # the groups of these documents alone (per hit on Milvus)
    compound, view_set = compounds.compound_of, compounds.view_set_of
    thumbs: dict[str, np.ndarray | None] = {}
    items: list[EvidenceItem] = []
    for cid, score in zip(ids, scores):
        row = rows.get(cid)
        if row is None:
            continue
        doc = docs.get(row.doc_id)
        if thumbnails and row.doc_id not in thumbs:
            thumbs[row.doc_id] = kb.thumbnail(row.doc_id)
        provenance: dict[str, Any] = dict(stored.get(row.doc_id, {}))
        if doc is not None and doc.source:
            provenance["source"] = doc.source
        provenance.update(chunk_id=cid, parent_id=row.parent_id)
        if doc is not None:
            if doc.caption:  # what reasoning reads of a caption, as much as is stored per chunk
                provenance["caption"] = doc.caption[:MAX_DESCRIPTION_CHARS]
            if doc.tags:
                provenance["tags"] = list(doc.tags)
            if doc.metadata:
                provenance["metadata"] = dict(doc.metadata)
            if doc.width and doc.height:
                provenance["image_size"] = (doc.width, doc.height)
        if row.level == "passage":
            provenance["label"] = row.description  # a knowledge-base passage answers in its own words
        if row.doc_id in compound:
            provenance["compound"] = compound[row.doc_id]
        if row.doc_id in view_set:
            provenance["views"] = view_set[row.doc_id]
        if cid in cosine:
            provenance["cosine"] = round(float(cosine[cid]), 4)
        items.append(EvidenceItem(
            number=len(items) + 1,
            chunk_id=cid,
            doc_id=row.doc_id,
            level=row.level,
            score=float(score),
            paths=tuple(paths.get(cid, ())) or ("visual",),
            summary=row.description or (doc.caption if doc and doc.caption else row.doc_id),
            provenance=provenance,
            box=row.box,
            thumbnail=thumbs.get(row.doc_id) if thumbnails else None,
        ))
    return items
