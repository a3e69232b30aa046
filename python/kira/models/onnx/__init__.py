"""kira's real models at query time: onnxruntime + numpy + tokenizers, never torch."""

from __future__ import annotations

from kira.models.onnx.blip2 import OnnxBlip2Captioner
from kira.models.onnx.dino import OnnxDinoRegionProposer
from kira.models.onnx.encoders import (
    OnnxClipImageEncoder,
    OnnxClipTextEncoder,
    OnnxCrossEncoder,
    OnnxSentenceEncoder,
)

__all__ = [
    "OnnxBlip2Captioner",
    "OnnxClipImageEncoder",
    "OnnxClipTextEncoder",
    "OnnxCrossEncoder",
    "OnnxDinoRegionProposer",
    "OnnxSentenceEncoder",
]
