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
import stat
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from kira.images import MAX_PIXELS, ImageError, load_image
from kira.knowledge_base.inputs import clean_text, tags_arg

if TYPE_CHECKING:
    from kira.knowledge_base.kb import KnowledgeBase

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})
CaptionSource = Mapping[str, str] | Callable[[Path], "str | None"] | None


@dataclass
class IngestSummary:
    """What `ingest` did: doc ids added, (path, reason) pairs skipped, batches committed, and
    how many image files it found to try (`found`; 0 means the folder held none)."""

    added: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    batches: int = 0
    found: int = 0

    def __str__(self) -> str:
        lines = [f"added {len(self.added)} image(s) in {self.batches} batch(es), skipped {len(self.skipped)}"]
        lines += [f"  skipped {printable(path)}: {reason}" for path, reason in self.skipped]
        return "\n".join(lines)


def printable(path: str | os.PathLike) -> str:
    """A path as text any terminal can print: bytes that are not UTF-8 (which Python keeps as
    lone surrogates) are shown as \\xNN escapes."""
    return os.fsencode(path).decode("utf-8", errors="backslashreplace")


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _special_kind(mode: int) -> str | None:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def check_entry(path: Path, root: Path | None, follow_links: bool) -> str | None:
    """Why `path` cannot be ingested (None when it can): a broken or (unless `follow_links`) an
    outward symbolic link, a FIFO, device or socket, or a file name that is not UTF-8.
    `root` is the ingest folder (None for paths given one by one: those are followed)."""
    if not _utf8(str(path)):
        return "file name is not valid UTF-8; rename the file"
    try:
        mode = os.stat(path).st_mode  # follows links
    except FileNotFoundError:
        return "broken symbolic link" if path.is_symlink() else "file vanished while ingesting"
    except OSError as exc:
        return f"cannot stat it ({exc.strerror or exc})"
    if root is not None and not follow_links and path.is_symlink():
        target = path.resolve()
        if not _inside(target, root.resolve()):
            return (f"symbolic link to {printable(target)}, outside the ingest folder; "
                    "pass follow_links=True (kira ingest --follow-links) to read it")
    kind = _special_kind(mode)
    if kind is not None:
        return f"{kind}, not an image file"
    return None


def collect_entries(folder_or_paths: str | os.PathLike | Iterable[str | os.PathLike], *,
                    follow_links: bool = False) -> tuple[list[Path], list[tuple[str, str]], Path | None]:
    """(image files to add, (path, reason) for entries that cannot be, the ingest root or None).

    A folder is walked recursively (sorted); files with an image suffix are kept, and broken
    links, FIFOs, devices and sockets are listed as skipped whatever their suffix. Symbolic
    links that lead out of the folder (files or folders) are not followed unless
    `follow_links`. Given paths are used as they are (links followed).
    Raises ValueError when a folder/path does not exist.
    """
    if isinstance(folder_or_paths, (str, os.PathLike)):
        root = Path(folder_or_paths)
        if root.is_dir():
            return (*_walk(root, follow_links), root)
        if root.is_file():
            return [root], [], None
        raise ValueError(f"no such file or folder: {printable(root)}")
    paths, skipped = [], []
    for p in map(Path, folder_or_paths):
        reason = check_entry(p, None, True) if os.path.lexists(p) else f"no such file: {printable(p)}"
        (skipped.append((str(p), reason)) if reason else paths.append(p))
    return paths, skipped, None


def _walk(root: Path, follow_links: bool) -> tuple[list[Path], list[tuple[str, str]]]:
    found: list[Path] = []
    skipped: list[tuple[str, str]] = []
    real_root = root.resolve()
    seen_dirs = {real_root}  # every folder is read once, however many links lead to it (no loops)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        here = Path(dirpath)
        keep = []
        for d in sorted(dirnames):
            sub = here / d
            target = sub.resolve()
            if sub.is_symlink() and not (follow_links or _inside(target, real_root)):
                skipped.append((str(sub), f"symbolic link to {printable(target)}, outside the ingest folder; "
                                          "pass follow_links=True (kira ingest --follow-links) to read it"))
            elif target in seen_dirs or _inside(real_root, target):
                skipped.append((str(sub), f"symbolic link to {printable(target)}, a folder read already (a loop "
                                          "or a second way in)"))
            else:
                seen_dirs.add(target)
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            path = here / name
            try:
                special = not path.is_symlink() and _special_kind(os.lstat(path).st_mode) is not None
            except OSError:
                special = False
            if path.suffix.lower() not in IMAGE_SUFFIXES and not special and not (
                    path.is_symlink() and not path.exists()):
                continue
            reason = check_entry(path, root, follow_links)
            (skipped.append((str(path), reason)) if reason else found.append(path))
    return found, skipped


def collect_paths(folder_or_paths: str | os.PathLike | Iterable[str | os.PathLike], *,
                  follow_links: bool = False) -> list[Path]:
    """Image files under a folder (recursively, sorted), or the given paths as they are;
    see `collect_entries` for what is left out. Raises ValueError for a missing folder/path."""
    return collect_entries(folder_or_paths, follow_links=follow_links)[0]


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


def _doc_ids(paths: list[Path], root: Path | None) -> list[str]:
    """Each file's doc id: its path relative to the ingest folder without the suffix (a file at
    the top is its stem, as ids were before folders counted); the suffix is kept where two
    files differ only by it. Paths given one by one: the stem, or the full path when two stems
    collide."""
    if root is None:
        stems = Counter(p.stem for p in paths)
        return [p.stem if stems[p.stem] == 1 else p.with_suffix("").as_posix() for p in paths]
    return relative_doc_ids([p.relative_to(root).as_posix() for p in paths])


def relative_doc_ids(relative: Sequence[str]) -> list[str]:
    """Doc ids of files given by their paths relative to the ingest root ("a/x.png"): the path without
    the suffix, or with it where two files differ only by it. Any ingest (local, Ray) names files so."""
    rel = [PurePosixPath(r) for r in relative]
    bare = Counter(r.with_suffix("").as_posix() for r in rel)
    return [r.with_suffix("").as_posix() if bare[r.with_suffix("").as_posix()] == 1 else r.as_posix() for r in rel]


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
    follow_links: bool = False,
    max_pixels: int = MAX_PIXELS,
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
    follow_links: follow symbolic links (files, caption files, folders) that lead out of
        the folder; by default they are skipped with the reason.
    max_pixels: images larger than this are skipped (kira.images.MAX_PIXELS by default).

    Returns an `IngestSummary`. Doc ids are paths relative to the folder without the suffix
    (a file at the top of the folder: its stem), or file stems for paths given one by one;
    an id already stored is skipped. Broken links, FIFOs, devices, file names that are not
    UTF-8 and unreadable images are skipped with the reason.
    Raises ValueError for a missing folder, batch_size < 1 or max_pixels < 1.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}")
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, int) or max_pixels < 1:
        raise ValueError(f"max_pixels must be an integer >= 1; got {max_pixels!r}")
    paths, skipped, root = collect_entries(folder_or_paths, follow_links=follow_links)
    summary = IngestSummary(skipped=list(skipped), found=len(paths))
    for path, reason in skipped:
        log.info("skipped %s: %s", printable(path), reason)
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
        for path, doc_id in zip(paths, _doc_ids(paths, root)):
            if bar is not None:
                bar.update(1)
            if doc_id in seen or kb.store.has_document(doc_id):
                summary.skipped.append((str(path), f"document id {doc_id!r} is already in the knowledge base"))
                continue
            try:
                caption = _caption_for(path, captions, root, follow_links)
                with warnings.catch_warnings():
                    # kira's own max_pixels is the limit that applies; Pillow's warning would only repeat it
                    warnings.simplefilter("ignore", _bomb_warning())
                    pixels = load_image(path, max_pixels=max_pixels)
            except ImageError as exc:
                summary.skipped.append((str(path), str(exc)))
                log.info("skipped %s: %s", printable(path), exc)
                continue
            except (CaptionError, OSError) as exc:
                summary.skipped.append((str(path), str(exc)))
                log.info("skipped %s: %s", printable(path), exc)
                continue
            seen.add(doc_id)
            batch.append(dict(
                pixels=pixels, doc_id=doc_id, caption=clean_text(caption, f"the caption of {printable(path)}"),
                tags=tags_arg(tags(path)) if tags else (), metadata=dict(metadata(path)) if metadata else {},
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


def _bomb_warning() -> type[Warning]:
    from PIL import Image

    return Image.DecompressionBombWarning
