"""The default Captioner: descriptions and query hypotheses without a captioning model.

`caption` is the describer's sentence of measured attributes, introduced by the domain
prompt when one is given (a BLIP-2 style prompt such as "A weld inspection photo showing" reads
naturally as the prefix). `hypotheses` stands in for the chain-of-thought hypotheses a
captioning LM would write for query expansion: deterministic sentences that restate
the question's subject in the vocabulary chunk descriptions use (location, brightness,
colour, texture), grounded in the query image's measured attributes when there is one.
They are search queries for the text path, not claims.
"""

from __future__ import annotations

import re

from kira.images import ImageLike
from kira.models.caption_parts import CaptionParts
from kira.models.default.describer import Describer, ImageAttributes

_STOPWORDS = frozenset(
    """a an the this that these those is are was were be been being am do does did doing have has had
    what which who whom whose when where why how there here of in on at to for from by with about as into
    through over under between than then so and or but if not no nor can could should would may might
    must will shall it its it's i me my we our you your he she they them their his her any some all each
    image images picture photo shown show shows seen see visible please tell describe find there's
    kind type sort one""".split()
)
_WORD = re.compile(r"[a-z0-9][a-z0-9\-']*")


def question_subject(question: str, max_words: int = 6) -> str:
    """The content words of a question, in order, e.g. 'Where is the crack?' -> 'crack'.

    Returns "" when the question has no content words.
    """
    words = [w.strip("'-") for w in _WORD.findall(question.lower())]
    content = [w for w in words if w and w not in _STOPWORDS]
    return " ".join(dict.fromkeys(content[:max_words]))


class DefaultCaptioner:
    """Captioner from measured attributes (a Captioner).

    Parameters: describer (default Describer()). Thread safety: stateless.
    """

    def __init__(self, describer: Describer | None = None) -> None:
        self.describer = describer or Describer()

    def caption(self, image: ImageLike, prompt: str | None = None) -> str:
        """The measured-attribute sentence, prefixed by `prompt` when given.

        Returns e.g. "A weld inspection photo showing a dark, high-contrast greyscale image ...".
        Raises kira.images.ImageError for unusable input.
        """
        text = self.describer.describe(image).to_text()
        if prompt and prompt.strip():
            lead = prompt.strip().rstrip(":.")
            return f"{lead} {text[0].lower()}{text[1:]}"
        return text

    def caption_parts(self, image: ImageLike, prompt: str | None = None) -> CaptionParts:
        """`caption(image, prompt)` as how the image looks: measurements say nothing of what it shows."""
        return CaptionParts(looks=self.caption(image, prompt))

    def hypotheses(self, image: ImageLike | None, question: str, n: int) -> list[str]:
        """Up to n deterministic hypotheses about what answers `question`.

        They join the question's subject to the image's measured attributes (salient-region
        location, brightness, colour, texture). Without an image there is nothing to add:
        a template around the question's own words says no more than the question, whose
        vector the search already has, and would cost an encoding each; so a text-only
        question gets [] (a language-model captioner writes real hypotheses). Returns []
        for n <= 0. Raises ValueError when `question` is not a string.
        """
        if not isinstance(question, str):
            raise ValueError(f"question must be a string, got {type(question).__name__}")
        if n <= 0 or image is None:
            return []
        subject = question_subject(question)
        out = _with_image(subject or "the main finding", self.describer.describe(image))
        return list(dict.fromkeys(out))[:n]


def _with_image(subject: str, a: ImageAttributes) -> list[str]:
    colours = " and ".join(name for name, _ in a.dominant_colours[:2]) or ("gray" if a.is_greyscale else "mixed")
    kind = "greyscale" if a.is_greyscale else "colour"
    out = [f"The image shows {subject} in a {a.brightness_word}, {a.contrast_word} {kind} image."]
    if a.regions:
        r = a.regions[0]
        out.append(f"{_cap(subject)} is at the {r.location} of the image, a salient region covering {r.area:.0%}.")
    out.append(f"{_cap(subject)} appears as a {a.texture_word} {colours} area.")
    if a.orientation != "mixed":
        out.append(f"{_cap(subject)} follows the mostly {a.orientation} structures in the image.")
    out.append(f"A similar {kind} image with {subject}, {colours}, {a.texture_word}.")
    out.append(f"An image with {subject}, described by its location, shape and appearance.")
    return out


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
