"""Matplotlib (Agg) helpers for PNG figures (training curves, the benchmark's plots): lazy import, atomic writes.

A neutral module: the library (`kira.adapt`) and the benchmark package (`kira.eval`) both draw with it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend. Raises ImportError naming the `demo` extra."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover
        raise ImportError("figures need matplotlib: pip install 'kira[demo]'") from exc
    return plt


def atomic_savefig(fig: Any, path: str | os.PathLike[str], dpi: int = 110) -> Path:
    """Save `fig` as PNG to a temp file beside `path`, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi, format="png")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
