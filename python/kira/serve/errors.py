"""JSON errors: every refusal says what was wrong and how to fix it; never a traceback."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A request the service refuses: HTTP `status`, a short `code`, the problem and its fix."""

    def __init__(self, status: int, code: str, message: str, fix: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fix = fix
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.fix)


def error_body(code: str, message: str, fix: str) -> dict[str, Any]:
    """The JSON body of every error response: ``{"error": {"code", "message", "fix"}}``."""
    return {"error": {"code": code, "message": message, "fix": fix}}


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "form")]
    return ".".join(parts) or "body"


def validation_error(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """A 422 ApiError from pydantic's error list, naming each bad field."""
    problems = []
    fixes = []
    for err in errors[:5]:
        name = _field(tuple(err.get("loc", ())))
        problems.append(f"{name}: {err.get('msg', 'invalid')}")
        if err.get("type") == "missing":
            fixes.append(f"send {name}")
        elif err.get("type") == "extra_forbidden":
            fixes.append(f"remove {name} (see /docs for the fields this route takes)")
        else:
            fixes.append(f"send {name} as the schema in /docs says")
    return ApiError(422, "invalid_request", "; ".join(problems), "; ".join(dict.fromkeys(fixes)))


def install_handlers(app: Any) -> None:
    """Register handlers so that every error leaves as `error_body` JSON, with no traceback."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    async def on_api_error(request: Any, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    async def on_validation(request: Any, exc: RequestValidationError) -> JSONResponse:
        err = validation_error(list(exc.errors()))
        return JSONResponse(err.body(), status_code=err.status)

    async def on_http(request: Any, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            fix = "see /docs for the routes this service has"
        elif exc.status_code == 405:
            fix = f"{request.method} is not allowed on {request.url.path}; see /docs for its methods"
        else:
            fix = "see /docs"
        return JSONResponse(error_body("http_" + str(exc.status_code), str(exc.detail), fix),
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    async def on_unexpected(request: Any, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body("internal", f"the service failed on this request ({type(exc).__name__})",
                                       "this is a bug in kira serve: report it with the server log"), status_code=500)

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
