"""Bulk ingestion: a folder (or list) of image files into a knowledge base, in durable batches.

Each batch of images is loaded, chunked and encoded together (one encoder call per
space), inserted in one transaction and committed, so a crash loses at most the batch in
flight (the next batch's files are decoded, their thumbnails made and the CNN's forward pass run,
meanwhile in a second thread; nothing of it is stored ahead). Within a batch the descriptions' sentence vectors are
encoded in a third thread while the chunks' image vectors are computed
(`kira.knowledge_base.batch_encode`). The index files are checkpointed once at the end (the
database holds every vector, so a crash before that is repaired on reopen without any model call).
Unreadable, corrupt or oversized images (decompression bombs) are skipped with the
reason; nothing already stored is touched.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from kira.images import MAX_PIXELS, ImageError, load_image
from kira.knowledge_base.ingest_files import (  # re-exported ("x as x"): callers import them from here
    IMAGE_SUFFIXES as IMAGE_SUFFIXES,
    check_entry as check_entry,
    collect_entries as collect_entries,
    collect_paths as collect_paths,
    doc_ids as doc_ids,
    printable as printable,
    relative_doc_ids as relative_doc_ids,
)
from kira.knowledge_base.inputs import clean_text, tags_arg

log = logging.getLogger(__name__)

CaptionSource = Mapping[str, str] | Callable[[Path], "str | None"] | None


@dataclass
class IngestSummary:
    """What `ingest` did: doc ids added, (path, reason) pairs skipped, batches committed, how many
    image files it found to try (`found`; 0 means the folder held none), and the doc ids of files
    already stored with the same content (`unchanged`: not added again, not an error)."""

    added: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    batches: int = 0
    found: int = 0
    unchanged: list[str] = field(default_factory=list)  # doc ids already stored from the same file content

    def __str__(self) -> str:
        lines = [f"added {len(self.added)} image(s) in {self.batches} batch(es), skipped {len(self.skipped)}"
                 + (f", {len(self.unchanged)} already in the knowledge base unchanged" if self.unchanged else "")]
        lines += [f"  skipped {printable(path)}: {reason}" for path, reason in self.skipped]
        return "\n".join(lines)


def _caption_for(path: Path, captions: CaptionSource, root: Path | None = None,
                 follow_links: bool = False) -> str | None:
    if callable(captions):
        return captions(path)
    if captions is not None:
        for key in (str(path), path.name, path.stem):
            if key in captions:
                return captions[key]
        return None
    sidecar = path.with_suffix(".txt")  # default: a caption file beside the image
    if not os.path.lexists(sidecar):
        return None
    reason = check_entry(sidecar, root, follow_links)
    if reason is not None:
        raise CaptionError(f"caption file {printable(sidecar)}: {reason}")
    return sidecar.read_text(encoding="utf-8", errors="replace").strip() or None


class CaptionError(ValueError):
    """A caption sidecar that is not read (an outward link, a FIFO, ...); the image is skipped."""


def _progress(total: int, enabled: bool | None) -> Any:
    if enabled is None:
        enabled = log.isEnabledFor(logging.INFO)
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="kira ingest", unit="img")


def ingest(
    kb: Any,
    folder_or_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    captions: CaptionSource = None,
    tags: Callable[[Path], Iterable[str]] | None = None,
    metadata: Callable[[Path], dict[str, Any]] | None = None,
    batch_size: int = 16,
    progress: bool | None = None,
    follow_links: bool = False,
    max_pixels: int = MAX_PIXELS,
) -> IngestSummary:
    """Add every image under a folder, or in a list of paths, committing per batch.

    Parameters
    ----------
    kb: a `KnowledgeBase` open for writing (`KnowledgeBase.ingest` calls this; the knowledge base imports
        this module, never the reverse).
    captions: a mapping (full path, file name or stem -> caption), a function
        path -> caption, or None to read ``<stem>.txt`` beside each image when present.
    tags, metadata: optional functions path -> tags / metadata dict.
    batch_size: images encoded and committed together.
    progress: show a tqdm bar (default: when this module's logger is at INFO).
    follow_links: follow symbolic links (files, caption files, folders) that lead out of
        the folder; by default they are skipped with the reason.
    max_pixels: images larger than this are skipped (kira.images.MAX_PIXELS by default).

    Returns an `IngestSummary`. Doc ids are paths relative to the folder without the suffix
    (a file at the top of the folder: its stem), or file stems for paths given one by one.
    A file whose id is already stored is not added again: counted as unchanged when its content
    is what was ingested (the digest recorded in its provenance; knowledge bases from before
    digests compare the source path), else listed as skipped, saying that it changed and how to
    replace it. Broken links, FIFOs, devices, file names that are not UTF-8 and unreadable
    images are skipped with the reason.
    Raises ValueError for a missing folder, batch_size < 1 or max_pixels < 1.

    While one batch is encoded, stored and committed, the next one's files are read and decoded
    (their thumbnails made, the CNN's forward pass run: `prefetch_forward`) in a second thread.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}")
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, int) or max_pixels < 1:
        raise ValueError(f"max_pixels must be an integer >= 1; got {max_pixels!r}")
    paths, skipped, root = collect_entries(folder_or_paths, follow_links=follow_links)
    if paths:
        from kira.knowledge_base.model_fallbacks import announce_fallbacks

        announce_fallbacks(kb)  # a model that fell back is said (and recorded) before the first image
    summary = IngestSummary(skipped=list(skipped), found=len(paths))
    for unread, reason in skipped:
        log.info("skipped %s: %s", printable(unread), reason)
    bar = _progress(len(paths), progress)
    todo: list[tuple[Path, str]] = []
    for path, doc_id in zip(paths, doc_ids(paths, root)):
        if not kb.has_document(doc_id):
            todo.append((path, doc_id))
            continue
        if bar is not None:
            bar.update(1)
        try:
            change = _changed(kb, doc_id, path, file_digest(path))
        except OSError as exc:
            change = f"cannot read it ({exc.strerror or exc})"
        (summary.unchanged.append(doc_id) if change is None else summary.skipped.append((str(path), change)))

    def load(part: list[tuple[Path, str]]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        from kira.knowledge_base.batch_encode import prefetch_forward
        from kira.knowledge_base.writing import thumbnail_png

        items: list[dict[str, Any]] = []
        bad: list[tuple[str, str]] = []
        for path, doc_id in part:
            try:
                digest = file_digest(path)
                caption = _caption_for(path, captions, root, follow_links)
                with warnings.catch_warnings():
                    # kira's own max_pixels is the limit that applies; Pillow's warning would only repeat it
                    warnings.simplefilter("ignore", _bomb_warning())
                    pixels = load_image(path, max_pixels=max_pixels)
            except (ImageError, CaptionError, OSError) as exc:
                bad.append((str(path), str(exc)))
                continue
            items.append(dict(
                pixels=pixels, thumbnail=thumbnail_png(pixels), doc_id=doc_id,
                caption=clean_text(caption, f"the caption of {printable(path)}"),
                tags=tags_arg(tags(path)) if tags else (), metadata=dict(metadata(path)) if metadata else {},
                source=str(path), sequence=None, view=None, digest=digest,
            ))
        try:  # the CNN pass, ahead: only an optimisation, so what it meets the batch's own encoding handles
            prefetch_forward(kb.models.image, [item["pixels"] for item in items])
        except Exception as exc:  # noqa: BLE001 - a bad image fails (and is skipped) where the batch encodes
            log.debug("forward pass ahead failed (%s); the batch encodes it itself", exc)
        return items, bad

    parts = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
    # The next batch's files are read and decoded in a second thread while this one encodes and stores the
    # batch before (and their CNN pass run); nothing is stored ahead, so a crash loses at most the batch in flight.
    reader = ThreadPoolExecutor(1, thread_name_prefix="kira-ingest-read")
    try:
        ahead: Future[tuple[list[dict[str, Any]], list[tuple[str, str]]]] | None = (
            reader.submit(load, parts[0]) if parts else None)
        for n in range(len(parts)):
            assert ahead is not None
            items, bad = ahead.result()
            ahead = reader.submit(load, parts[n + 1]) if n + 1 < len(parts) else None
            for where, reason in bad:
                summary.skipped.append((where, reason))
                log.info("skipped %s: %s", printable(where), reason)
            if items:
                _store(kb, items, summary)
            if bar is not None:
                bar.update(len(parts[n]))
    finally:
        reader.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.close()
    kb.commit()  # the index files are saved if the ingest changed enough of them (KnowledgeBase.commit)
    return summary


def _store(kb: Any, items: list[dict[str, Any]], summary: IngestSummary) -> None:
    """Encode and store one batch and commit it; a batch that fails is retried one image at a time."""
    try:
        kb.add_items(items)
    except ConnectionError:
        raise  # the store stopped answering (a Milvus server gone): image by image would fail alike
    except (ValueError, OSError, RuntimeError) as exc:
        # One bad item (e.g. an encoder refusing a crop) must not sink the batch: retry one by one.
        log.warning("batch failed (%s); retrying its images one at a time", exc)
        for item in items:
            try:
                kb.add_items([item])
                summary.added.append(item["doc_id"])
            except (ValueError, OSError, RuntimeError) as inner:
                summary.skipped.append((item["source"], str(inner)))
    else:
        summary.added.extend(item["doc_id"] for item in items)
    kb.commit_database()
    summary.batches += 1


def file_digest(path: str | os.PathLike[str]) -> str:
    """The digest an ingest records of a file's bytes (provenance ``digest``): ``blake2b:<32 hex digits>``."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"blake2b:{h.hexdigest()}"


def _changed(kb: Any, doc_id: str, path: Path | str, digest: str) -> str | None:
    """None where the stored document `doc_id` was ingested from this very content, else why it is not added."""
    provenance = kb.provenances([doc_id]).get(doc_id) or {}
    stored = provenance.get("digest")
    if stored == digest or (stored is None and provenance.get("source") == str(path)):
        return None
    what = ("its content differs from the file ingested then" if stored is not None
            else f"it was added from {provenance.get('source') or 'another source'}, with no digest to compare")
    return (f"document id {doc_id!r} is already in the knowledge base and {what}; to store this version, "
            f"remove the old one first (KnowledgeBase.remove({doc_id!r})) and ingest again")


def _bomb_warning() -> type[Warning]:
    from PIL import Image

    return Image.DecompressionBombWarning
