"""Bearer-token authentication: every route but /health needs ``Authorization: Bearer <key>``."""

from __future__ import annotations

import hmac
import json
from typing import Any

from kira.serve.errors import error_body

OPEN_PATHS = frozenset({"/health"})


class BearerAuthMiddleware:
    """ASGI middleware comparing the bearer token with `key` in constant time (hmac.compare_digest)."""

    def __init__(self, app: Any, key: str) -> None:
        self.app = app
        self._key = key.encode("utf-8")

    def _allowed(self, scope: dict[str, Any]) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key)
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps(error_body("unauthorized", "this route needs a valid bearer token",
                                     "send the header 'Authorization: Bearer <key>' with the key the server was "
                                     "started with (--api-key-env)")).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})
