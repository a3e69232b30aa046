"""What makes an input unusable as an image: the size limits, and the error every image reader raises.

Below kira.images and kira.images_dicom, which both read and check images.
"""

from __future__ import annotations

MAX_PIXELS = 64_000_000  # ~ 8000 x 8000; larger inputs are refused, not decoded
MAX_SIDE = 20_000
MIN_SIDE = 1


class ImageError(ValueError):
    """An input that cannot be used as an image; the message says why and what to do."""


def check_size(w: int, h: int, max_pixels: int, what: str) -> None:
    """ImageError when a `w` x `h` image (`what`, for the message) is empty or over the side or pixel limits."""
    if w < MIN_SIDE or h < MIN_SIDE:
        raise ImageError(f"{what} is empty ({w}x{h} pixels)")
    if w > MAX_SIDE or h > MAX_SIDE:
        raise ImageError(f"{what} is {w}x{h} pixels: {max(w, h):,} on a side, over the limit of {MAX_SIDE:,} per "
                         "side; crop or downscale it first")
    if w * h > max_pixels:
        raise ImageError(f"{what} is {w}x{h} = {w * h:,} pixels, over the limit of {max_pixels:,}; downscale it "
                         "first or raise max_pixels")


__all__ = ["MAX_PIXELS", "MAX_SIDE", "MIN_SIDE", "ImageError", "check_size"]
