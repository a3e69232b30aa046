"""Turning whatever a user hands in (path, PIL image, array) into one pixel format.

Everything downstream sees `uint8` RGB arrays of shape (h, w, 3). Decompression bombs
and absurd sizes are refused before any pixel is decoded.

Depth: images with more than 8 bits (16-bit PNG/TIFF, 32-bit integer or float images,
integer arrays above 255) are *rescaled*, not windowed: their own darkest pixel becomes 0
and their brightest 255, linearly. DICOM files are the exception: they carry their own
display transform, so the modality LUT (rescale slope/intercept) and the VOI LUT (window
centre/width or a LUT table) are applied with pydicom and the window's range is mapped to
0..255. JPEGs and other files with an EXIF orientation are turned upright first.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Union

import numpy as np

from kira.image_limits import MAX_PIXELS, ImageError, check_size

ImageLike = Union[str, os.PathLike, np.ndarray, Any]  # Any: a PIL.Image.Image

logger = logging.getLogger(__name__)

def load_image(image: ImageLike, *, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """Return `image` as a C-contiguous uint8 RGB array of shape (h, w, 3).

    Accepts a path (any format Pillow reads, or DICOM: `.dcm` or the DICM preamble, which
    needs pydicom), a PIL image, or an array of shape (h, w), (h, w, 1), (h, w, 3) or (h, w, 4)
    of integers (0..255) or floats (0..1).
    Files are turned upright by their EXIF orientation (ImageOps.exif_transpose). Images
    deeper than 8 bits (16-bit PNG, integer arrays above 255) are rescaled linearly from
    their own min..max to 0..255; DICOM goes through its modality and VOI LUTs instead
    (the first frame of a multi-frame file).
    Raises ImageError (a ValueError) for unreadable, corrupt, empty, non-finite or
    oversized input, ImportError naming `pip install "kira[dicom]"` for DICOM without pydicom.
    """
    if isinstance(image, (str, os.PathLike)):
        return _load_path(Path(image), max_pixels)
    if isinstance(image, np.ndarray):
        return _from_array(image, max_pixels)
    if hasattr(image, "convert") and hasattr(image, "size"):  # PIL image
        w, h = image.size
        check_size(w, h, max_pixels, "image")
        try:
            return _from_pil(image, max_pixels)
        except (OSError, SyntaxError, ValueError) as exc:  # decoding a lazily loaded file fails here
            if isinstance(exc, ImageError):
                raise
            raise ImageError(f"cannot decode the image: {plain_error(exc)}") from exc
    raise ImageError(
        f"cannot use {type(image).__name__} as an image: pass a file path, a PIL image, "
        "or a numpy array of shape (h, w) or (h, w, 3)"
    )


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def plain_error(exc: BaseException) -> str:
    """`exc`'s message for a person: Python object reprs (``<_io.BytesIO object at 0x...>``, which Pillow
    prints for in-memory files) become "the image"."""
    return _OBJECT_REPR.sub("the image", str(exc)) or type(exc).__name__


def _load_path(path: Path, max_pixels: int) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    if not path.exists():
        raise ImageError(f"no such image file: {path}")
    if path.is_dir():
        raise ImageError(f"{path} is a directory, not an image file; pass the files in it (or ingest the folder)")
    if not path.is_file():
        raise ImageError(f"{path} is not a regular file (a device, pipe or socket); pass an image file")
    if _is_dicom(path):
        from kira.images_dicom import load_dicom

        return _from_array(load_dicom(path, max_pixels=max_pixels), max_pixels)
    try:
        with _pillow_allows(max_pixels), Image.open(path) as im:
            w, h = im.size  # header only: nothing decoded yet
            check_size(w, h, max_pixels, str(path))
            if im.mode in ("RGB", "RGBA", "P", "L", "CMYK", "YCbCr", "1", "LA", "PA"):
                im.draft("RGB", (w, h))
            return _from_pil(im, max_pixels)
    except ImageError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"cannot read image {path}: {plain_error(exc)}") from exc
    except Image.DecompressionBombError as exc:  # pragma: no cover - caught by _check_size first
        raise ImageError(f"refused {path}: {exc}") from exc


_PILLOW_LIMIT = threading.Lock()


@contextmanager
def _pillow_allows(max_pixels: int) -> Any:
    """Let Pillow open images up to `max_pixels` when the caller raised kira's limit above Pillow's own.

    Pillow refuses images over twice its process-wide `Image.MAX_IMAGE_PIXELS` (~179M pixels) and
    warns above it, before kira reads the header. kira checks every header against `max_pixels`
    itself, right after Pillow parses it and before any pixel is decoded, so when a caller asks
    for more than Pillow's limit, Pillow's check is lifted for this one open and restored after;
    such opens are serialised by a lock (they are rare and huge). An application's own None is kept.
    """
    from PIL import Image

    if Image.MAX_IMAGE_PIXELS is None or max_pixels <= Image.MAX_IMAGE_PIXELS:
        yield
        return
    with _PILLOW_LIMIT:
        saved = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = saved


def _is_dicom(path: Path) -> bool:
    """A DICOM file: `.dcm`/`.dicom`, or the 'DICM' magic after the 128-byte preamble."""
    if path.suffix.lower() in (".dcm", ".dicom"):
        return True
    with open(path, "rb") as f:
        head = f.read(132)
    return len(head) == 132 and head[128:] == b"DICM"


_HIGH_DEPTH_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")


def _from_pil(im: Any, max_pixels: int) -> np.ndarray:
    """A PIL image, upright by its EXIF orientation, as uint8 RGB; deeper than 8 bits: rescaled."""
    from PIL import ImageOps

    if im.getexif().get(0x0112, 1) not in (0, 1):  # turned by EXIF; exif_transpose would copy an upright one too
        im = ImageOps.exif_transpose(im)
    if im.mode in _HIGH_DEPTH_MODES:
        a = np.asarray(im)
        if im.mode == "F":
            if not np.isfinite(a).all():
                raise ImageError("image contains NaN or inf pixels; clean it before adding")
            return _from_array(_rescale_float(a), max_pixels)
        return _from_array(a.astype(np.int64), max_pixels)  # never wrap: above 255 or below 0 is rescaled or clipped
    # RGB already: no converted copy (a 64-megapixel image is 256 MB as Pillow holds it, 192 MB as an array)
    return np.ascontiguousarray(np.asarray(im if im.mode == "RGB" else im.convert("RGB"), dtype=np.uint8))


def _rescale_float(a: np.ndarray) -> np.ndarray:
    """Floats of any range -> uint8, their min..max mapped linearly to 0..255."""
    lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)
    if hi <= lo:
        return np.zeros(a.shape, np.uint8)
    return np.clip(np.rint((a.astype(np.float64) - lo) * (255.0 / (hi - lo))), 0, 255).astype(np.uint8)


def _from_array(a: np.ndarray, max_pixels: int) -> np.ndarray:
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)):
        raise ImageError(f"image array has shape {a.shape}; expected (h, w), (h, w, 3) or (h, w, 4)")
    check_size(a.shape[1], a.shape[0], max_pixels, "image array")
    if a.dtype == np.uint8:
        out = a
    elif np.issubdtype(a.dtype, np.floating):
        if not np.isfinite(a).all():
            raise ImageError("image array contains NaN or inf; clean it before adding")
        hi = float(a.max()) if a.size else 0.0
        scale = 255.0 if hi <= 1.0 else 1.0  # floats in 0..1, or already 0..255
        out = np.clip(np.rint(a * scale), 0, 255).astype(np.uint8)
    elif np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_:
        a = a.astype(np.int64)
        hi = int(a.max()) if a.size else 0
        if a.dtype != np.bool_ and hi > 255:  # e.g. 12/16-bit medical images: rescale to 8 bits
            lo = int(a.min())
            out = ((a - lo) * 255 // max(hi - lo, 1)).astype(np.uint8)
        else:
            out = np.clip(a * (255 if hi <= 1 else 1), 0, 255).astype(np.uint8)
    else:
        raise ImageError(f"image array has dtype {a.dtype}; use uint8, an integer or a float type")
    if out.ndim == 2:
        out = np.repeat(out[:, :, None], 3, axis=2)
    elif out.shape[2] == 4:
        out = out[:, :, :3]
    return np.ascontiguousarray(out)
