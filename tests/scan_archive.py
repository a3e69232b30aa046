"""Real scans for tests: pydicom's test files (CT, MR, ultrasound, nuclear medicine) captioned in an imaging
archive's style, every caption saying 'scan' (a knowledge base whose records share a domain)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

SCANS = {  # pydicom test file: caption (the overlay and the bone scan say so in their own DICOM headers)
    "CT_small.dcm": "CT scan: axial slice, soft tissue window",
    "693_J2KI.dcm": "CT scan: axial slice, plain study",
    "MR_small.dcm": "MR scan: axial slice",
    "examples_overlay.dcm": "MR scan: abdomen, a marked lesion in the liver",
    "JPEG2000.dcm": "Nuclear medicine scan: whole body bone scan",
    "examples_rgb_color.dcm": "Ultrasound scan: colour image",
    "examples_palette.dcm": "Ultrasound scan: palette colour image",
}


def scan_id(file: str) -> str:
    """The doc id `scan_archive` gives the scan of pydicom test file `file` (scan_00, scan_01 ...)."""
    return f"scan_{list(SCANS).index(file):02d}"


def scan_rgb(file: str) -> np.ndarray:
    """pydicom test file `file` as (h, w, 3) uint8, windowed as a viewer shows it (0.5-99.5 percentiles)."""
    import pydicom
    from pydicom.data import get_testdata_file

    pixels = pydicom.dcmread(get_testdata_file(file)).pixel_array
    pixels = pixels[0] if pixels.ndim == 3 and pixels.shape[-1] not in (3, 4) else pixels
    a = pixels.astype(np.float64)
    lo, hi = np.percentile(a, (0.5, 99.5))
    a = np.clip((a - lo) / max(hi - lo, 1e-9) * 255, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(np.repeat(a[:, :, None], 3, 2) if a.ndim == 2 else a[:, :, :3])


def scan_archive(path: Path, create: Callable[..., Any] | None = None) -> Any:
    """A committed knowledge base at `path` holding every scan of `SCANS` under `scan_id`, with its caption;
    `create(path)` makes it (default `KnowledgeBase.create`)."""
    if create is None:
        from kira.knowledge_base import KnowledgeBase

        create = KnowledgeBase.create
    kb = create(path)
    for file, caption in SCANS.items():
        kb.add_image(scan_rgb(file), doc_id=scan_id(file), caption=caption)
    kb.commit()
    return kb
