"""A yes/no question about a query image says so when nothing recorded of the image matches what it asks.

"is this a dog?" asked with a crop of an uncaptioned coffee photo was answered "The query image shows
IMG_1027, which has no caption; the image classifier labels it 'espresso' (p 0.99)" and never said that
nothing matched 'dog': a reader could take it for a yes. The answer now opens "Nothing recorded about
IMG_1027 matches 'dog' (it has no caption: ...)." before what is known of the image
(kira.grounding.answer_relevance.unmatched_notice); an open question ("what is this?") or one offering
alternatives ("benign or malignant?") is answered as before.
"""

from __future__ import annotations

import pytest
from skimage_photos import CAPTIONS, captioned_kb, skimage_rgb

from kira.pipeline import Kira
from kira.reasoning.question_form import asks_yes_no
from kira.reasoning.subject import SIMILAR_HEADING

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

PHOTOS = ("coffee", "chelsea", "astronaut", "rocket", "camera")


def _crop(name: str):
    image = skimage_rgb(name)
    h, w = image.shape[:2]
    return image[h // 8: h - h // 8, w // 6: w - w // 6]


@pytest.fixture(scope="module")
def captioned(tmp_path_factory):
    captions = {name: CAPTIONS.get(name, "an orange cat lying on a rug") for name in PHOTOS}
    base = captioned_kb(tmp_path_factory.mktemp("yes_no") / "kb", captions)
    yield Kira(base)
    base.close()


@pytest.fixture(scope="module")
def uncaptioned(tmp_path_factory):
    base = captioned_kb(tmp_path_factory.mktemp("yes_no_bare") / "kb", dict.fromkeys(PHOTOS))
    yield Kira(base)
    base.close()


def test_yes_no_questions_are_told_apart_from_open_and_either_or_questions():
    assert asks_yes_no("is this a dog?") and asks_yes_no("Does it show a crack") and asks_yes_no("Are there cells?")
    assert not asks_yes_no("what is this?") and not asks_yes_no("a dog") and not asks_yes_no("")
    assert not asks_yes_no("Is the tissue in this field benign or malignant?")  # asks which, not whether


@pytest.mark.parametrize("variant", ["dual_path", "full"])
def test_an_unmatched_yes_no_question_about_a_captioned_image_says_nothing_matches(captioned, variant):
    result = captioned.ask("is there a dog?", image=_crop("coffee"), top_k=5, variant=variant)
    assert result.evidence.subject == "coffee" and not result.answer.abstained
    subject_part = result.answer.text.split(SIMILAR_HEADING)[0]
    assert subject_part.startswith("Nothing recorded about coffee matches 'dog'."), result.answer.text
    assert "coffee" in subject_part.split(".", 1)[1].lower()  # then what its caption says
    assert "classifier" not in subject_part  # a caption is what a person wrote: no caveat about labels
    assert all("dog" not in c.text.lower() for c in result.answer.claims)  # the notice is no claim
    assert result.trace["relevance"]["unmatched"] == "dog"
    assert any("nothing recorded of the evidence found for it matches" in step for step in result.answer.reasoning)


def test_a_matched_open_or_either_or_question_gets_no_notice(captioned):
    for question in ("is there a cup of coffee?", "what is this?", "is the cup on a saucer or on a table?", None):
        result = captioned.ask(question, image=_crop("coffee"), top_k=5)
        assert not result.answer.text.startswith("Nothing recorded"), (question, result.answer.text)


def test_an_unmatched_yes_no_question_about_an_uncaptioned_photo_says_how_little_labels_say(uncaptioned):
    result = uncaptioned.ask("is this a dog?", image=_crop("coffee"), top_k=5)
    assert result.evidence.subject == "coffee"
    text = result.answer.text
    assert text.startswith("Nothing recorded about coffee matches 'dog' (it has no caption: kira knows it only by "
                           "an image classifier's labels"), text
    assert "the query image shows coffee" in text.lower()
    cat = uncaptioned.ask("is this a cat?", image=_crop("chelsea"), top_k=5)  # the classifier says a cat: no notice
    assert cat.evidence.subject == "chelsea" and not cat.answer.text.startswith("Nothing recorded"), cat.answer.text
