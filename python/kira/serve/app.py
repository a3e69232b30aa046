"""`create_app`: the FastAPI application over one knowledge base."""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from kira.serve.config import CONFIG_ENV, ServeConfig
from kira.serve.errors import ApiError, install_handlers
from kira.serve.pool import Overloaded
from kira.serve.service import Service

log = logging.getLogger(__name__)


def build_app(config: ServeConfig, models: Any = None) -> Any:
    """The FastAPI app for `config` (see `kira.serve.create_app`)."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from kira.serve import routes
    from kira.serve.auth import BearerAuthMiddleware
    from kira.serve.limits import BodyLimitMiddleware
    from kira.serve.metrics import MetricsMiddleware
    from kira.serve.schemas import AddDocumentRequest, AskRequest, SearchRequest

    key = config.api_key()  # fails now, not at the first request, when the variable is unset
    service = Service(config, models)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        await asyncio.to_thread(service.start)
        try:
            yield
        finally:
            if service.remote is not None:
                await service.remote.aclose()
            await asyncio.to_thread(service.stop)

    app = FastAPI(title="kira", summary="grounded retrieval and reasoning over images", lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    app.state.service = service
    from kira.serve.docs_ui import add_docs

    add_docs(app)  # /docs and /redoc with their assets served here (offline), not from a CDN
    if config.role in ("all", "reader"):
        app.include_router(routes.query)
    app.include_router(routes.documents)
    app.include_router(routes.ops)
    install_handlers(app)

    async def on_overloaded(request: Any, exc: Overloaded) -> JSONResponse:
        from kira.serve.errors import error_body

        return JSONResponse(error_body("overloaded", str(exc), f"retry after {exc.retry_after} s, or add workers "
                                       "(--workers) or reader threads"), status_code=503,
                            headers={"Retry-After": str(exc.retry_after)})

    async def on_value_error(request: Any, exc: ValueError) -> JSONResponse:
        err = ApiError(422, "bad_request", str(exc), "the message says what to change")
        return JSONResponse(err.body(), status_code=422)

    # Starlette types a handler's exception as Exception; it calls each with the class it is registered for
    app.add_exception_handler(Overloaded, on_overloaded)  # type: ignore[arg-type]
    app.add_exception_handler(ValueError, on_value_error)  # type: ignore[arg-type]

    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        # the routes read JSON or multipart themselves; publish the models their bodies follow
        if app.openapi_schema is None:
            schema = default_openapi()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in (AskRequest, SearchRequest, AddDocumentRequest):
                found = model.model_json_schema(ref_template="#/components/schemas/{model}")
                components.update(found.pop("$defs", {}))
                components[model.__name__] = found
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    # middleware: the last added is the outermost; metrics see every response, auth runs before any body is read
    app.add_middleware(BodyLimitMiddleware, limit=config.max_upload_bytes)
    if key is not None:
        app.add_middleware(BearerAuthMiddleware, key=key)
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins), allow_methods=["*"],
                           allow_headers=["*"])
    app.add_middleware(MetricsMiddleware, metrics=service.metrics)
    return app


def app_from_env() -> Any:
    """The app factory `kira serve --workers N` gives uvicorn: the config comes from $KIRA_SERVE_CONFIG."""
    text = os.environ.get(CONFIG_ENV)
    if not text:
        raise RuntimeError(f"{CONFIG_ENV} is not set; start the service with `kira serve`")
    return build_app(ServeConfig.from_json(text))
