"""The model seams. Every model kira runs, real (ONNX) or default (deterministic), fits
one of these; the pipeline only ever sees these shapes."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from kira.images import ImageLike
from kira.models.caption_parts import CaptionParts


@runtime_checkable
class ImageEncoder(Protocol):
    """Pixels -> L2-normalised vectors."""

    dim: int

    def encode(self, images: Sequence[ImageLike]) -> np.ndarray:
        """float32 (n, dim), unit rows. Accepts arrays, PIL images or paths."""
        ...


@runtime_checkable
class TextEncoder(Protocol):
    """Text -> L2-normalised vectors."""

    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, dim), unit rows."""
        ...


@runtime_checkable
class RegionProposer(Protocol):
    """Image -> a saliency/attention grid for kira._core.extract_regions."""

    def propose(self, image: np.ndarray) -> np.ndarray:
        """float32 (gh, gw) grid over the image (uint8 RGB (h, w, 3)); higher = more salient."""
        ...


@runtime_checkable
class Captioner(Protocol):
    """Image (+ prompt) -> text."""

    def caption(self, image: np.ndarray, prompt: str | None = None) -> str:
        """A description of the image, steered by a domain prompt when given."""
        ...

    def hypotheses(self, image: np.ndarray | None, question: str, n: int) -> list[str]:
        """Up to n chain-of-thought hypotheses about what answers `question`."""
        ...


@runtime_checkable
class SplitCaptioner(Captioner, Protocol):
    """A Captioner that tells what an image shows from how it looks (kira.models.caption_parts)."""

    def caption_parts(self, image: np.ndarray, prompt: str | None = None) -> CaptionParts:
        """`caption(image, prompt)` in its two parts: CaptionParts(shows, looks), with `.text()` == the caption."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """(query, passages) -> relevance scores, higher is better (a cross-encoder)."""

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts),)."""
        ...


@runtime_checkable
class Critic(Protocol):
    """ReAG's critic: the probability that each passage is relevant to the question."""

    def relevance(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts),) in [0, 1]."""
        ...


@runtime_checkable
class LanguageModel(Protocol):
    """A text completer behind generation (SmolLM2, an HTTP server, ...)."""

    def complete(self, prompt: str, *, max_new_tokens: int = 128) -> str: ...


@runtime_checkable
class TextReader(Protocol):
    """Image -> the lines of text printed in it (OCR); each line has .text, .score and .box (x0, y0, x1, y1)."""

    def read(self, image: ImageLike) -> list:
        """Lines read, top to bottom, left to right; [] when none."""
        ...
