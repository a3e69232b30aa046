"""Which files an ingest reads, and under which document ids.

A folder is walked recursively (sorted); files with an image suffix are kept (DICOM's `.dcm` /
`.dicom` too when pydicom is installed; without it such a file is listed as skipped with the
command that installs it). Broken links, FIFOs, devices, sockets, file names that are not UTF-8
and links leading out of the folder (unless followed) are listed as skipped with the reason.
Both the local ingest (kira.knowledge_base.ingest) and the Ray job (kira.ray_ingest.sources)
name files through `relative_doc_ids`.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Iterable, Sequence

PIXEL_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})
DICOM_SUFFIXES = frozenset({".dcm", ".dicom"})


def dicom_readable() -> bool:
    """Whether pydicom is installed (DICOM files can be read)."""
    return importlib.util.find_spec("pydicom") is not None


IMAGE_SUFFIXES = PIXEL_SUFFIXES | (DICOM_SUFFIXES if dicom_readable() else frozenset())
"""The suffixes a folder ingest reads: Pillow's formats, and DICOM where pydicom is installed."""


def printable(path: str | os.PathLike[str]) -> str:
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


def collect_entries(folder_or_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
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
    dicom = dicom_readable()
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
            suffix = path.suffix.lower()
            if suffix not in PIXEL_SUFFIXES | DICOM_SUFFIXES and not special and not (
                    path.is_symlink() and not path.exists()):
                continue
            reason = check_entry(path, root, follow_links)
            if reason is None and suffix in DICOM_SUFFIXES and not dicom:
                reason = 'a DICOM file, and reading DICOM needs pydicom: pip install "kira[dicom]"'

            (skipped.append((str(path), reason)) if reason else found.append(path))
    return found, skipped


def collect_paths(folder_or_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
                  follow_links: bool = False) -> list[Path]:
    """Image files under a folder (recursively, sorted), or the given paths as they are;
    see `collect_entries` for what is left out. Raises ValueError for a missing folder/path."""
    return collect_entries(folder_or_paths, follow_links=follow_links)[0]



def doc_ids(paths: list[Path], root: Path | None) -> list[str]:
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

