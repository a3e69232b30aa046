"""A query image that is no stored image: the answer says whose evidence it states.

A photo of an astronaut asked against a knowledge base without one was answered "Black and white photo of a
man with a camera on a tripod [Evidence 1, 5].", and with "is there a cat?" "An orange cat lying on a rug
[Evidence 1, 4]." (confidence 0.97): read as a description of the user's own photo, both are false. The
answer now opens "A stored image found for the query image shows:" (the citations and the card name it)
(kira.reasoning.subject.attributed_to_stored). A query image that shows a stored image is answered as that
image's subject (test_query_image_subject), and an uncaptioned item already names itself.
"""

from __future__ import annotations

import pytest
from skimage_photos import CAPTIONS, captioned_kb, skimage_rgb

from kira.pipeline import Kira
from kira.reasoning.subject import attributed_to_stored
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

LEAD = "A stored image found for the query image shows: "


@pytest.fixture(scope="module")
def kira(tmp_path_factory):
    captions = {name: CAPTIONS[name] for name in ("coffee", "rocket", "camera", "moon", "retina", "coins")}
    captions["chelsea"] = "an orange cat lying on a rug"
    base = captioned_kb(tmp_path_factory.mktemp("not_stored") / "kb", captions)
    yield Kira(base)
    base.close()


@pytest.mark.parametrize("variant", ["dual_path", "full"])
def test_an_unstored_query_image_is_answered_with_whose_evidence_it_is(kira, variant):
    alone = kira.ask(None, image=skimage_rgb("astronaut"), top_k=5, variant=variant)
    assert alone.answer.text.startswith(("A stored image found for the query image shows: ",
                                         "Stored images found for the query image show: ")), alone.answer.text
    assert any(alone.evidence.items[0].doc_id in step for step in alone.answer.reasoning)
    cat = kira.ask("is there a cat?", image=skimage_rgb("astronaut"), top_k=5, variant=variant)
    assert cat.answer.text.startswith(f"{LEAD}An orange cat"), cat.answer.text
    assert cat.answer.claims[0].text.startswith("An orange cat")  # the lead is no claim: claims verify as before


def test_a_query_image_that_shows_a_stored_image_is_answered_about_it(kira):
    crop = skimage_rgb("chelsea")[40:260, 60:400]
    result = kira.ask("is there a cat?", image=crop, top_k=5)
    assert result.evidence.subject == "chelsea" and result.answer.text.startswith("An orange cat"), result.answer.text


def _item(number: int, doc: str, caption: str | None, paths: tuple[str, ...] = ("visual",)) -> EvidenceItem:
    provenance = {"caption": caption} if caption else {"labels": [{"label": "tabby cat", "p": 0.8}]}
    return EvidenceItem(number, number, doc, "document", 1.0, paths, caption or "", provenance)


def test_attributed_to_stored_names_the_cited_images_in_its_step_and_leaves_the_rest_alone():
    pack = EvidencePack.from_items("", [_item(0, "a", "a red boat"), _item(0, "b", "a red boat"), _item(0, "c", "x")])
    answer = Answer(text="A red boat [Evidence 1, 2].", claims=(Claim("A red boat [Evidence 1, 2].", (1, 2)),))
    out = attributed_to_stored(answer, pack, image_query=True)
    assert out.text == "Stored images found for the query image show: A red boat [Evidence 1, 2]."
    assert out.claims == answer.claims and "(a, b)" in out.reasoning[-1]
    assert attributed_to_stored(answer, pack, image_query=False) is answer  # a text question: about the corpus
    shown = EvidencePack.from_items("", [_item(0, "a", "a red boat", ("visual", "clear_match"))])
    assert attributed_to_stored(answer, shown, image_query=True) is answer  # the image is a stored one
    bare = EvidencePack.from_items("", [_item(0, "a", None)])
    assert attributed_to_stored(answer, bare, image_query=True) is answer  # "The closest match, a, ..." names it
