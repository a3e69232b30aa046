"""The oldest Milvus server kira's schema runs on, and the check `connect` makes against a server's version.

Milvus Lite ships with kira's pinned client and always passes; a server older than kira needs is
refused at open with `ServerTooOld`, naming the version it needs and why, before anything is written.
"""

from __future__ import annotations

import logging
import re
from typing import Any

log = logging.getLogger(__name__)

MIN_SERVER = (2, 5, 0)
"""The oldest Milvus server kira's schema runs on: its BM25 function (full-text search over the
descriptions, `enable_analyzer`) came with Milvus 2.5.0."""
MIN_SERVER_WITHOUT_BM25 = (2, 4, 0)
"""With ``MilvusConfig(bm25=False)``: two vector fields in one collection (visual, text) came with 2.4.0;
2.3 refuses the schema ("multiple vector fields is not supported")."""


class ServerTooOld(ValueError):
    """The Milvus server at a uri is older than kira's schema needs (the message names the version)."""


def _version_tuple(text: str) -> tuple[int, int, int] | None:
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return (int(found[1]), int(found[2]), int(found[3] or 0)) if found else None


def check_server(client: Any, uri: str, minimum: tuple[int, int, int] = MIN_SERVER) -> str:
    """The server's version string, after checking it is at least `minimum`. Milvus Lite (any version: it
    ships with kira's pinned client) passes. Raises ServerTooOld naming the version needed and why; a
    version string kira cannot read is logged and let through (the schema check at create still speaks)."""
    version = str(client.get_server_version())
    if version.startswith("milvus_lite"):
        return version
    have = _version_tuple(version)
    if have is None:
        log.warning("Milvus at %s reports version %r, which kira cannot read; it needs %s or newer", uri, version,
                    ".".join(map(str, minimum)))
        return version
    if have < tuple(minimum):
        why = ("its BM25 function for full-text search over descriptions" if tuple(minimum) >= (2, 5, 0)
               else "two vector fields (visual, text) in one collection")
        raise ServerTooOld(f"Milvus at {uri!r} is version {version}; kira needs Milvus {minimum[0]}.{minimum[1]} or newer "
                           f"({why}). Upgrade the server, or use Milvus Lite (a uri ending in .db)")
    return version


__all__ = ["MIN_SERVER", "MIN_SERVER_WITHOUT_BM25", "ServerTooOld", "check_server"]
