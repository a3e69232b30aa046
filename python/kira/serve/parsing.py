"""Request bodies as JSON or multipart form, validated by the same pydantic model.

Multipart: the image is the file field ``image``; list fields are repeated fields or
comma-separated text; object fields (``metadata``, ``filters``) are JSON text. The
upload's file name is ignored.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kira.serve.errors import ApiError, validation_error
from kira.serve.images import decode_base64

M = TypeVar("M", bound=BaseModel)
LIST_FIELDS = frozenset({"levels", "tags", "vector", "doc_ids"})
OBJECT_FIELDS = frozenset({"metadata", "filters"})


async def parse(request: Any, model: type[M], max_bytes: int) -> tuple[M, bytes | None]:
    """(the validated request, the image file's bytes or None) from a JSON or multipart body.

    Raises ApiError: 415 for another content type, 422 for bad JSON, bad base64 or a field
    the model refuses, 413 for an image over `max_bytes`.
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype in ("application/json", ""):
        raw = await request.body()
        data = load_json(raw or b"{}", "the body", "send a JSON object with Content-Type: application/json")
        if not isinstance(data, dict):
            raise ApiError(422, "bad_json", f"the body is JSON {type(data).__name__}, not an object",
                           "send a JSON object such as {\"question\": \"...\"}")
        image = None
    elif ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        data, image = await _form(request)
    else:
        raise ApiError(415, "unsupported_media_type", f"Content-Type {ctype!r} is not accepted",
                       "send application/json (image as image_base64) or multipart/form-data (image as a file field)")
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(list(exc.errors())) from None
    encoded = getattr(parsed, "image_base64", None)
    if encoded:
        if image is not None:
            raise ApiError(422, "two_images", "the request has both an image file and image_base64",
                           "send the image one way only")
        image = decode_base64(encoded, "image_base64", max_bytes)
    return parsed, image


async def _form(request: Any) -> tuple[dict[str, Any], bytes | None]:
    from starlette.datastructures import UploadFile

    form = await request.form()
    data: dict[str, Any] = {}
    image: bytes | None = None
    try:  # the form's files are closed whatever is refused
        for key in set(form.keys()):
            values = form.getlist(key)
            if key == "image":
                upload = values[0]
                if not isinstance(upload, UploadFile):
                    raise ApiError(422, "bad_image", "the image field is text, not a file",
                                   "send the image as a file part (curl -F image=@photo.png)")
                image = await upload.read()
                continue
            texts = [v for v in values if isinstance(v, str)]
            if len(texts) != len(values):
                raise ApiError(422, "unexpected_file", f"field {key!r} is a file", f"send {key!r} as a text field")
            if key in LIST_FIELDS:
                items = [part.strip() for text in texts for part in text.split(",") if part.strip()]
                data[key] = [float(x) if key == "vector" and _is_number(x) else x for x in items]
            elif key in OBJECT_FIELDS:
                data[key] = load_json(texts[0], f"form field {key!r}",
                                      f"send {key!r} as a JSON object, e.g. {{\"site\": \"a\"}}")
            else:
                data[key] = texts[0]
    finally:
        await form.close()
    return data, image


MAX_JSON_DEPTH = 32  # nesting levels of arrays / objects a request body may have (metadata: 16, kira's limit)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (JSON has no NaN or infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a 64-bit float")
    return value


def load_json(raw: bytes | str, what: str, fix: str) -> Any:
    """Parse strict JSON: NaN, Infinity and numbers that overflow to infinity are refused, and so is nesting
    deeper than MAX_JSON_DEPTH (before it can exhaust the interpreter's recursion). ApiError 422 `bad_json`
    or `too_deep` naming the limit."""
    if _depth_over(raw, MAX_JSON_DEPTH):
        raise ApiError(422, "too_deep", f"{what} nests arrays or objects more than {MAX_JSON_DEPTH} levels deep",
                       f"flatten it to at most {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(422, "bad_json", f"{what} is not valid JSON ({exc})", fix) from None


_TOKENS = re.compile(r'\\.|["\[\]{}]', re.S)  # an escape (skipped whole), a quote, a bracket


def _depth_over(raw: bytes | str, limit: int) -> bool:
    """Whether the brackets outside strings nest deeper than `limit` (one regex pass over quotes, escapes and
    brackets; only bodies with more opening brackets than `limit` are scanned)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, in_string = 0, False
    for match in _TOKENS.finditer(text):
        token = match.group()
        if in_string:
            in_string = token != '"'
        elif token == '"':
            in_string = True
        elif token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
