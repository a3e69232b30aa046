"""Uploaded images (multipart bytes or base64 in JSON) -> uint8 RGB arrays, within the service's limits.

An upload's file name is never used: the bytes are decoded in memory and nothing is written.
"""

from __future__ import annotations

import base64
import binascii
import io

import numpy as np

from kira.images import ImageError, load_image, plain_error
from kira.serve.errors import ApiError


def decode_base64(text: str, field: str, max_bytes: int) -> bytes:
    """The bytes of a base64 string (a ``data:image/...;base64,`` prefix is allowed).

    Raises ApiError 413 when they would exceed `max_bytes`, 422 when `text` is not base64.
    """
    if text.startswith("data:"):
        text = text.partition(",")[2]
    if len(text) * 3 // 4 > max_bytes:
        raise ApiError(413, "upload_too_large", f"{field} decodes to more than {max_bytes:,} bytes",
                       "send a smaller image, or start the server with a larger --max-upload-mb")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ApiError(422, "bad_base64", f"{field} is not valid base64 ({exc})",
                       f"encode the image file's bytes with standard base64 (RFC 4648) into {field}") from None


def decode_image(data: bytes, field: str, max_pixels: int, *, max_side: int | None = None) -> np.ndarray:
    """Decode image file bytes (any format Pillow reads) to uint8 RGB (h, w, 3).

    The header is checked against `max_pixels` before any pixel is decoded, so decoding holds at most
    about 4 bytes per allowed pixel. `max_side` (a query image): downscaled on decode so that neither side
    exceeds it (JPEG is decoded at a reduced scale, other formats are reduced right after decoding), so the
    pipeline never works on the full-size pixels. Raises ApiError 413 for an image over the limit, 422 for
    bytes that are not an image (the message never shows Python object reprs).
    """
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise ApiError(422, "bad_image", f"{field} is empty", f"send the bytes of a PNG, JPEG or other image file in {field}")
    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
            if w * h > max_pixels:
                raise ApiError(413, "image_too_large", f"{field} is {w}x{h} = {w * h:,} pixels, over this server's "
                               f"limit of {max_pixels:,}", "downscale the image first, or start the server with a "
                               "larger --max-pixels")
            if max_side is not None and max(w, h) > max_side and im.mode not in _KEEP_DEPTH:
                im.thumbnail((max_side, max_side), reducing_gap=2.0)  # draft (JPEG) or reduce, then a good resize
            return load_image(im, max_pixels=max_pixels)
    except ApiError:
        raise
    except ImageError as exc:
        raise ApiError(422, "bad_image", f"{field}: {exc}", "send a readable PNG, JPEG or other image file") from None
    except UnidentifiedImageError:
        raise ApiError(422, "bad_image", f"{field} is not an image file Pillow can read",
                       "send the bytes of a PNG, JPEG, WebP, TIFF or other image file") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ApiError(422, "bad_image", f"{field} is not a readable image ({type(exc).__name__}: "
                       f"{plain_error(exc)})", "send the bytes of a PNG, JPEG or other image file Pillow can read") \
            from None


_KEEP_DEPTH = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")  # rescaled from their own range by load_image: not here
