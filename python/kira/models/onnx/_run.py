"""Running onnxruntime sessions: IO binding on CUDA, chunked batches that back off on OOM."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
import numpy as np

from kira.models.runtime import OnnxSession

logger = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"


def run(session: OnnxSession, feeds: dict[str, np.ndarray], outputs: list[str] | None = None) -> list[np.ndarray]:
    """Run `session` on numpy feeds and return numpy outputs.

    On CUDA the inputs and outputs go through an IO binding (one host->device copy per
    input, outputs allocated on the device and copied back once), not `session.run`'s
    per-call staging.
    """
    names = outputs or session.output_names
    if session.provider != CUDA:
        return session.session.run(names, feeds)
    binding = session.session.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, np.ascontiguousarray(value))
    for name in names:
        binding.bind_output(name, "cuda")
    session.session.run_with_iobinding(binding)
    return binding.copy_outputs_to_cpu()


def _is_oom(exc: Exception) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "failed to allocate" in text or "out of memory" in text


def chunks(n: int, batch_size: int) -> Iterator[slice]:
    """Slices of range(n), batch_size at a time."""
    for start in range(0, n, batch_size):
        yield slice(start, min(start + batch_size, n))


def run_chunked(fn: Callable[[slice], np.ndarray], n: int, batch_size: int) -> tuple[np.ndarray, int]:
    """Apply `fn` to slices of n items and concatenate; halve the batch on out-of-memory.

    Returns (the concatenated result, the batch size that worked), so the caller can
    keep the smaller size for its next call. Re-raises an OOM at batch size 1.
    """
    if n == 0:
        raise ValueError("nothing to run: the batch is empty")
    parts: list[np.ndarray] = []
    start = 0
    while start < n:
        stop = min(start + batch_size, n)
        try:
            parts.append(fn(slice(start, stop)))
        except Exception as exc:  # onnxruntime raises its own RuntimeException types
            if not _is_oom(exc) or stop - start == 1:
                raise
            batch_size = max(1, (stop - start) // 2)
            logger.warning("out of memory; retrying with batch size %d", batch_size)
            continue
        start = stop
    return np.concatenate(parts, axis=0), batch_size


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.maximum(norm, 1e-12), dtype=np.float32)
