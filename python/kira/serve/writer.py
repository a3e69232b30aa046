"""The one writer: a writable `KnowledgeBase` on its own thread, in this process or behind a unix socket.

Writes (add, remove, commit) run one at a time on the writer's thread. Readers see them
after POST /commit, on their next request or idle refresh. With ``kira serve --workers N``
the writer is a separate process serving the write routes on a private unix socket, and
each worker forwards those routes to it (`RemoteWriter`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from kira.serve.errors import ApiError

log = logging.getLogger(__name__)


class Writer:
    """The writable knowledge base (opened on the writer thread; see `kira.serve.pool`)."""

    def __init__(self, kb_path: str, models: Any) -> None:
        from kira.knowledge_base import KnowledgeBase

        self.kb = KnowledgeBase.open(kb_path, models=models, read_only=False)

    def close(self) -> None:
        """Commit what is pending and release the writer lock (graceful shutdown)."""
        self.kb.close()

    def add(self, pixels: np.ndarray, doc_id: str, caption: str | None, tags: list[str], metadata: dict[str, Any],
            sequence: Any, view: Any, commit: bool) -> dict[str, Any]:
        """Add one image; ApiError 409 when the doc id is taken."""
        if self.kb.documents([doc_id]):
            raise ApiError(409, "duplicate_document", f"document {doc_id!r} is already in the knowledge base",
                           "pick another doc_id, or DELETE /documents/{doc_id} first")
        self.kb.add_image(pixels, doc_id=doc_id, caption=caption, tags=tags, metadata=metadata, sequence=sequence,
                          view=view)
        generation = self.kb.commit() if commit else None
        return {"doc_id": doc_id, "committed": commit, "generation": generation}

    def remove(self, doc_id: str, commit: bool) -> dict[str, Any]:
        """Remove one document; ApiError 404 for an unknown id."""
        if not self.kb.documents([doc_id]):
            raise ApiError(404, "unknown_document", f"no document {doc_id!r} in the knowledge base",
                           "check the id; GET /documents/{doc_id} shows whether a document exists")
        self.kb.remove(doc_id)
        generation = self.kb.commit() if commit else None
        return {"doc_id": doc_id, "committed": commit, "generation": generation}

    def commit(self) -> dict[str, Any]:
        """Make every pending change durable and visible to readers; returns the new generation."""
        return {"generation": int(self.kb.commit())}


class RemoteWriter:
    """Forwards write requests to the writer process's unix socket, as they came."""

    def __init__(self, uds: str) -> None:
        import httpx

        self._client = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=uds), base_url="http://writer",
                                         timeout=httpx.Timeout(300.0, connect=5.0))

    async def forward(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> Any:
        """The writer's response (status, body, headers) to the same request; ApiError 503 when it is unreachable."""
        import httpx

        keep = {k: v for k, v in headers.items() if k.lower() in ("content-type",)}
        url = path + (f"?{query}" if query else "")
        try:
            return await self._client.request(method, url, headers=keep, content=body)
        except httpx.TransportError as exc:
            raise ApiError(503, "writer_unavailable", f"the writer process did not answer ({type(exc).__name__})",
                           "retry shortly; if it persists, restart `kira serve`", headers={"Retry-After": "5"}) from None

    async def pid(self) -> int | None:
        """The writer process's id from its /health, or None when it does not answer within 2 s."""
        import httpx

        try:
            answer = await self._client.get("/health", timeout=2.0)
            return int(answer.json()["pid"]) if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None

    async def aclose(self) -> None:
        await self._client.aclose()
