"""Real photos for tests: scikit-image's sample images as RGB arrays, and a knowledge base of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

CAPTIONS = {  # a one-line caption a user might attach to each sample photo
    "astronaut": "portrait of an astronaut in a white spacesuit in front of the flag",
    "brick": "a brick wall texture",
    "camera": "black and white photo of a man with a camera on a tripod",
    "cell": "microscope image of a single cell",
    "clock": "a wall clock photographed at an angle",
    "coffee": "a cup of coffee on a saucer with a spoon",
    "coins": "old coins lying on a table",
    "grass": "a close-up texture of grass",
    "gravel": "a close-up texture of gravel stones",
    "microaneurysms": "a small greyscale fundus detail with dark spots",
    "moon": "the surface of the moon with craters",
    "retina": "a colour photograph of the back of the eye",
    "rocket": "a rocket on the launch pad before lift-off",
}


def skimage_rgb(name: str) -> np.ndarray:
    """scikit-image's sample image `name` (skimage.data) as a contiguous (h, w, 3) uint8 array."""
    from skimage import data

    image = np.asarray(getattr(data, name)())
    return np.ascontiguousarray(np.repeat(image[:, :, None], 3, 2) if image.ndim == 2 else image[:, :, :3])


def captioned_kb(path: Path, captions: Mapping[str, str | None], **options: Any):
    """A committed `KnowledgeBase` at `path` holding each named sample image under its name, with its caption
    (None: uncaptioned); `options` go to `KnowledgeBase.create`."""
    from kira.knowledge_base import KnowledgeBase

    kb = KnowledgeBase.create(path, **options)
    for name, caption in captions.items():
        kb.add_image(skimage_rgb(name), doc_id=name, caption=caption)
    kb.commit()
    return kb
