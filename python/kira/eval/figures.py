"""The benchmark's figure helpers: `kira.figures` (kept here so `kira.eval` imports keep working)."""

from __future__ import annotations

from kira.figures import atomic_savefig, pyplot

__all__ = ["atomic_savefig", "pyplot"]
