"""Request body limit (--max-upload-mb): refused with 413 from its Content-Length, or once that many bytes arrived."""

from __future__ import annotations

import json
from typing import Any

from kira.serve.errors import ApiError, error_body


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "upload_too_large", f"the request body is over this server's limit of {limit:,} bytes",
                    "send a smaller image (downscale or re-encode it), or start the server with a larger "
                    "--max-upload-mb")


class BodyLimitMiddleware:
    """ASGI middleware: a body over `limit` bytes gets 413 JSON and is never read whole."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.limit:
                    err = _too_large(self.limit)
                    body = json.dumps(error_body(err.code, err.message, err.fix)).encode()
                    await send({"type": "http.response.start", "status": 413,
                                "headers": [(b"content-type", b"application/json"),
                                            (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
                    await send({"type": "http.response.body", "body": body})
                    return
        seen = [0]

        async def counted() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > self.limit:
                    raise _too_large(self.limit)  # a streamed body: the route's handler turns it into 413 JSON
            return message

        await self.app(scope, counted, send)
