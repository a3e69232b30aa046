"""A Milvus server that stops answering while kira writes: one clear error, nothing committed lost.

pymilvus reports a server that went away as a `MilvusException` ("Fail connecting to server ...
server unavailable") over a gRPC ``UNAVAILABLE`` error, or a deadline passed. `server_unavailable`
recognises these; `writing_to` turns them into a `MilvusUnavailable` (a ConnectionError) that says
what is kept and what to do: every commit before the failure is in Milvus (each one flushed its
rows and then bumped the generation), the batch in flight may be partly written, and ingesting
the same files again writes its chunks under the same ids (upserts), so it duplicates nothing
(chunks of a document whose record was not written are removed at the next open,
kira.knowledge_base.milvus.orphans).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

_SIGNS = ("server unavailable", "fail connecting to server", "connection refused", "failed to connect",
          "deadline exceeded", "statuscode.unavailable", "socket closed")


class MilvusUnavailable(ConnectionError):
    """The Milvus server at a knowledge base's uri stopped answering during a write (module docstring)."""


def server_unavailable(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) says the Milvus server cannot be reached or did not answer in time."""
    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, MilvusUnavailable):
            return True
        code = getattr(error, "code", None)
        status = code() if callable(code) and type(error).__module__.startswith("grpc") else None
        if status is not None and getattr(status, "name", "") in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            return True
        if type(error).__name__ in ("MilvusException", "MilvusUnavailableException"):
            text = str(error).lower()
            if any(sign in text for sign in _SIGNS):
                return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


@contextmanager
def writing_to(uri: str, name: str, generation: int, doing: str) -> Iterator[None]:
    """Run a write; where the server stopped answering, raise `MilvusUnavailable` naming the uri, the last
    committed generation (kept) and how to finish the work (module docstring)."""
    try:
        yield
    except MilvusUnavailable:
        raise
    except Exception as exc:
        if not server_unavailable(exc):
            raise
        raise MilvusUnavailable(
            f"the Milvus server at {uri!r} stopped answering while {doing} knowledge base {name!r}: everything "
            f"committed up to generation {generation} is kept there; what was sent since may be partly written. "
            "Start the server again, open the knowledge base and ingest the same files again: chunks are "
            "rewritten under the same ids, so nothing is duplicated") from exc


__all__ = ["MilvusUnavailable", "server_unavailable", "writing_to"]
