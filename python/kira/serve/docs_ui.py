"""/docs (Swagger UI) and /redoc served from this process: no CDN, so they work offline.

Their JavaScript, CSS and icon come from the `fastapi-offline` package (in the serve extra),
which ships Swagger UI's and ReDoc's release bundles; this module uses its files only.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from starlette.requests import Request

log = logging.getLogger(__name__)

ASSETS_PATH = "/docs-assets"  # where the bundles are served, under the app's root path
ASSET_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def assets_dir() -> Path:
    """The directory holding Swagger UI's and ReDoc's bundles. Raises ImportError naming the serve extra
    when `fastapi-offline` is not installed, or when a file is missing from it."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError('kira serve needs fastapi-offline for /docs and /redoc offline: pip install "kira[serve]"',
                          name="fastapi_offline")
    folder = Path(list(spec.submodule_search_locations)[0]) / "static"
    missing = [name for name in ASSET_FILES if not (folder / name).is_file()]
    if missing:
        raise ImportError(f"fastapi-offline at {folder} lacks {missing}; reinstall it: pip install --force-reinstall "
                          "fastapi-offline", name="fastapi_offline")
    return folder


def add_docs(app: Any) -> None:
    """Add GET /docs, GET /redoc and the assets they load (all relative to the app's root path, so they
    also work when the app is mounted inside another). The app must be built with docs_url=None and
    redoc_url=None."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    app.mount(ASSETS_PATH, StaticFiles(directory=assets_dir()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> Any:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=root + app.openapi_url, title=f"{app.title} - Swagger UI",
                                   swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
                                   swagger_ui_parameters={"validatorUrl": None})  # no badge from a remote validator

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> Any:
        root = request.scope.get("root_path", "")
        return get_redoc_html(openapi_url=root + app.openapi_url, title=f"{app.title} - ReDoc",
                              redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png", with_google_fonts=False)
