"""A caption in two parts: what an image shows, and how it looks.

A captioning model writes what an image shows ("a cup of coffee on a saucer"). Without one, kira's
captioners write two different kinds of text: the ImageNet tagger's labels ("labels: espresso"), which
say what the image shows, and the default describer's measurements ("A medium-brightness, high-contrast
colour image (600x400, landscape) dominated by orange (54%) ..."), which say only how it looks.
A knowledge base embeds what an image shows as its text vector and keeps the measurements in the
stored description (for the card, lexical search and questions about appearance), so a captioner that
knows which is which says so with `caption_parts` (`SplitCaptioner`); `caption_parts(captioner, ...)`
asks any captioner, and takes a captioner without that method (a captioning model) to write what the
image shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kira.images import ImageLike


@dataclass(frozen=True)
class CaptionParts:
    """shows: what the image shows (labels, a captioning model's sentence; "" when nothing is known).
    looks: how it looks (measured brightness, colours, texture, salient regions; "" when not measured)."""

    shows: str = ""
    looks: str = ""

    def text(self) -> str:
        """The whole caption: what it shows, then how it looks, joined by '; ' (what `caption` returns)."""
        return "; ".join(p for p in (self.shows, self.looks) if p)


def caption_parts(captioner: Any, image: ImageLike, prompt: str | None = None) -> CaptionParts:
    """`captioner`'s caption of `image` in its two parts: its own `caption_parts` where it has one, else its
    whole `caption` as what the image shows. `prompt` is passed on only when given (a captioner may take none)."""
    split = getattr(captioner, "caption_parts", None)
    if callable(split):
        parts = split(image, prompt) if prompt else split(image)
        if not isinstance(parts, CaptionParts):
            raise TypeError(f"{type(captioner).__name__}.caption_parts must return a CaptionParts, "
                            f"got {type(parts).__name__}")
        return parts
    return CaptionParts(shows=captioner.caption(image, prompt) if prompt else captioner.caption(image))


__all__ = ["CaptionParts", "caption_parts"]
