"""Where a Milvus-backed knowledge base lives: a Milvus Lite file in a local directory, or a collection at a uri.

Without a uri, `name` is a local directory and the knowledge base is the Milvus Lite file
``<name>/milvus.db`` in it. With a uri (``http://host:19530``, Zilliz Cloud, or another ``.db``
file), `name` is the knowledge base's collection name and nothing is kept in a local file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

LITE_FILE = "milvus.db"  # the Milvus Lite file of a knowledge base kept in a local directory
LOCAL_COLLECTION = "kira"


def collection_name(name: str) -> str:
    """A Milvus collection name for knowledge base `name`: letters, digits and '_' (others become '_')."""
    slug = re.sub(r"[^A-Za-z0-9_]", "_", str(name))
    if not slug or not (slug[0].isalpha() or slug[0] == "_"):
        slug = f"kb_{slug}"
    return slug[:200]


def target(path_or_name: str | os.PathLike[str], uri: str | None) -> tuple[str, str, Path | None]:
    """(uri, collection, local directory or None) of a Milvus-backed knowledge base (module docstring)."""
    if uri is None:
        path = Path(path_or_name)
        return str(path / LITE_FILE), LOCAL_COLLECTION, path
    return str(uri), collection_name(Path(os.fspath(path_or_name)).name or os.fspath(path_or_name)), None
