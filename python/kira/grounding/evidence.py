"""Stage 4 input: the fused list -> kira.reasoning EvidenceItems with provenance and thumbnails.

* `diverse`: the best fused chunks, at most so many of one document; a further chunk of a document
  only when it adds something (`adds_to`) or was found where it lies in the image.
* `build_items`: one `EvidenceItem` per chunk, with its document's provenance.
* `hops_with_documents`: each hop's chunk ids with their documents, for the card.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.knowledge_base.rows import MAX_DESCRIPTION_CHARS, ChunkRow
from kira.query_state import Fused, HopNote, RetrievalPath
from kira.reasoning.types import EvidenceItem
from kira.text.pieces import is_location


def build_items(kb: KnowledgeBaseLike, ids: Sequence[int], scores: Sequence[float], paths: dict[int, list[str]],
                cosine: dict[int, float], *, thumbnails: bool = True, rows: Mapping[int, ChunkRow] | None = None
                ) -> list[EvidenceItem]:
    """One EvidenceItem per chunk id (numbered in the given order from 1; unknown ids skipped).

    provenance holds source, caption, tags, metadata, image_size (width, height), the
    parent chunk, how it was encoded, the best raw cosine score over the paths that
    found it and, for a document in a temporal or multiview group, "compound": the key
    of its compound document (`KnowledgeBase.compound_of`), for one in a multiview group
    "views": that group's id (`KnowledgeBase.view_set_of`), and for one in a temporal sequence "sequence":
    {"id": the sequence's id, "place": its 1-based place in it, "of": the sequence's length}. `rows` may pass
    chunk rows already fetched.
    """
    ids = [int(i) for i in ids]
    if rows is None or any(i not in rows for i in ids):
        rows = kb.chunks(ids)
    doc_ids = {rows[i].doc_id for i in ids if i in rows}
    docs = kb.documents(doc_ids)
    stored = kb.provenances(doc_ids)
    compounds = kb.compounds_for(doc_ids=doc_ids)  # the groups of these documents alone (per hit on Milvus)
    compound, view_set, sequence = compounds.compound_of, compounds.view_set_of, compounds.sequence_of
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
        if row.doc_id in sequence:
            gid, place, length = sequence[row.doc_id]
            provenance["sequence"] = {"id": gid, "place": place, "of": length}
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


LOCATING_PATHS = frozenset({str(RetrievalPath.VISUAL), str(RetrievalPath.FINE)})
"""Paths that rank a region or patch by its own pixels against the query (the image, the question in image
space, the query crop): what they find says where in the image the match lies."""


def diverse(kb: KnowledgeBaseLike, fused: Fused, per_doc: int,
            n: int) -> tuple[list[tuple[int, float]], Mapping[int, ChunkRow]]:
    """The best `n` fused (chunk id, score) with at most `per_doc` from any one document, and the rows read.

    A further chunk of a document already chosen is left out when it adds nothing to the first one chosen
    (`adds_to`) and no locating path (`LOCATING_PATHS`) found it: a region repeating its image's caption,
    found through the shared text vector, is the same evidence twice, spends a place of top-k and counts
    as agreement with itself.
    """
    if not len(fused.ids):
        return [], {}
    head = fused.ids[: max(n * 4, 50)].tolist()
    rows = kb.chunks(head)
    first: dict[str, ChunkRow] = {}
    counts: dict[str, int] = {}
    out: list[tuple[int, float]] = []
    for cid, score in zip(head, fused.scores[: len(head)].tolist()):
        row = rows.get(cid)
        if row is None or counts.get(row.doc_id, 0) >= per_doc:
            continue
        if row.doc_id in first and not adds_to(row, first[row.doc_id]) \
                and not LOCATING_PATHS.intersection(fused.paths.get(cid, ())):
            continue
        first.setdefault(row.doc_id, row)
        counts[row.doc_id] = counts.get(row.doc_id, 0) + 1
        out.append((cid, score))
        if len(out) >= n:
            break
    return out, rows


def adds_to(row: ChunkRow, earlier: ChunkRow) -> bool:
    """Whether chunk `row` says something chunk `earlier` (of the same image) does not: a part of its
    description, other than where it lies, that `earlier`'s description lacks (the words read inside a
    region, a caption of the crop's own). Descriptions are "; "-joined parts (kira.knowledge_base.chunker)."""
    said = {p.strip() for p in earlier.description.split(";")}
    return any(p.strip() and p.strip() not in said and not is_location(p) for p in row.description.split(";"))


def hops_with_documents(kb: KnowledgeBaseLike, hops: tuple[HopNote, ...],
                        rows: Mapping[int, ChunkRow]) -> tuple[HopNote, ...]:
    """Each hop with ``"documents"``: the document ids of its chunks, in order without repeats (what a card
    shows a person instead of internal chunk ids). `rows` are chunk rows already read."""
    if not hops:
        return hops
    wanted = [int(i) for h in hops for i in h.get("ids", []) if int(i) not in rows]
    if wanted:
        rows = {**rows, **kb.chunks(wanted)}
    return tuple({**h, "documents": list(dict.fromkeys(rows[int(i)].doc_id for i in h.get("ids", []) if int(i) in rows))}
                 for h in hops)


__all__ = ["LOCATING_PATHS", "adds_to", "build_items", "diverse", "hops_with_documents"]
