"""Writing a file whole or not at all: the bytes go to a temporary file beside the target, are flushed to disk,
and replace the target in one rename. A crash leaves the old file or the new one, never half of either; what a
crash leaves behind is ``<name>.<random>.tmp`` beside it (a knowledge base's writer removes those at open)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` atomically (module docstring), creating its directory; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, sort_keys: bool = True,
                      allow_nan: bool = True) -> Path:
    """`data` as indented JSON, written atomically (allow_nan False: NaN is a ValueError); returns the path."""
    text = json.dumps(data, indent=2, sort_keys=sort_keys, allow_nan=allow_nan)
    return write_atomic(path, text.encode("utf-8"))


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """`text` as UTF-8, written atomically; returns the path."""
    return write_atomic(path, text.encode("utf-8"))
