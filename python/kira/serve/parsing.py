"""Request bodies as JSON or multipart form, validated by the same pydantic model.

Multipart: the image is the file field ``image``; list fields are repeated fields or
comma-separated text; object fields (``metadata``, ``filters``) are JSON text. The
upload's file name is ignored.
"""

from __future__ import annotations

import json
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
        try:
            data = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(422, "bad_json", f"the body is not valid JSON ({exc})",
                           "send a JSON object with Content-Type: application/json") from None
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
            try:
                data[key] = json.loads(texts[0])
            except ValueError as exc:
                raise ApiError(422, "bad_json", f"form field {key!r} is not valid JSON ({exc})",
                               f"send {key!r} as a JSON object, e.g. {{\"site\": \"a\"}}") from None
        else:
            data[key] = texts[0]
    await form.close()
    return data, image


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
