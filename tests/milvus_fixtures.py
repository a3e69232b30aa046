"""Shared helpers for the Milvus backend tests: releasing a Milvus Lite file, rows and records to store.

A test that runs on both backends takes `kb_factory` (tests/conftest.py) instead."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np


def release_lite(uri: str | Path) -> None:
    """Stop the in-process Milvus Lite server pymilvus started for `uri` (threads and file lock)."""
    from milvus_lite import server_manager_instance

    server_manager_instance.release_server(str(uri))


@contextmanager
def served_lite(data_dir: Path) -> Iterator[str]:
    """A Milvus Lite server on 127.0.0.1 over `data_dir` (kira.knowledge_base.milvus.lite_server), as its own
    process: yields its uri, stops it after. A server that does not start fails the test, naming it."""
    import pytest

    from kira.knowledge_base.milvus.lite_server import serve_lite

    try:
        proc, uri = serve_lite(data_dir)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield uri
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def unit_rows(n: int, dim: int, seed: int = 0, clusters: int = 8) -> np.ndarray:
    """Seeded unit rows around `clusters` centres (low intrinsic dimension, as recall tests want)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    x = centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim))
    x = x.astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def records_for(n_docs: int, per_doc: int, visual: np.ndarray, text: np.ndarray, *, first_id: int = 1):
    """ChunkRecords: n_docs documents of per_doc chunks (one document chunk, then patches), ids from first_id."""
    from kira.knowledge_base.milvus.writes import ChunkRecord

    out, i = [], 0
    for d in range(n_docs):
        doc_chunk = first_id + i
        for j in range(per_doc):
            cid = first_id + i
            out.append(ChunkRecord(
                id=cid, doc_id=f"doc{d}", doc_chunk=doc_chunk, level="document" if j == 0 else "patch",
                parent=-1 if j == 0 else doc_chunk, box=None if j == 0 else (j, j, j + 8, j + 8),
                description=f"image {d} part {j} " + ("striped" if d % 2 else "round"),
                tags=("even",) if d % 2 == 0 else ("odd",), metadata={"site": d % 3, "name": f"d{d}"},
                groups={f"temporal:s{d % 4}": float(d)}, visual=visual[i], text=text[i]))
            i += 1
    return out
