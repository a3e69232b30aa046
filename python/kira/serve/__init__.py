"""kira serve: an HTTP service (FastAPI + uvicorn) over a knowledge base.

`create_app(kb_path, ...)` builds the ASGI app to mount in your own server; `kira serve KB`
runs it with uvicorn (see `kira.serve.cli` and docs/serve.md). Needs the `serve` extra:
``pip install "kira[serve]"``.
"""

from __future__ import annotations

import os
from typing import Any

from kira.serve.config import ServeConfig

__all__ = ["ServeConfig", "create_app"]


def _require() -> None:
    try:
        import fastapi  # noqa: F401
        import python_multipart  # noqa: F401  (for image uploads)
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401

        from kira.serve.docs_ui import assets_dir

        assets_dir()  # fastapi-offline: /docs and /redoc without a CDN
    except ImportError as exc:
        raise ImportError(f"kira serve needs the serve extra ({exc.name} is missing): "
                          'pip install "kira[serve]"') from exc


def create_app(kb_path: str | os.PathLike, *, models: Any = None, **options: Any) -> Any:
    """A FastAPI app serving the knowledge base at `kb_path`.

    Parameters
    ----------
    kb_path: a knowledge base directory (`kira ingest` builds one).
    models: a model stack to share (default: loaded at startup from ``options['models']``,
        a directory of exported models, else the embedded default stack).
    options: any `ServeConfig` field: read_only, api_key_env, max_upload_mb, max_pixels, query_max_side,
        threads, queue_size, queue_timeout_s, refresh_s, cors_origins.

    The knowledge base is opened when the app starts (its lifespan), on the service's own
    threads. Returns the app. Raises ValueError for a path that is not a knowledge base, an
    unknown option, or an api_key_env naming an unset variable; ImportError without the
    serve extra.
    """
    _require()
    from kira.serve.app import build_app

    fields = set(ServeConfig.__dataclass_fields__)
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; choose from {sorted(fields - {'kb_path'})}")
    if "cors_origins" in options:
        options["cors_origins"] = tuple(options["cors_origins"])
    model_stack = models if models is not None and not isinstance(models, (str, os.PathLike)) else None
    if isinstance(models, (str, os.PathLike)):
        options["models"] = str(models)
    return build_app(ServeConfig(kb_path=str(kb_path), **options), model_stack)
