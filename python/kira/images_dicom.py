"""DICOM pixels for display and encoding: the modality LUT, then the VOI LUT, with pydicom.

A DICOM file stores raw detector values; what a reader sees is those values through the
modality LUT (RescaleSlope/RescaleIntercept or a Modality LUT Sequence: e.g. Hounsfield units
for CT) and then the VOI LUT (WindowCenter/WindowWidth, or a VOI LUT Sequence table). kira
applies both with pydicom's own functions, maps the VOI output range to 0..255 and inverts
MONOCHROME1 (where high values are dark). Without a VOI LUT the modality values are rescaled
from their min..max to 0..255.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from kira.image_limits import ImageError, check_size

logger = logging.getLogger(__name__)

DICOM_HINT = 'pip install "kira[dicom]"'


def _pydicom() -> tuple[Any, Any, Any]:
    try:
        import pydicom
    except ImportError as exc:
        raise ImportError(f"reading DICOM files needs pydicom: {DICOM_HINT}") from exc
    try:  # pydicom >= 3
        from pydicom.pixels import apply_modality_lut, apply_voi_lut
    except ImportError:  # pragma: no cover - pydicom 2.x
        from pydicom.pixel_data_handlers.util import apply_modality_lut, apply_voi_lut
    return pydicom, apply_modality_lut, apply_voi_lut


def voi_output_range(ds: Any) -> tuple[float, float]:
    """The (low, high) range pydicom's VOI LUT maps into for this dataset.

    A VOI LUT Sequence gives 0..2**bits-1 (bits from its LUTDescriptor); a window gives the
    range of the modality LUT's output (the stored range through slope and intercept).
    """
    voi = ds.get("VOILUTSequence")
    if voi:
        bits = int(voi[0].LUTDescriptor[2])
        return 0.0, float(2**bits - 1)
    mod = ds.get("ModalityLUTSequence")
    if mod:
        return 0.0, float(2 ** int(mod[0].LUTDescriptor[2]) - 1)
    bits = int(ds.BitsStored)
    if int(ds.get("PixelRepresentation", 0)) == 0:
        lo, hi = 0.0, float(2**bits - 1)
    else:
        lo, hi = float(-(2 ** (bits - 1))), float(2 ** (bits - 1) - 1)
    if ds.get("RescaleSlope") is not None and ds.get("RescaleIntercept") is not None:
        slope, intercept = float(ds.RescaleSlope), float(ds.RescaleIntercept)
        lo, hi = sorted((lo * slope + intercept, hi * slope + intercept))
    return lo, hi


def dicom_to_uint8(ds: Any) -> np.ndarray:
    """A pydicom Dataset's first frame as display pixels: uint8 (h, w) or (h, w, 3).

    Monochrome: modality LUT, VOI LUT (window or table; the first one listed), the VOI output
    range mapped linearly to 0..255, MONOCHROME1 inverted; no VOI LUT: min..max to 0..255.
    Colour (RGB, YBR converted by pydicom): rescaled from the stored bit depth.
    Raises ValueError when the pixel data cannot be decoded (the message names the missing
    decoder pydicom asked for).
    """
    _, apply_modality_lut, apply_voi_lut = _pydicom()
    try:
        arr = ds.pixel_array
    except Exception as exc:  # pydicom raises RuntimeError/NotImplementedError for missing decoders
        raise ValueError(f"cannot decode the DICOM pixel data: {exc}") from exc
    frames = int(ds.get("NumberOfFrames", 1) or 1)
    samples = int(ds.get("SamplesPerPixel", 1))
    if frames > 1:
        logger.info("DICOM with %d frames: using the first", frames)
        arr = arr[0]
    if samples > 1:
        bits = int(ds.get("BitsStored", 8))
        scaled = arr.astype(np.float64) * (255.0 / (2**bits - 1))
        return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)
    values = apply_modality_lut(arr, ds)
    has_voi = bool(ds.get("VOILUTSequence")) or ds.get("WindowCenter") is not None
    if has_voi:
        values = apply_voi_lut(values, ds, index=0).astype(np.float64)
        lo, hi = voi_output_range(ds)
    else:
        values = np.asarray(values, dtype=np.float64)
        lo, hi = float(values.min()), float(values.max())
    if hi <= lo:
        out = np.zeros(values.shape, np.uint8)
    else:
        out = np.clip(np.rint((values - lo) * (255.0 / (hi - lo))), 0, 255).astype(np.uint8)
    if str(ds.get("PhotometricInterpretation", "")).upper() == "MONOCHROME1":
        out = 255 - out
    return out


def load_dicom(path: str | os.PathLike, *, max_pixels: int | None = None) -> np.ndarray:
    """Read a DICOM file and return its display pixels (see dicom_to_uint8).

    Parameters: path; max_pixels (refuse larger images before decoding them, from Rows/Columns).
    Raises ImportError naming the `dicom` extra without pydicom, kira.images.ImageError for an
    unreadable, oversized or undecodable file.
    """
    pydicom, _, _ = _pydicom()
    path = Path(path)
    try:
        ds = pydicom.dcmread(str(path))
    except Exception as exc:  # InvalidDicomError, OSError, truncated files
        raise ImageError(f"cannot read DICOM file {path}: {exc}") from exc
    if "PixelData" not in ds:
        raise ImageError(f"DICOM file {path} has no pixel data (is it a report or structured document?)")
    if max_pixels is not None:
        check_size(int(ds.get("Columns", 0)), int(ds.get("Rows", 0)), max_pixels, str(path))
    try:
        return dicom_to_uint8(ds)
    except ValueError as exc:
        raise ImageError(f"{path}: {exc}") from exc
