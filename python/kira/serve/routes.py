"""The HTTP routes. Heavy work runs on the service's thread pools, never on the event loop."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from kira.serve.errors import ApiError
from kira.serve.parsing import parse
from kira.serve.schemas import (AddDocumentRequest, Added, AskRequest, AskResponse, Committed, DocumentOut, Health,
                                Ready, Removed, SearchRequest, SearchResponse)

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": text} for code, text in (
        (401, "missing or wrong bearer token"), (403, "the server is read-only"), (404, "unknown document"),
        (409, "the doc id is taken"), (413, "upload or image too large"), (415, "unsupported content type"),
        (422, "a field is invalid; the body names it and the fix"), (503, "over capacity; retry after Retry-After s"))
}


def _body(model: type) -> dict[str, Any]:
    """openapi_extra documenting a body given as JSON or as multipart form fields with an image file."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    form = {"allOf": [ref, {"type": "object", "properties": {"image": {"type": "string", "format": "binary"}}}]}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref},
                                                          "multipart/form-data": {"schema": form}}}}


async def _service(request: Request) -> Any:
    """The app's Service, started first if the app's lifespan did not run (an app mounted inside another)."""
    svc = request.app.state.service
    if not svc.started:
        await svc.ensure_started()
    return svc


def _levels(levels: list[str] | None) -> list[str] | None:
    if levels is None:
        return None
    try:
        from kira.reasoning.types import LEVELS
    except ImportError:  # pragma: no cover - the pipeline's level names, should they move
        LEVELS = ("document", "region", "patch", "passage")
    bad = sorted(set(levels) - set(LEVELS))
    if bad:
        raise ApiError(422, "unknown_level", f"unknown levels {bad}", f"use levels from {list(LEVELS)}")
    return list(levels)


def _decode(pixels_bytes: bytes | None, max_pixels: int, max_side: int | None = None) -> Any:
    """The uploaded image as pixels (None for none); `max_side`: a query image, downscaled on decode."""
    from kira.serve.images import decode_image

    if pixels_bytes is None:
        return None
    return decode_image(pixels_bytes, "image", max_pixels, max_side=max_side)


def _question(text: str | None, field: str) -> str | None:
    """The stripped question (None when empty); ApiError 422 `question_too_long` naming the limit."""
    from kira.knowledge_base.inputs import MAX_QUESTION_CHARS

    text = (text or "").strip()
    if len(text) > MAX_QUESTION_CHARS:
        raise ApiError(422, "question_too_long", f"{field} is {len(text):,} characters, over the limit of "
                       f"{MAX_QUESTION_CHARS:,}", f"shorten {field} to at most {MAX_QUESTION_CHARS:,} characters (a "
                       "question, not a document: add long text as a document's caption or passages)")
    return text or None


query = APIRouter(tags=["query"])
documents = APIRouter(tags=["documents"])
ops = APIRouter(tags=["operations"])


@query.post("/ask", response_model=AskResponse, responses=ERRORS, openapi_extra=_body(AskRequest))
async def ask(request: Request) -> Any:
    """Answer a question (text and/or image): the answer, its claims with citations and grounding, the evidence,
    per-stage timings, and the rationale card when `card` is json or html."""
    from kira.pipeline import VARIANTS

    svc = await _service(request)
    body, image = await parse(request, AskRequest, svc.config.max_upload_bytes)
    if body.variant not in VARIANTS:
        raise ApiError(422, "unknown_variant", f"unknown variant {body.variant!r}", f"use one of {list(VARIANTS)}")
    levels = _levels(body.levels)
    question = _question(body.question, "question")
    if question is None and image is None:
        raise ApiError(422, "empty_query", "the request has no question and no image",
                       "send a non-empty question, an image, or both")
    max_pixels, side = svc.config.max_pixels, svc.config.query_max_side

    def run(reader: Any) -> dict[str, Any]:
        return reader.ask(question, _decode(image, max_pixels, side), body.top_k, body.variant, levels, body.card,
                          generator=body.generator)

    result = await svc.readers.submit(run)
    svc.metrics.observe_stages("/ask", result["timings"])
    return JSONResponse(result)


@query.post("/search", response_model=SearchResponse, responses=ERRORS, openapi_extra=_body(SearchRequest))
async def search(request: Request) -> Any:
    """Retrieval only: chunks for a text, an image or a raw vector, with `top_k`, `levels` and metadata filters."""
    import numpy as np

    svc = await _service(request)
    body, image = await parse(request, SearchRequest, svc.config.max_upload_bytes)
    from kira.pipeline import VARIANTS

    if body.variant not in VARIANTS:
        raise ApiError(422, "unknown_variant", f"unknown variant {body.variant!r}", f"use one of {list(VARIANTS)}")
    levels = _levels(body.levels)
    if body.question is not None and body.text is not None:
        raise ApiError(422, "two_questions", "the request has both question and text (the same field's two names)",
                       "send the query text once, as question")
    text = _question(body.question if body.question is not None else body.text, "question")
    if text is None and image is None and body.vector is None:
        raise ApiError(422, "empty_query", "the request has no question, no image and no vector",
                       "send question (text), an image, or a vector")
    vector = np.asarray(body.vector, dtype=np.float32) if body.vector is not None else None
    max_pixels, side = svc.config.max_pixels, svc.config.query_max_side

    def run(reader: Any) -> dict[str, Any]:
        return reader.search(text, _decode(image, max_pixels, side), vector, body.space, body.top_k, levels, body.filters,
                             body.variant, per_document=body.per_document)

    result = await svc.readers.submit(run)
    svc.metrics.observe_stages("/search", result["timings"])
    return JSONResponse(result)


@documents.get("/thumbnails/{doc_id:path}", response_class=Response, responses={
    **ERRORS, 200: {"content": {"image/png": {}}, "description": "the stored thumbnail (PNG)"}})
async def get_thumbnail(doc_id: str, request: Request) -> Any:
    """The thumbnail the knowledge base stores for a document, as PNG (what the HTML card shows). Ids may
    contain '/' (folder ingest makes ``sub/name``): ``GET /thumbnails/sub/name``."""
    svc = await _service(request)
    if svc.readers is None:
        raise ApiError(404, "not_served", "this process serves writes only", "ask the main server")
    png = await svc.readers.submit(lambda reader: reader.thumbnail(doc_id))
    return Response(png, media_type="image/png")


@documents.get("/documents/{doc_id:path}", response_model=DocumentOut, responses=ERRORS)
async def get_document(doc_id: str, request: Request) -> Any:
    """A document's caption, tags, metadata and chunks (levels, boxes, descriptions). Ids may contain '/'."""
    svc = await _service(request)
    if svc.readers is None:
        raise ApiError(404, "not_served", "this process serves writes only", "ask the main server")
    return JSONResponse(await svc.readers.submit(lambda reader: reader.document(doc_id)))


async def _write(request: Request) -> Any:
    """None when this process runs the write itself; else the writer process's response, or a 403."""
    svc = await _service(request)
    if svc.config.read_only:
        raise ApiError(403, "read_only", "this server is read-only (--read-only)",
                       "send writes to a kira serve started without --read-only")
    if svc.remote is not None:
        answer = await svc.remote.forward(request.method, request.url.path, request.url.query,
                                          dict(request.headers), await request.body())
        keep = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "retry-after")}
        return Response(answer.content, status_code=answer.status_code, headers=keep)
    return None


def _commit_flag(request: Request) -> bool:
    value = request.query_params.get("commit", "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise ApiError(422, "bad_commit", f"commit={value!r} is not a boolean", "use commit=true or commit=false")
    return value in ("true", "1")


@documents.post("/documents", status_code=201, response_model=Added, responses=ERRORS,
                openapi_extra=_body(AddDocumentRequest))
async def add_document(request: Request) -> Any:
    """Add an image with its caption, tags, metadata, sequence and view; `?commit=true` commits at once
    (else POST /commit makes it durable and visible to readers)."""
    forwarded = await _write(request)
    if forwarded is not None:
        return forwarded
    import uuid

    svc = await _service(request)
    commit = _commit_flag(request)
    body: AddDocumentRequest  # _FormAdd for multipart
    if request.headers.get("content-type", "").startswith("multipart/"):
        # multipart carries the image as a file; the model still wants the field, so fill it after parsing
        body, image = await parse(request, _FormAdd, svc.config.max_upload_bytes)
        if image is None:
            raise ApiError(422, "missing_image", "the request has no image file", "send the image as the file field 'image'")
    else:
        body, image = await parse(request, AddDocumentRequest, svc.config.max_upload_bytes)
    from kira.knowledge_base.inputs import doc_id_arg, metadata_arg

    doc_id = body.doc_id.strip() if body.doc_id else f"doc-{uuid.uuid4().hex[:12]}"
    try:
        doc_id_arg(doc_id)  # the knowledge base's own check, before the image is decoded
    except ValueError as exc:
        raise ApiError(422, "bad_doc_id", str(exc), "use printable characters only ('/' is allowed)") from None
    try:
        metadata = metadata_arg(body.metadata)
    except (TypeError, ValueError) as exc:
        raise ApiError(422, "bad_metadata", str(exc), "send metadata as a JSON object of finite numbers, strings, "
                       "booleans, nulls, lists and objects") from None
    sequence = (body.sequence, body.sequence_position) if body.sequence and body.sequence_position is not None \
        else body.sequence
    view = (body.view, body.view_position) if body.view and body.view_position is not None else body.view
    max_pixels = svc.config.max_pixels

    def run(writer: Any) -> dict[str, Any]:
        return writer.add(_decode(image, max_pixels), doc_id, body.caption, list(body.tags), metadata,
                          sequence, view, commit)

    return JSONResponse(await svc.writer.submit(run), status_code=201)


class _FormAdd(AddDocumentRequest):
    image_base64: str | None = None  # type: ignore[assignment]  # multipart: the image is a file part


@documents.delete("/documents/{doc_id:path}", response_model=Removed, responses=ERRORS)
async def remove_document(doc_id: str, request: Request) -> Any:
    """Remove a document and its chunks; `?commit=true` commits at once."""
    forwarded = await _write(request)
    if forwarded is not None:
        return forwarded
    commit = _commit_flag(request)
    return JSONResponse(await (await _service(request)).writer.submit(lambda writer: writer.remove(doc_id, commit)))


@documents.post("/commit", response_model=Committed, responses=ERRORS)
async def commit(request: Request) -> Any:
    """Make every pending write durable and visible to the readers; returns the new generation."""
    forwarded = await _write(request)
    if forwarded is not None:
        return forwarded
    return JSONResponse(await (await _service(request)).writer.submit(lambda writer: writer.commit()))


@ops.get("/health", response_model=Health)
async def health(request: Request) -> Any:
    """Liveness (never needs the bearer token) and the knowledge base generation the readers last saw."""
    svc = request.app.state.service
    generation, count = svc.generation()
    return {"status": "ok", "generation": generation, "documents": count, "read_only": svc.config.read_only,
            "role": svc.config.role, "pid": svc.pid, "writer_pid": await svc.writer_pid()}


@ops.get("/ready", response_model=Ready, responses={503: {"description": "not ready yet"}})
async def ready(request: Request) -> Any:
    """200 once every thread has opened and warmed its view of the knowledge base (and, with --workers N on a
    writable service, while the writer process answers), else 503."""
    svc = request.app.state.service
    ok, detail = svc.is_ready()
    if ok and svc.remote is not None and await svc.writer_pid() is None:
        ok, detail = False, "the writer process is not answering (kira serve restarts it; writes get 503 meanwhile)"
    return JSONResponse({"ready": ok, "detail": detail}, status_code=200 if ok else 503,
                        headers=None if ok else {"Retry-After": "1"})


@ops.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus text format: requests and latency per route, time per pipeline stage."""
    svc = await _service(request)
    svc.metrics.generation.set(svc.generation()[0] or 0)
    body, ctype = svc.metrics.render()
    return Response(body, media_type=ctype)
