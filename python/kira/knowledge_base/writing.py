"""The one write path: the user's items -> a typed `WriteBatch` that any storage keeps all or nothing.

`image_item` and `document_items` turn `KnowledgeBase.add_image` / `add_document` arguments into
items (dicts with pixels, doc id, caption, tags, metadata, source, sequence, view, passages);
`kira.knowledge_base.ingest` and a Ray ingest's actors make the same items from files.
`prepare_batch` chunks, describes and encodes them (`kira.knowledge_base.batch_encode`), encodes
their text pieces (`kira.knowledge_base.pieces`), makes each thumbnail and provenance and places
each document in its groups: the same records whichever backend stores them.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from kira.images import ImageLike, load_image
from kira.knowledge_base.batch import ChunkToStore, DocumentToStore, WriteBatch
from kira.knowledge_base.batch_encode import encode_batch
from kira.knowledge_base.inputs import clean_text, group_arg, tags_arg
from kira.knowledge_base.pieces import encode_pieces, item_pieces, shown_piece, with_shown

THUMBNAIL_SIDE = 160


def thumbnail_png(image: np.ndarray) -> bytes:
    """A <= `THUMBNAIL_SIDE` px PNG preview of an RGB image. zlib level 3: the same pixels as the default
    level 6 with half its CPU, and a smaller file on real photos."""
    from PIL import Image

    im = Image.fromarray(image)
    im.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=3)
    return buf.getvalue()


def stored_source(source: str | None) -> str | None:
    """How a document's source path is stored: absolute and normalised (a path relative to where
    ingest ran names nothing from anywhere else); a uri (``s3://...``) or None as given."""
    if not source or "://" in source:
        return source
    return os.path.abspath(source)


def image_item(image: ImageLike, *, doc_id: str | None, caption: str | None, tags: Sequence[str],
               metadata: Mapping[str, Any] | None, sequence: Any, view: Any, count: Callable[[], int]) -> dict[str, Any]:
    """The item `KnowledgeBase.add_image` stores; a doc id defaults to the file stem, else ``doc-<count()+1>``."""
    caption, tags = clean_text(caption, "caption"), tags_arg(tags)
    source = str(image) if isinstance(image, (str, os.PathLike)) else None
    pixels = load_image(image)
    if doc_id is None:
        doc_id = Path(source).stem if source else f"doc-{count() + 1}"
    doc_id = clean_text(str(doc_id), "doc_id")
    return dict(pixels=pixels, doc_id=str(doc_id), caption=caption, tags=tags, metadata=dict(metadata or {}),
                source=source, sequence=sequence, view=view)


def document_items(doc_id: str, *, images: Sequence[ImageLike], passages: Sequence[str], caption: str | None,
                   tags: Sequence[str], metadata: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The items `KnowledgeBase.add_document` stores (its docstring): one per image, or one text-only item."""
    caption, tags = clean_text(caption, "caption"), tags_arg(tags)
    if isinstance(passages, str):
        raise TypeError("passages must be a list of strings, not one string; wrap it: passages=[text]")
    passages = [p for p in (clean_text(p, "each passage") for p in passages) if p]
    if not images and not passages and not caption:
        raise ValueError("add_document needs images, passages or a caption")
    items = []
    for i, image in enumerate(images):
        items.append(dict(
            pixels=load_image(image), doc_id=str(doc_id) if i == 0 else f"{doc_id}#{i}", caption=caption,
            tags=tuple(tags), metadata=dict(metadata or {}),
            source=str(image) if isinstance(image, (str, os.PathLike)) else None,
            sequence=None, view=(str(doc_id), float(i)) if len(images) > 1 else None,
            passages=tuple(passages) if i == 0 else ()))
    if not items:
        items.append(dict(pixels=None, doc_id=str(doc_id), caption=caption, tags=tuple(tags),
                          metadata=dict(metadata or {}), source=None, sequence=None, view=None,
                          passages=tuple(passages)))
    return items


def _group_positions(items: Sequence[Mapping[str, Any]], group_size: Callable[[str, str], int] | None
                     ) -> list[tuple[tuple[str, str, float], ...]]:
    """Per item, (kind, group id, position) of the groups it joins; an item joining without a position goes
    last (after the members stored, `group_size(kind, id)`, and those earlier in the batch)."""
    added: dict[tuple[str, str], int] = {}
    out = []
    for item in items:
        member = []
        for kind, arg in (("temporal", item.get("sequence")), ("multiview", item.get("view"))):
            group = group_arg(arg, "sequence" if kind == "temporal" else "view")
            if group is not None:
                gid, pos = group
                if pos is None:
                    pos = float((group_size(kind, gid) if group_size else 0) + added.get((kind, gid), 0))
                added[(kind, gid)] = added.get((kind, gid), 0) + 1
                member.append((kind, gid, float(pos)))
        out.append(tuple(member))
    return out


def prepare_batch(stack: Any, items: Sequence[Mapping[str, Any]], *, config: Any, levels: Sequence[str],
                  caption_children: bool = False, group_size: Callable[[str, str], int] | None = None,
                  stored_piece_texts: Callable[[list[str]], Mapping[str, np.ndarray]] | None = None,
                  thumbnails: bool = True) -> WriteBatch:
    """Chunk, describe and encode `items` with `stack` under `config` (a `KiraConfig`) into a `WriteBatch`
    (module docstring); an item's ``thumbnail`` PNG, where a bulk ingest made it as it decoded, is used. Text pieces are encoded when ``config.grounding.pieces_at_ingest`` (a piece another
    document stores is reused: `stored_piece_texts(texts)` -> {text: vector}). ValueError / TypeError for a
    bad item (nothing is encoded)."""
    positions = _group_positions(items, group_size)
    grounding = config.grounding

    def pieces_of(item: Mapping[str, Any], plan: Any, texts: Sequence[str], labels: Any, read: Any) -> list[str]:
        wanted = item_pieces(item, plan, texts, patches=grounding.patch_pieces_at_ingest)
        if plan is None:
            return wanted
        return with_shown(wanted, shown_piece(item.get("caption"), item.get("tags", ()), labels, read,
                                              item.get("metadata")))  # what the critic and the judge compare with

    batch = encode_batch(stack, items, config.chunking, levels, caption_children=caption_children,
                         pieces_of=pieces_of if grounding.pieces_at_ingest else None, stored=stored_piece_texts)
    texts, visual, text = batch.texts, batch.visual, batch.text
    dim = int(text.shape[1]) if text.ndim == 2 else int(stack.text.dim)
    if grounding.pieces_at_ingest:  # encoded in the text thread beside the image work; a piece too long for it here
        pieces = encode_pieces(stack.text, batch.pieces, batch.encoded)
    else:  # filled later by store_text_pieces(); until then the verifier encodes what it meets
        pieces = [([], np.zeros((0, dim), np.float32)) for _ in items]
    image_identity = stack.identity().get("image") if hasattr(stack, "identity") else None
    out = WriteBatch()
    vi = ti = 0
    for n, (item, plan) in enumerate(zip(items, batch.plans)):
        doc_id, pixels = str(item["doc_id"]), item["pixels"]
        chunks: list[ChunkToStore] = []
        if plan is None:
            chunks.append(ChunkToStore("document", None, None, texts[ti], None, text[ti]))
            ti += 1
        else:
            for chunk in plan.chunks:
                chunks.append(ChunkToStore(chunk.level, chunk.parent, chunk.box,
                                           chunk.description or texts[ti], visual[vi], text[ti]))
                vi, ti = vi + 1, ti + 1
        passages = tuple(item.get("passages", ()))
        for passage in passages:
            chunks.append(ChunkToStore("passage", 0, None, passage, None, text[ti]))
            ti += 1
        source = stored_source(item.get("source"))
        labels, read = batch.labels.get(doc_id), batch.read_lines.get(doc_id)
        provenance = {
            "source": source or "(in memory)",
            "image_encoder": image_identity or type(stack.image).__name__,
            "text_encoder": type(stack.text).__name__,
            "described_by": "user caption/tags" if (item.get("caption") or item.get("tags")) else "captioner",
            **({"digest": item["digest"]} if item.get("digest") else {}),
            **({"labels": labels} if labels else {}),
            **({"text_read": read} if read else {}),
        }
        h, w = pixels.shape[:2] if pixels is not None else (0, 0)
        piece_texts, piece_vectors = pieces[n]
        out.documents.append(DocumentToStore(
            doc_id=doc_id, source=source, caption=item.get("caption"), width=int(w), height=int(h),
            metadata=dict(item.get("metadata") or {}), tags=tuple(item.get("tags", ())), provenance=provenance,
            thumbnail=(item.get("thumbnail") or thumbnail_png(pixels)) if pixels is not None and thumbnails else None,
            chunks=tuple(chunks),
            passages=passages, groups=positions[n], piece_texts=tuple(piece_texts),
            piece_vectors=np.asarray(piece_vectors, dtype=np.float32)))
    return out


def prepare_for(kb: Any, items: Sequence[Mapping[str, Any]]) -> WriteBatch:
    """`prepare_batch` of `items` for the knowledge base `kb` (its models, config, levels and groups; a text piece
    another document stores is reused where its storage can say so). ValueError for a doc id stored or repeated
    (nothing is encoded)."""
    from kira.knowledge_base.storage import ReusesStoredPieces

    rows = kb.storage.rows
    ids = [str(item["doc_id"]) for item in items]
    stored = set(rows.documents(ids)) if ids else set()
    for n, doc_id in enumerate(ids):
        if doc_id in stored or doc_id in ids[:n]:
            raise ValueError(f"document {doc_id!r} is already in the knowledge base; remove it first or pick another id")
    dim = int(kb.models.text.dim)
    reuse = (lambda texts: rows.stored_piece_texts(texts, dim)) if isinstance(rows, ReusesStoredPieces) else None
    return prepare_batch(kb.models, items, config=kb.config, levels=kb.levels, caption_children=kb.caption_children,
                         group_size=rows.group_size, stored_piece_texts=reuse)


__all__ = ["THUMBNAIL_SIDE", "document_items", "image_item", "prepare_batch", "prepare_for", "stored_source",
           "thumbnail_png"]
