"""A caption in two parts (kira.models.caption_parts): what an image shows apart from how it looks, on real photos."""

from __future__ import annotations

import numpy as np
import pytest
from skimage import data

from kira.models.caption_parts import CaptionParts, caption_parts
from kira.models.default.captioner import DefaultCaptioner
from kira.models.protocols import SplitCaptioner


@pytest.fixture(scope="module")
def tagger():
    from kira.models import load_default

    return load_default(prefer_cuda=False, threads=1).captioner


def test_the_tagger_says_its_labels_show_and_its_measurements_look(tagger):
    assert isinstance(tagger, SplitCaptioner)
    for photo in (data.chelsea(), data.coffee()):
        parts = tagger.caption_parts(photo)
        assert parts.shows == tagger.label_text(photo) and parts.shows.startswith("labels: ")
        assert parts.looks == tagger.base.caption(photo) and "colour image" in parts.looks
        assert parts.text() == tagger.caption(photo) == f"{parts.shows}; {parts.looks}"
    prompted = tagger.caption_parts(data.coffee(), "A breakfast photo showing")
    assert prompted.looks.startswith("A breakfast photo showing a ") and prompted.shows == "labels: espresso"


def test_measurements_alone_say_only_how_an_image_looks():
    captioner = DefaultCaptioner()
    parts = captioner.caption_parts(data.camera())
    assert parts == CaptionParts(shows="", looks=captioner.caption(data.camera()))
    assert parts.text() == parts.looks and "greyscale" in parts.looks


def test_a_captioner_without_parts_writes_what_the_image_shows():
    class Model:  # a captioning model: its sentence says what the image shows
        def caption(self, image, prompt=None):
            return f"{prompt or 'a photo'} of something {image.shape[1]} pixels wide"

        def hypotheses(self, image, question, n):
            return []

    photo = np.ascontiguousarray(data.astronaut())
    assert not isinstance(Model(), SplitCaptioner) and isinstance(DefaultCaptioner(), SplitCaptioner)
    assert caption_parts(Model(), photo) == CaptionParts(shows="a photo of something 512 pixels wide")
    assert caption_parts(Model(), photo, "a portrait").shows == "a portrait of something 512 pixels wide"
    assert CaptionParts().text() == "" and CaptionParts(looks="dark").text() == "dark"


def test_a_captioner_whose_parts_are_not_caption_parts_is_refused():
    class Wrong(DefaultCaptioner):
        def caption_parts(self, image, prompt=None):
            return ("labels: cat", "dark")

    with pytest.raises(TypeError, match="Wrong.caption_parts must return a CaptionParts, got tuple"):
        caption_parts(Wrong(), data.camera())
