"""The files of an embedded knowledge base besides its database and index files.

    config.json      the KiraConfig it was built with
    profile.json     the user's DomainProfile (domain knowledge; empty by default)
    writer.lock      held by the one process that writes
    adapter/         the domain adapter, when one is set
    bridge.*         the fitted text->image bridge (default stack only)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kira.models.bridge import TextToImageBridge

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
PROFILE_FILE = "profile.json"  # the user's DomainProfile (kira.profile)
LOCK_FILE = "writer.lock"
ADAPTER_DIR = "adapter"
ADAPTER_FILE = "adapter.npz"


def read_config_text(path: Path) -> str:
    """The stored KiraConfig's JSON text, checked. Raises ValueError naming the file and the fix when it is
    missing (never replaced by the defaults in silence: the constants a knowledge base answers with are part
    of it) or is not a JSON object of config fields."""
    from kira.config import KiraConfig

    fix = (f"restore it from a backup, or delete it and run `kira check {path.parent} --repair` to write the "
           "default constants")
    if not path.is_file():
        raise ValueError(f"{path} is missing: the constants this knowledge base was built and answers with are "
                         f"unknown. Restore it from a backup, or run `kira check {path.parent} --repair` to write "
                         "the default constants")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); {fix}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object of config fields; {fix}")
    try:
        KiraConfig.from_dict(data)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise ValueError(f"{path} does not hold a kira configuration ({exc}); {fix}") from None
    return text


def take_lock(directory: Path) -> int | None:
    """Hold the writer lock of `directory` (its file descriptor; None where there are no advisory locks).
    ValueError when another process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory lock
        return None
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise ValueError(f"{directory} is open for writing in another process; open it with read_only=True to read"
                         ) from None
    return fd


def save_adapter(directory: Path, adapter: Any) -> None:
    """Store `adapter` (None: remove the stored one) in ``adapter/`` atomically (a new folder, then renamed)."""
    target = directory / ADAPTER_DIR
    if adapter is None:
        shutil.rmtree(target, ignore_errors=True)
        return
    tmp = directory / f"{ADAPTER_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    adapter.save(tmp / ADAPTER_FILE)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)


def load_adapter(directory: Path, name: str) -> Any:
    """The adapter stored under the registered class `name` ("" or None: none)."""
    if not name:
        return None
    from kira.knowledge_base.adapters import resolve_adapter

    return resolve_adapter(name).load(directory / ADAPTER_DIR / ADAPTER_FILE)


def check_archive(path: Path) -> None:
    """Raise zipfile.BadZipFile when `path` is a .npz archive that is damaged (each member's checksum is read),
    before numpy opens it: a damaged archive must mean a refit, not an error on every text ask."""
    if path.suffix != ".npz" or not path.is_file():
        return
    with open(path, "rb") as fh, zipfile.ZipFile(fh) as archive:
        bad = archive.testzip()
    if bad is not None:
        raise zipfile.BadZipFile(f"{path}: member {bad} is damaged")


def load_bridge(path: Path) -> TextToImageBridge | None:
    """The bridge saved at `path`, or None (logged) when it is unreadable."""
    from kira.models.bridge import TextToImageBridge

    try:
        check_archive(path)
        return TextToImageBridge.load(path)
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        log.warning("stored bridge is unreadable (%s); refitting", exc)
        return None


def save_bridge(directory: Path, bridge: Any) -> str:
    """Save `bridge` as ``bridge.npz`` (or what its ``save`` writes); returns the file's name."""
    path = directory / "bridge.npz"
    saved = bridge.save(path)
    saved_path = Path(saved) if isinstance(saved, (str, os.PathLike)) else path
    return saved_path.name if saved_path.exists() else path.name


__all__ = ["ADAPTER_DIR", "CONFIG_FILE", "LOCK_FILE", "PROFILE_FILE", "check_archive", "load_adapter", "load_bridge",
           "read_config_text", "save_adapter", "save_bridge", "take_lock"]
