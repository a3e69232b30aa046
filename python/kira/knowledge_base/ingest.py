"""Bulk ingestion: a folder (or list) of image files into a knowledge base, in durable batches.

Each batch of images is loaded, chunked and encoded together (one encoder call per
space), inserted in one transaction and committed, so a crash loses at most the batch
in flight. The index files are checkpointed once at the end (the database holds every
vector, so a crash before that is repaired on reopen without any model call).
Unreadable, corrupt or oversized images (decompression bombs) are skipped with the
reason; nothing already stored is touched.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from kira.images import ImageError, load_image

if TYPE_CHECKING:
    from kira.knowledge_base.kb import KnowledgeBase

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})
CaptionSource = Mapping[str, str] | Callable[[Path], "str | None"] | None


@dataclass
class IngestSummary:
    """What `ingest` did: doc ids added, (path, reason) pairs skipped, batches committed."""

    added: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    batches: int = 0

    def __str__(self) -> str:
        lines = [f"added {len(self.added)} image(s) in {self.batches} batch(es), skipped {len(self.skipped)}"]
        lines += [f"  skipped {path}: {reason}" for path, reason in self.skipped]
        return "\n".join(lines)


def collect_paths(folder_or_paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """Image files under a folder (recursively, sorted), or the given paths as they are.

    Raises ValueError when a folder/path does not exist.
    """
    if isinstance(folder_or_paths, (str, os.PathLike)):
        root = Path(folder_or_paths)
        if root.is_dir():
            return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if root.is_file():
            return [root]
        raise ValueError(f"no such file or folder: {root}")
    return [Path(p) for p in folder_or_paths]


def _caption_for(path: Path, captions: CaptionSource) -> str | None:
    if callable(captions):
        return captions(path)
    if captions is not None:
        for key in (str(path), path.name, path.stem):
            if key in captions:
                return captions[key]
        return None
    sidecar = path.with_suffix(".txt")  # default: a caption file beside the image
    if sidecar.is_file():
        return sidecar.read_text(encoding="utf-8", errors="replace").strip() or None
    return None


def _progress(total: int, enabled: bool | None):
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
    kb: KnowledgeBase,
    folder_or_paths: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    captions: CaptionSource = None,
    tags: Callable[[Path], Iterable[str]] | None = None,
    metadata: Callable[[Path], dict[str, Any]] | None = None,
    batch_size: int = 16,
    progress: bool | None = None,
) -> IngestSummary:
    """Add every image under a folder, or in a list of paths, committing per batch.

    Parameters
    ----------
    kb: a knowledge base open for writing.
    captions: a mapping (full path, file name or stem -> caption), a function
        path -> caption, or None to read ``<stem>.txt`` beside each image when present.
    tags, metadata: optional functions path -> tags / metadata dict.
    batch_size: images encoded and committed together.
    progress: show a tqdm bar (default: when this module's logger is at INFO).

    Returns an `IngestSummary`. Doc ids are file stems, or the path relative to the
    folder (without suffix) when stems collide; an id already stored is skipped.
    Raises ValueError for a missing folder or batch_size < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    root = Path(folder_or_paths) if isinstance(folder_or_paths, (str, os.PathLike)) else None
    paths = collect_paths(folder_or_paths)
    stems: dict[str, int] = {}
    for p in paths:
        stems[p.stem] = stems.get(p.stem, 0) + 1
    summary = IngestSummary()
    bar = _progress(len(paths), progress)
    batch: list[dict[str, Any]] = []
    seen: set[str] = set()

    def flush() -> None:
        if not batch:
            return
        try:
            kb._add_images(batch)
        except (ValueError, OSError, RuntimeError) as exc:
            # One bad item (e.g. an encoder refusing a crop) must not sink the batch: retry one by one.
            log.warning("batch failed (%s); retrying its images one at a time", exc)
            for item in batch:
                try:
                    kb._add_images([item])
                    summary.added.append(item["doc_id"])
                except (ValueError, OSError, RuntimeError) as inner:
                    summary.skipped.append((item["source"], str(inner)))
        else:
            summary.added.extend(item["doc_id"] for item in batch)
        kb.commit_database()
        summary.batches += 1
        batch.clear()

    try:
        for path in paths:
            if bar is not None:
                bar.update(1)
            if stems[path.stem] > 1 and root is not None and root.is_dir():
                doc_id = path.relative_to(root).with_suffix("").as_posix()
            else:
                doc_id = path.stem
            if doc_id in seen or kb.store.has_document(doc_id):
                summary.skipped.append((str(path), f"document id {doc_id!r} is already in the knowledge base"))
                continue
            try:
                pixels = load_image(path)
            except ImageError as exc:
                summary.skipped.append((str(path), str(exc)))
                log.info("skipped %s: %s", path, exc)
                continue
            seen.add(doc_id)
            batch.append(dict(
                pixels=pixels, doc_id=doc_id, caption=_caption_for(path, captions),
                tags=tuple(tags(path)) if tags else (), metadata=dict(metadata(path)) if metadata else {},
                source=str(path), sequence=None, view=None,
            ))
            if len(batch) >= batch_size:
                flush()
        flush()
    finally:
        if bar is not None:
            bar.close()
    kb.commit()  # the index files are saved if the ingest changed enough of them (KnowledgeBase.commit)
    return summary
