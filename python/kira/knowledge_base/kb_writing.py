"""Adding to and removing from a knowledge base (a part of `KnowledgeBase`).

`Writing` is a mixin: `add_image`, `add_document`, `remove` and `ingest` for users, and
`_add_images`, which chunks, describes and encodes a batch (one encoder call per space)
and stores it in one savepoint, all or nothing.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from kira.images import ImageLike, load_image
from kira.knowledge_base.batch_encode import (
    ENCODE_BATCH,
    MAX_ENCODED_CHARS,
    EncodedBatch,
    encode_batch,
    encode_texts,
)
from kira.knowledge_base.inputs import clean_text, group_arg, tags_arg
from kira.knowledge_base.rows import MAX_DESCRIPTION_CHARS
from kira.text.pieces import appearance_parts, summary_pieces

THUMBNAIL_SIDE = 160
__all__ = ["ENCODE_BATCH", "MAX_ENCODED_CHARS", "THUMBNAIL_SIDE", "PreparedBatch", "Writing", "encode_pieces",
           "piece_levels", "pieces_to_store", "stored_pieces"]


@dataclass
class PreparedBatch:
    """A batch encoded and ready to store (`Writing._prepare_images`): chunks, descriptions and vectors, and
    each item's thumbnail PNG (None for an item without an image)."""

    encoded: EncodedBatch
    thumbnails: list[bytes | None]


def _thumbnail_png(image: np.ndarray) -> bytes:
    from PIL import Image

    im = Image.fromarray(image)
    im.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def stored_source(source: str | None) -> str | None:
    """How a document's source path is stored: absolute and normalised (a path relative to where
    ingest ran names nothing from anywhere else); a uri (``s3://...``) or None as given."""
    if not source or "://" in source:
        return source
    return os.path.abspath(source)


def pieces_to_store(caption: str | None, image: bool, chunks: Sequence[tuple[str, str]], *,
                    appearance: bool = False) -> list[str]:
    """The distinct text pieces (`kira.text.pieces.summary_pieces`) a document's chunks are stored
    with at ingest: every piece of each of its `chunks` ((level, description) pairs) but, for a document
    with an `image`, the pieces that only say how the image looks (`kira.text.pieces.appearance_parts`
    of its image chunks' descriptions, given the user's `caption`): an answer states those only when its
    question asks about appearance, so the verifier encodes them when an ask cites the chunk, with the
    same vectors (`appearance`: stored too). A description's whole text is always stored (a document's is
    its chunk text, encoded anyway)."""
    out: dict[str, None] = {}
    for level, description in chunks:
        pieces = summary_pieces(description)
        if image and level != "passage" and not appearance:
            looks = {part.strip(" ;.") for part in appearance_parts(description, caption)}
            whole = description.strip()
            pieces = [p for p in pieces if p == whole or p.strip(" ;.") not in looks]
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
    """Per item, the text pieces ingest stores with it (`pieces_to_store`) of the descriptions its chunks are
    stored with (as `_add_images` stores them, cut at `MAX_DESCRIPTION_CHARS`): its chunks' (or its one
    text's), then its passages'. Region and patch chunks' only with `regions` / `patches` (`piece_levels`);
    an image's appearance parts only with `appearance`."""
    keep = piece_levels(regions=regions, patches=patches)
    out: list[list[str]] = []
    ti = 0
    for item, plan in zip(items, plans):
        if plan is None:
            chunks = [("document", texts[ti])]
            ti += 1
        else:
            chunks = [(c.level, c.description or texts[ti + n]) for n, c in enumerate(plan.chunks) if c.level in keep]
            ti += len(plan.chunks)
        passages = [("passage", p) for p in item.get("passages", ())]
        ti += len(passages)
        out.append(pieces_to_store(item.get("caption"), plan is not None,
                                   [(level, d[:MAX_DESCRIPTION_CHARS]) for level, d in (*chunks, *passages)],
                                   appearance=appearance))
    return out


def encode_pieces(encoder: Any, pieces: Sequence[Sequence[str]], texts: Sequence[str],
                  text: np.ndarray, stored: Any = None) -> list[tuple[list[str], np.ndarray]]:
    """Per item, its distinct text `pieces` (`stored_pieces`, what the grounding verifier compares a claim
    with) and their raw vectors: a piece that is one of the `texts` already encoded (rows of `text`) reuses
    its row, one that another document already stores reuses that (`stored(texts)` -> {text: vector}, e.g.
    `Store.stored_piece_texts`); the rest are encoded once each with `encoder` (once per batch, however
    many items share it)."""
    known = {t[:MAX_ENCODED_CHARS]: text[n] for n, t in enumerate(texts)}
    per_item = [list(dict.fromkeys(item)) for item in pieces]
    if stored is not None:
        wanted = [p for item in per_item for p in item if p not in known]
        if wanted:
            known.update(stored(wanted))
    # by length: each encoder batch then pads to about its own length (a quarter less work than in order)
    missing = sorted(dict.fromkeys(p for item in per_item for p in item if p not in known), key=len)
    if missing:
        known.update(zip(missing, encode_texts(encoder, missing)))
    dim = int(text.shape[1]) if text.ndim == 2 else int(encoder.dim)
    return [(item, np.array([known[p] for p in item], dtype=np.float32).reshape(len(item), dim))
            for item in per_item]


class Writing:
    """Mixin of `KnowledgeBase` (module docstring). Needs ``store``, ``models``, ``config``, ``read_only``,
    ``_ensure_dims``, ``_caches``, ``_derived`` and ``_writable`` of the knowledge base."""

    def add_image(
        self,
        image: ImageLike,
        *,
        doc_id: str | None = None,
        caption: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        sequence: str | tuple[str, float] | None = None,
        view: str | tuple[str, float] | None = None,
    ) -> str:
        """Chunk, describe, encode and store one image; returns its doc id.

        Parameters
        ----------
        image: a path, a PIL image or an array (see `kira.images.load_image`).
        doc_id: unique id; defaults to the file stem for a path, else ``doc-<n>``.
        caption, tags, metadata: the user's text and facts about the image.
        sequence: temporal group id (or (group id, position)): members of a sequence
            pull each other into results at 0.8x score.
        view: multiview group id (or (group id, position)): pulled in at 0.7x.

        Raises ValueError (kira.images.ImageError) for an unusable image, a duplicate
        doc id, or a read-only knowledge base. Nothing is stored on error.
        """
        self._writable()
        caption, tags = clean_text(caption, "caption"), tags_arg(tags)
        source = str(image) if isinstance(image, (str, os.PathLike)) else None
        pixels = load_image(image)
        if doc_id is None:
            doc_id = Path(source).stem if source else f"doc-{self.store.count_documents() + 1}"
        doc_id = clean_text(str(doc_id), "doc_id")
        self._add_images([
            dict(pixels=pixels, doc_id=str(doc_id), caption=caption, tags=tags, metadata=dict(metadata or {}),
                 source=source, sequence=sequence, view=view)
        ])
        return str(doc_id)

    def add_document(
        self,
        doc_id: str,
        *,
        images: Sequence[ImageLike] = (),
        passages: Sequence[str] = (),
        caption: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Store a document with text passages (a knowledge-base page, as in KB-VQA) and images.

        The first image is the document's image (doc id `doc_id`); further images become
        documents ``<doc_id>#<i>`` in one multiview set with it. Each passage becomes a
        'passage' chunk (text space only) under the document chunk. A document with no
        image is stored text-only. Raises ValueError for a duplicate id or no content.
        """
        self._writable()
        caption, tags = clean_text(caption, "caption"), tags_arg(tags)
        if isinstance(passages, str):
            raise TypeError("passages must be a list of strings, not one string; wrap it: passages=[text]")
        passages = [p for p in (clean_text(p, "each passage") for p in passages) if p]
        if not images and not passages and not caption:
            raise ValueError("add_document needs images, passages or a caption")
        items = []
        for i, image in enumerate(images):
            did = str(doc_id) if i == 0 else f"{doc_id}#{i}"
            items.append(dict(
                pixels=load_image(image), doc_id=did, caption=caption, tags=tuple(tags), metadata=dict(metadata or {}),
                source=str(image) if isinstance(image, (str, os.PathLike)) else None,
                sequence=None, view=(str(doc_id), float(i)) if len(images) > 1 else None,
                passages=tuple(passages) if i == 0 else (),
            ))
        if not items:
            items.append(dict(pixels=None, doc_id=str(doc_id), caption=caption, tags=tuple(tags),
                              metadata=dict(metadata or {}), source=None, sequence=None, view=None,
                              passages=tuple(passages)))
        self._add_images(items)
        return str(doc_id)

    def _prepare_images(self, items: Sequence[Mapping[str, Any]]) -> PreparedBatch:
        """Chunk, describe and encode a batch and make its thumbnails: all of `_add_images` that does not touch
        the store, so a bulk ingest runs it in a second thread while this one stores the batch before."""
        batch = encode_batch(self.models, items, self.config.chunking, self.levels,
                             caption_children=self.caption_children)
        thumbnails = [_thumbnail_png(item["pixels"]) if item["pixels"] is not None else None for item in items]
        return PreparedBatch(batch, thumbnails)

    def _add_images(self, items: list[dict[str, Any]]) -> list[str]:
        """Encode and insert a batch (one encoder call per space); all or nothing on error."""
        self._check_new(items)
        return self._add_prepared(items, self._prepare_images(items))

    def _check_new(self, items: Sequence[Mapping[str, Any]]) -> None:
        self._ensure_dims()
        seen: set[str] = set()
        for item in items:
            if item["doc_id"] in seen or self.store.has_document(item["doc_id"]):
                raise ValueError(f"document {item['doc_id']!r} is already in the knowledge base; remove it first or pick another id")
            seen.add(item["doc_id"])

    def _add_prepared(self, items: list[dict[str, Any]], prepared: PreparedBatch) -> list[str]:
        """Store a batch `_prepare_images` encoded (its text pieces encoded here); all or nothing on error."""
        self._check_new(items)
        vectors = self._ensure_dims()
        stack = self.models
        batch = prepared.encoded
        plans, texts, visual, text = batch.plans, batch.texts, batch.visual, batch.text
        labels, read_lines = batch.labels, batch.read_lines
        dim = int(text.shape[1]) if text.ndim == 2 else int(stack.text.dim)
        grounding = self.config.grounding
        if grounding.pieces_at_ingest:
            wanted = stored_pieces(items, plans, texts, patches=grounding.patch_pieces_at_ingest)
            pieces = encode_pieces(stack.text, wanted, texts, text,
                                   stored=lambda found: self.store.stored_piece_texts(found, dim))
        else:  # filled later by store_text_pieces(); until then the verifier encodes what it meets
            pieces = [([], np.zeros((0, dim), np.float32)) for _ in items]
        image_identity = stack.identity().get("image") if hasattr(stack, "identity") else None
        new_ids: dict[str, list[int]] = {"visual": [], "text": []}
        new_rows: dict[str, list[np.ndarray]] = {"visual": [], "text": []}
        vi = ti = 0
        was_open = self.store.in_transaction
        self.store.begin()
        try:
            with self.store.savepoint("kira_batch"):  # the batch is stored whole or not at all
                for n, (item, plan) in enumerate(zip(items, plans)):
                    pixels = item["pixels"]
                    source = stored_source(item["source"])
                    h, w = (pixels.shape[:2] if pixels is not None else (0, 0))
                    self.store.insert_document(
                        item["doc_id"], source=source, caption=item["caption"], width=w, height=h,
                        metadata=item["metadata"], tags=item["tags"],
                        thumbnail=prepared.thumbnails[n],
                        provenance={
                            "source": source or "(in memory)",
                            "image_encoder": image_identity or type(stack.image).__name__,
                            "text_encoder": type(stack.text).__name__,
                            "described_by": "user caption/tags" if (item["caption"] or item["tags"]) else "captioner",
                            **({"digest": item["digest"]} if item.get("digest") else {}),
                            **({"labels": labels[item["doc_id"]]} if labels.get(item["doc_id"]) else {}),
                            **({"text_read": read_lines[item["doc_id"]]} if read_lines.get(item["doc_id"]) else {}),
                        },
                    )
                    chunk_ids: list[int] = []
                    if plan is None:
                        cid = self.store.insert_chunk(item["doc_id"], "document", parent_id=None, box=None,
                                                      description=texts[ti], visual=None, text=text[ti])
                        new_ids["text"].append(cid)
                        new_rows["text"].append(text[ti])
                        chunk_ids.append(cid)
                        ti += 1
                    else:
                        for chunk in plan.chunks:
                            parent = chunk_ids[chunk.parent] if chunk.parent is not None else None
                            cid = self.store.insert_chunk(item["doc_id"], chunk.level, parent_id=parent, box=chunk.box,
                                                          description=chunk.description or texts[ti], visual=visual[vi],
                                                          text=text[ti])
                            new_ids["visual"].append(cid)
                            new_rows["visual"].append(visual[vi])
                            new_ids["text"].append(cid)
                            new_rows["text"].append(text[ti])
                            chunk_ids.append(cid)
                            vi += 1
                            ti += 1
                    for order, passage in enumerate(item.get("passages", ())):
                        cid = self.store.insert_chunk(item["doc_id"], "passage", parent_id=chunk_ids[0], box=None,
                                                      description=passage, visual=None, text=text[ti])
                        self.store.insert_passage(cid, item["doc_id"], order, passage)
                        new_ids["text"].append(cid)
                        new_rows["text"].append(text[ti])
                        ti += 1
                    self.store.insert_pieces(item["doc_id"], *pieces[n])
                    for kind, arg in (("temporal", item["sequence"]), ("multiview", item["view"])):
                        group = group_arg(arg, "sequence" if kind == "temporal" else "view")
                        if group is not None:
                            gid, pos = group
                            if pos is None:
                                pos = float(self.store.group_size(kind, gid))
                            self.store.add_to_group(kind, gid, item["doc_id"], pos)
        except BaseException:
            if not was_open:
                self.store.rollback()
                self._derived.clear()
            raise
        for space in ("visual", "text"):
            if new_ids[space]:
                vectors.add(space, np.array(new_ids[space], dtype=np.int64), np.stack(new_rows[space]))
        self._caches.clear()
        return [item["doc_id"] for item in items]

    def store_text_pieces(self, *, batch: int = 32) -> int:
        """Encode and store the text pieces of every document that has none: what a knowledge base built
        before kira stored them needs so that verifying answers encodes only the claims (until then the
        verifier encodes the evidence it meets, with the same scores). Commits after each `batch`
        documents; the indexes and the generation do not change. Returns how many documents got pieces.

        Raises ValueError on a read-only knowledge base, with changes not yet committed, or batch < 1.
        """
        self._writable()
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an integer >= 1; got {batch!r}")
        if self.store.in_transaction:
            raise ValueError("the knowledge base has changes not yet committed: commit() them first")
        todo = self.store.documents_without_pieces()
        if not todo:
            return 0
        self._ensure_dims()  # the stack's text encoder is the one the knowledge base was built with
        encoder = self.models.text
        dim = int(encoder.dim)
        filled = 0
        for start in range(0, len(todo), batch):
            part = todo[start : start + batch]
            grounding = self.config.grounding
            levels = piece_levels(patches=grounding.patch_pieces_at_ingest)
            sources = self.store.described_chunks(part, levels=levels)
            per_doc = [pieces_to_store(*sources[d]) if d in sources else [] for d in part]
            pieces = encode_pieces(encoder, per_doc, [], np.zeros((0, dim), np.float32),
                                   stored=lambda wanted: self.store.stored_piece_texts(wanted, dim))
            self.store.begin()
            for doc_id, (texts, vectors) in zip(part, pieces):
                if texts:
                    self.store.insert_pieces(doc_id, texts, vectors)
                    filled += 1
            self.store.commit_meta()  # no index reads the pieces: nothing for readers to rebuild
        return filled

    def remove(self, doc_id: str) -> None:
        """Remove a document and all its chunks. Unknown id -> ValueError."""
        self._writable()
        if not self.store.has_document(doc_id):
            raise ValueError(f"no document {doc_id!r} in the knowledge base")
        ids = self.store.delete_document(doc_id)
        if self.vectors is not None:
            self.vectors.remove(np.array(ids, dtype=np.int64))
        self._caches.clear()

    def ingest(self, folder_or_paths: str | os.PathLike | Iterable[str | os.PathLike], **kwargs: Any):
        """Add every image under a folder (or in a list of paths); see `kira.knowledge_base.ingest.ingest`."""
        from kira.knowledge_base.ingest import ingest

        return ingest(self, folder_or_paths, **kwargs)
