"""A query image that clearly shows a stored document names that document as the subject.

"is there a cat?" asked with a crop of the coffee photo was answered "An orange cat lying on a rug
[Evidence 1, 2]": the relevance verdict put the cat photo first because it matched the question's
word, as if the user's own image showed a cat. The question is about the image, and the image is a
crop of 'coffee': the answer now states what coffee's evidence states, and the cat only under
"Similar cases", apart; the relevance verdict is measured on coffee's items, the subject's.
"""

from __future__ import annotations

import pytest
from skimage_photos import CAPTIONS, captioned_kb, skimage_rgb

from kira.pipeline import Kira
from kira.reasoning.subject import SIMILAR_HEADING
from kira.reasoning.types import EvidenceItem

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")


@pytest.fixture(scope="module")
def kira(tmp_path_factory):
    captions = {name: CAPTIONS[name] for name in ("coffee", "retina", "camera", "moon")}
    captions["chelsea"] = "an orange cat lying on a rug"
    base = captioned_kb(tmp_path_factory.mktemp("image_subject") / "kb", captions)
    yield Kira(base)
    base.close()


def _crop(name: str):
    image = skimage_rgb(name)
    h, w = image.shape[:2]
    return image[h // 8: h - h // 8, w // 6: w - w // 6]


@pytest.mark.parametrize("variant", ["dual_path", "full"])
def test_a_question_with_a_query_image_is_about_the_document_it_shows(kira, variant):
    result = kira.ask("is there a cat?", image=_crop("coffee"), top_k=5, variant=variant)
    assert {i.doc_id for i in result.evidence.items} == {"coffee"}, [i.doc_id for i in result.evidence.items]
    assert result.evidence.subject == "coffee"
    # nothing about coffee matches 'cat': the answer says so (test_query_image_yes_no), then what coffee shows
    assert result.answer.plain_text.startswith("Nothing recorded about coffee matches 'cat'. A cup of coffee"), \
        result.answer.text
    assert all("cat" not in c.text.lower() for c in result.answer.claims)  # never stated about the user's image
    assert "chelsea" in {i.doc_id for i in result.evidence.similar}  # retrieved for the word 'cat': kept apart
    assert "orange cat" in result.answer.text.split(SIMILAR_HEADING)[1].lower()
    assert result.trace["subject"]["documents"] == ["coffee"]
    assert not result.answer.abstained
    # judged on coffee's items alone: the cat elsewhere lends the answer no confidence
    assert result.trace["relevance"]["basis"] == "image" and result.trace["relevance"]["score"] is None


def test_a_query_image_that_shows_no_stored_document_names_no_subject(kira):
    result = kira.ask("is there a cat?", image=skimage_rgb("astronaut"), top_k=5)
    assert "subject" not in result.trace and not result.evidence.similar and result.evidence.subject == ""


def _item(number: int, doc: str, caption: str, paths: tuple[str, ...]) -> EvidenceItem:
    return EvidenceItem(number, number, doc, "document", 1.0 / number, paths, caption, {"caption": caption})


def test_on_uncaptioned_photos_the_answer_says_the_query_image_shows_the_subject(tmp_path):
    """Without captions the subject's sentence says the query image shows it, and a similar case is another image:
    "The closest match, IMG_1001, ..." under "Similar cases" read as if the cat were the match."""
    base = captioned_kb(tmp_path / "kb", {name: None for name in ("coffee", "chelsea", "rocket", "camera")})
    try:
        result = Kira(base).ask(None, image=_crop("coffee"), top_k=5)
    finally:
        base.close()
    assert result.answer.plain_text.startswith("The query image shows coffee, which has no caption; the image "
                                               "classifier labels it"), result.answer.text
    assert result.answer.similar and "closest match" not in result.answer.text.lower(), result.answer.text
    others = {i.doc_id for i in result.evidence.similar}
    assert all(c.text.startswith("Another image, ") and c.text.split(", ")[1] in others for c in result.answer.similar)


def test_the_reasoning_layer_names_the_clear_match_path_as_retrieval_writes_it():
    from kira.query_state import RetrievalPath
    from kira.reasoning.types import SHOWN_BY_QUERY_IMAGE

    assert RetrievalPath.CLEAR_MATCH == SHOWN_BY_QUERY_IMAGE
    assert _item(1, "coffee", "a cup", (str(RetrievalPath.CLEAR_MATCH),)).shown_by_query_image
    assert not _item(1, "coffee", "a cup", ("visual",)).shown_by_query_image


def test_the_reasoning_layer_names_the_identifier_path_as_retrieval_writes_it():
    from kira.query_state import RetrievalPath
    from kira.reasoning.types import NAMED_BY_QUESTION

    assert RetrievalPath.IDENTIFIER == NAMED_BY_QUESTION
    assert _item(1, "P017", "a film", (str(RetrievalPath.IDENTIFIER),)).named_by_question
    assert not _item(1, "P017", "a film", ("visual",)).named_by_question
