"""The ImageNet tagger: a Captioner whose description starts with the classifier's confident labels.

With no captioning model, an uncaptioned photo's description is only measured attributes
("a bright, high-contrast colour image..."), so a text question such as "a cat" has no
word to match. The CNN's classifier gives learned words: the top ImageNet classes whose
probability reaches `threshold` (at most `top_k`) are put first in the caption, as
"labels: tabby cat, tiger cat", followed by the wrapped captioner's sentence. Images the
classifier is unsure of (most domain images: scans, drawings) get no labels.
The knowledge base puts the user's own caption and tags before any of this.
`caption_parts` keeps the two apart: the labels say what the image shows, the base captioner's
measurements how it looks (kira.models.caption_parts); a knowledge base embeds the first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kira.images import ImageLike
from kira.models.caption_parts import CaptionParts, caption_parts
from kira.models.cnn.encoder import CnnImageEncoder
from kira.models.cnn.labels import imagenet_labels


@dataclass(frozen=True)
class TaggerConfig:
    """Which labels are confident enough to describe an image."""

    name: str = "imagenet-tagger-v1"
    threshold: float = 0.15  # a label needs at least this softmax probability
    top_k: int = 3  # at most this many labels per image
    synonyms: int = 1  # WordNet synonyms added after each label's name (0: the name only)


@dataclass(frozen=True)
class Label:
    """One ImageNet label given to an image."""

    index: int
    name: str
    probability: float


class ImageNetTagger:
    """Captioner: confident ImageNet labels, then the wrapped captioner's description.

    Parameters: encoder (the CnnImageEncoder whose forward pass is shared), base (a
    Captioner for the rest of the description and for query hypotheses; None: labels
    only), config (TaggerConfig). Thread safety: as the encoder's.
    """

    def __init__(self, encoder: CnnImageEncoder, base=None, config: TaggerConfig | None = None) -> None:
        self.encoder = encoder
        self.base = base
        self.config = config or TaggerConfig()
        if not 0.0 < self.config.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.config.threshold}")

    @property
    def vocabulary(self) -> tuple[str, ...]:
        """Every label name this tagger can give (the relevance judge's reference for a label near a question)."""
        return tuple(c.name for c in imagenet_labels())

    def labels(self, image: ImageLike) -> list[Label]:
        """The image's labels with probability >= threshold, most probable first (at most top_k)."""
        probs = self.encoder.probabilities(image)
        order = np.argsort(-probs, kind="stable")[: self.config.top_k]
        names = imagenet_labels()
        return [Label(int(i), names[int(i)].name, float(probs[i])) for i in order if probs[i] >= self.config.threshold]

    def label_text(self, image: ImageLike) -> str:
        """'labels: tabby cat, tiger cat' (with up to `synonyms` WordNet synonyms each), or '' when none is confident."""
        names = imagenet_labels()
        words: list[str] = []
        for label in self.labels(image):
            words += names[label.index].words()[: 1 + self.config.synonyms]
        words = list(dict.fromkeys(words))
        return f"labels: {', '.join(words)}" if words else ""

    def caption(self, image: ImageLike, prompt: str | None = None) -> str:
        """The label text, then the base captioner's description (steered by `prompt`), joined by '; '."""
        return self.caption_parts(image, prompt).text()

    def caption_parts(self, image: ImageLike, prompt: str | None = None) -> CaptionParts:
        """What the image shows (the label text, then what the base captioner says it shows) and how it looks
        (what the base captioner says of that: the default describer's measurements)."""
        base = caption_parts(self.base, image, prompt) if self.base is not None else CaptionParts()
        shows = "; ".join(p for p in (self.label_text(image), base.shows) if p)
        return CaptionParts(shows=shows, looks=base.looks)

    def hypotheses(self, image: ImageLike | None, question: str, n: int) -> list[str]:
        """The base captioner's hypotheses (labels are descriptions, not answers); [] without a base."""
        return self.base.hypotheses(image, question, n) if self.base is not None else []
