"""A fixed list of texts' vectors kept on disk between processes, so a one-shot command does not re-encode it.

The relevance judge compares a question with every name an image classifier can give (ImageNet's
1000 labels): 1.4 s of MiniLM on one core, paid again by every `kira ask` process, where the whole
rest of a first ask costs about 1 s. `cached_unit_vectors` keeps those vectors in the cache
directory the built ONNX graphs already use (``KIRA_CACHE_DIR``, else ``~/.cache/kira``), under
``vectors/<kind>-<key>.npy`` where the key hashes the encoder's identity (its built graph's file
name, which carries the weights' SHA-256) and the texts. A file is used only when its shape, dtype
and values are sound and two of its rows match a fresh encoding (within 1e-3, far above float
rounding, far below any change of model); anything else is re-encoded and rewritten atomically. An
encoder without a file identity (a test's fake, a remote one) is never cached. A cache directory
that cannot be written costs nothing but the cache.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from kira.atomic import write_atomic
from kira.models.loading import cache_dir

log = logging.getLogger(__name__)

SPOT_CHECK_ROWS = 2  # rows re-encoded to confirm a cached file belongs to this encoder
SPOT_CHECK_TOLERANCE = 1e-3  # largest difference a confirmed row may show


def encoder_identity(encoder: object) -> str | None:
    """A name that changes whenever the encoder's weights do: its built graph's file name; None without one."""
    path = getattr(encoder, "onnx_path", None)
    return Path(path).name if isinstance(path, (str, os.PathLike)) else None


def _unit(encoder: object, texts: Sequence[str]) -> np.ndarray:
    v = np.asarray(encoder.encode(list(texts)), dtype=np.float32)  # type: ignore[attr-defined]
    unit: np.ndarray = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return unit


def cache_path(encoder: object, texts: Sequence[str], kind: str) -> Path | None:
    """Where `texts`' vectors under `encoder` are kept; None when the encoder has no identity."""
    identity = encoder_identity(encoder)
    if identity is None:
        return None
    digest = hashlib.blake2b(digest_size=12)
    digest.update(identity.encode("utf-8"))
    for text in texts:
        digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
    return cache_dir() / "vectors" / f"{kind}-{digest.hexdigest()}.npy"


def _read(path: Path, encoder: object, texts: Sequence[str]) -> np.ndarray | None:
    try:
        with open(path, "rb") as fh:
            kept = np.load(fh, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        if path.exists():
            log.info("%s: unreadable (%s); encoding again", path, exc)
        return None
    if kept.dtype != np.float32 or kept.ndim != 2 or kept.shape[0] != len(texts) or not np.isfinite(kept).all():
        log.info("%s: shape %s %s does not fit %d texts; encoding again", path, kept.shape, kept.dtype, len(texts))
        return None
    rows = min(SPOT_CHECK_ROWS, len(texts))
    fresh = _unit(encoder, texts[:rows])
    if fresh.shape[1] != kept.shape[1] or float(np.abs(fresh - kept[:rows]).max()) > SPOT_CHECK_TOLERANCE:
        log.info("%s: does not match this encoder's vectors; encoding again", path)
        return None
    return kept


def cached_unit_vectors(encoder: object, texts: Sequence[str], *, kind: str) -> np.ndarray:
    """Unit float32 rows of `texts` under `encoder` (anything with ``encode(list[str]) -> (n, d)``), read from
    the cache when a sound file is there, else encoded and kept (module docstring). `kind` names the list in
    the file name ("labels")."""
    texts = list(texts)
    if not texts:
        return np.zeros((0, int(getattr(encoder, "dim", 0))), dtype=np.float32)
    path = cache_path(encoder, texts, kind)
    if path is None:
        return _unit(encoder, texts)
    kept = _read(path, encoder, texts)
    if kept is not None:
        return kept
    vectors = _unit(encoder, texts)
    buffer = io.BytesIO()
    np.save(buffer, vectors, allow_pickle=False)
    try:
        write_atomic(path, buffer.getvalue())
    except OSError as exc:
        log.debug("could not keep %s (%s): encoded again next process", path, exc)
    return vectors


__all__ = ["cache_dir", "cache_path", "cached_unit_vectors", "encoder_identity"]
