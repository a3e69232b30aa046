"""Text pieces: each document's descriptions split as the grounding verifier reads them, with their vectors.

At ingest (`GroundingConfig.pieces_at_ingest`) the pieces of a batch are encoded with it and stored
with each document (`kira.knowledge_base.writing.prepare_batch`, on every backend and in the Ray job);
`fill_missing_pieces` encodes them later for documents stored without (`KnowledgeBase.store_text_pieces`).
The verifier then encodes only the claims; a document without pieces is verified all the same (the
verifier encodes the evidence it cites, same scores, more time per ask).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from kira.knowledge_base.batch_encode import MAX_ENCODED_CHARS, encode_texts
from kira.knowledge_base.rows import MAX_DESCRIPTION_CHARS
from kira.knowledge_base.storage import ReusesStoredPieces, Storage
from kira.text.pieces import appearance_parts, summary_pieces
from kira.text.shows import shown_as_text


def pieces_to_store(caption: str | None, image: bool, chunks: Sequence[tuple[str, str]], *,
                    appearance: bool = False) -> list[str]:
    """The distinct text pieces (`kira.text.pieces.summary_pieces`) a document's chunks are stored
    with at ingest: every piece of each of its `chunks` ((level, description) pairs) but, for a document
    with an `image`, the pieces that say how the image looks (`kira.text.pieces.appearance_parts` of its
    image chunks' descriptions, given the user's `caption`) and the whole of a description that says how it
    looks besides what it shows: an answer states appearance only when its question asks about it, so the
    verifier encodes those when an ask cites the chunk, with the same vectors (`appearance`: stored too).
    The whole description of an image chunk that only says how it looks is stored: it is the chunk's
    embedded text (kira.knowledge_base.chunker.describe), encoded anyway; so is every passage's and every
    description without appearance parts."""
    out: dict[str, None] = {}
    for level, description in chunks:
        pieces = summary_pieces(description)
        if image and level != "passage" and not appearance:
            looks = {part.strip(" ;.") for part in appearance_parts(description, caption)}
            whole = description.strip()
            keep_whole = not looks or all(part.strip(" ;.") in looks for part in whole.split(";") if part.strip(" ;."))
            pieces = [p for p in pieces if (p == whole and keep_whole) or (p != whole and p.strip(" ;.") not in looks)]
        out.update(dict.fromkeys(pieces))
    return list(out)


def piece_levels(*, regions: bool = False, patches: bool = False) -> frozenset[str]:
    """The chunk levels whose descriptions' pieces ingest stores: documents' and passages', regions' with
    `regions`, patches' with `patches` (`GroundingConfig.patch_pieces_at_ingest`).
    A region or patch description is its document's text plus the chunk's own (its location, text read
    inside it): left out, the verifier encodes a cited chunk's own pieces when an ask cites it."""
    return frozenset({"document", "passage", *(["region"] if regions else []), *(["patch"] if patches else [])})


def stored_pieces(items: Sequence[Mapping[str, Any]], plans: Sequence[Any], texts: Sequence[str], *,
                  patches: bool = False, regions: bool = False, appearance: bool = False) -> list[list[str]]:
    """Per item, the text pieces ingest stores with it (`item_pieces`); `texts` are the batch's chunk texts, in
    order (per item: its chunks' or its one text, then its passages')."""
    out: list[list[str]] = []
    ti = 0
    for item, plan in zip(items, plans):
        n = (1 if plan is None else len(plan.chunks)) + len(item.get("passages", ()))
        out.append(item_pieces(item, plan, texts[ti : ti + n], patches=patches, regions=regions,
                               appearance=appearance))
        ti += n
    return out


def item_pieces(item: Mapping[str, Any], plan: Any, texts: Sequence[str], *, patches: bool = False,
                regions: bool = False, appearance: bool = False) -> list[str]:
    """The text pieces ingest stores with one item (`pieces_to_store`) of the descriptions its chunks are stored
    with (as they are stored, cut at `MAX_DESCRIPTION_CHARS`): its chunks' (or, for an item without an image
    `plan`, its one text's), then its passages'; `texts` are its chunk texts in that order (what a chunk without
    a description is stored with). Region and patch chunks' only with `regions` / `patches` (`piece_levels`);
    an image's appearance parts only with `appearance`."""
    keep = piece_levels(regions=regions, patches=patches)
    if plan is None:
        chunks = [("document", texts[0])]
    else:
        chunks = [(c.level, c.description or texts[n]) for n, c in enumerate(plan.chunks) if c.level in keep]
    passages = [("passage", p) for p in item.get("passages", ())]
    return pieces_to_store(item.get("caption"), plan is not None,
                           [(level, d[:MAX_DESCRIPTION_CHARS]) for level, d in (*chunks, *passages)],
                           appearance=appearance)


def encode_pieces(encoder: Any, pieces: Sequence[Sequence[str]], encoded: Mapping[str, np.ndarray],
                  stored: Any = None) -> list[tuple[list[str], np.ndarray]]:
    """Per item, its distinct text `pieces` (`stored_pieces`, what the grounding verifier compares a claim
    with) and their raw vectors: a piece already `encoded` ({text (its first `MAX_ENCODED_CHARS`
    characters): vector}, e.g. `EncodedBatch.encoded`) reuses that vector, one that another document
    already stores reuses that (`stored(texts)` -> {text: vector}, e.g. `Store.stored_piece_texts`); the rest
    are encoded once each with `encoder` (once per batch, however many items share it)."""
    known = dict(encoded)
    per_item = [list(dict.fromkeys(item)) for item in pieces]
    if stored is not None:
        wanted = [p for item in per_item for p in item if p not in known]
        if wanted:
            known.update(stored(wanted))
    # by length: each encoder batch then pads to about its own length (a quarter less work than in order)
    missing = sorted(dict.fromkeys(p for item in per_item for p in item if p not in known), key=len)
    if missing:
        known.update(zip(missing, encode_texts(encoder, missing)))
    dim = int(encoder.dim)
    return [(item, np.array([known[p] for p in item], dtype=np.float32).reshape(len(item), dim))
            for item in per_item]


def shown_piece(caption: str | None, tags: Sequence[str], labels: Sequence[Mapping[str, Any]] | None,
                read: Sequence[Mapping[str, Any]] | None, metadata: Mapping[str, Any] | None) -> str:
    """What an image document shows as one text (kira.text.shows), from the fields its evidence item carries: the
    caption as stored, tags, the tagger's labels (most probable first), text read, metadata. Ingest stores it as
    a piece, so the critic and the relevance judge read its vector instead of encoding it in an ask."""
    ordered = sorted(labels or [], key=lambda lb: -float(lb.get("p", 0.0)))
    return shown_as_text((caption or "")[:MAX_DESCRIPTION_CHARS].strip(), [str(t).strip() for t in tags if str(t).strip()],
                         [str(lb["label"]) for lb in ordered if lb.get("label")],
                         [str(ln.get("text", "")).strip() for ln in read or [] if str(ln.get("text", "")).strip()],
                         dict(metadata or {}))


def with_shown(pieces: list[str], shown: str) -> list[str]:
    """`pieces` with `shown` (`shown_piece`) added where it is new."""
    return [*pieces, shown] if shown and shown not in pieces else pieces


def fill_missing_pieces(storage: Storage, encoder: Any, *, patches: bool, batch: int) -> int:
    """Encode and store the text pieces of every document of `storage` that has none, `batch` documents per
    write (each durable at once: no index reads the pieces, so readers rebuild nothing). Returns how many
    documents got pieces."""
    rows = storage.rows
    todo = rows.documents_without_pieces()
    dim = int(encoder.dim)
    reuse = rows.stored_piece_texts if isinstance(rows, ReusesStoredPieces) else None
    filled = 0
    for start in range(0, len(todo), batch):
        part = todo[start : start + batch]
        sources = rows.described_chunks(part, levels=piece_levels(patches=patches))
        per_doc = [pieces_to_store(*sources[d]) if d in sources else [] for d in part]
        docs, provenance = rows.documents(part), rows.provenances(part)
        for n, d in enumerate(part):
            doc, prov = docs.get(d), provenance.get(d) or {}
            if doc is not None and doc.width > 0:  # an image: what it shows, as ingest stores it
                per_doc[n] = with_shown(per_doc[n], shown_piece(doc.caption, doc.tags, prov.get("labels"),
                                                                prov.get("text_read"), doc.metadata))
        pieces = encode_pieces(encoder, per_doc, {}, stored=(lambda wanted: reuse(wanted, dim)) if reuse else None)
        found = {doc_id: (texts, vectors) for doc_id, (texts, vectors) in zip(part, pieces) if texts}
        if found:
            storage.write_pieces(found)
            filled += len(found)
    return filled


__all__ = ["encode_pieces", "fill_missing_pieces", "item_pieces", "piece_levels", "pieces_to_store", "shown_piece",
           "stored_pieces", "with_shown"]
