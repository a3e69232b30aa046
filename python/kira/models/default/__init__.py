"""The embedded default models: deterministic, training-free, no model files."""

from __future__ import annotations

from kira.models.default.captioner import DefaultCaptioner
from kira.models.default.describer import Describer, ImageAttributes
from kira.models.default.pixel_encoder import PixelEncoder, PixelEncoderConfig
from kira.models.default.saliency import SaliencyConfig, SaliencyProposer

__all__ = [
    "DefaultCaptioner",
    "Describer",
    "ImageAttributes",
    "PixelEncoder",
    "PixelEncoderConfig",
    "SaliencyConfig",
    "SaliencyProposer",
]
