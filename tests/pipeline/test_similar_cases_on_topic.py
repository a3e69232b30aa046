"""A text question's similar cases match what it asks besides its subject's name, or what its subject shows.

On scikit-image's captioned photos, "what colour is the coffee cup?" names the document 'coffee';
every other retrieved item became a similar case, and the eye photo ("a colour photograph of the
back of the eye"), retrieved for the word 'colour', was stated under "Similar cases" though it holds
no cup. A similar case now has to match the question less the subject's name (here: a cup); with a
query image the similar cases are what the image looks like, and stay.

A question that asks only about its subject ("what does IMG_1000 show?") kept every retrieved item as a
similar case: on uncaptioned photos the espresso photo's "similar case" was a cat. Its similar cases now
have to show what the subject shows (another photo labelled 'espresso').
"""

from __future__ import annotations

import pytest
from skimage_photos import CAPTIONS, captioned_kb, skimage_rgb

from kira.pipeline import Kira

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

PHOTOS = ("coffee", "retina", "camera", "clock", "moon")


@pytest.fixture(scope="module")
def kira(tmp_path_factory):
    captions = {name: CAPTIONS[name] for name in PHOTOS}
    base = captioned_kb(tmp_path_factory.mktemp("similar") / "kb", captions)
    base.add_image(skimage_rgb("chelsea")[40:260, 60:360], doc_id="desk",  # another subject that holds a cup
                   caption="a cat beside a cup of tea on a wooden desk")
    base.commit()
    yield Kira(base)
    base.close()


@pytest.mark.parametrize("variant", ["dual_path", "full"])
def test_a_similar_case_retrieved_for_a_passing_word_is_left_out(kira, variant):
    result = kira.ask("what colour is the coffee cup?", top_k=5, variant=variant)
    assert {i.doc_id for i in result.evidence.items} == {"coffee"}
    similar = {i.doc_id for i in result.evidence.similar}
    assert "retina" not in similar, result.answer.text
    assert "eye" not in result.answer.text.lower()
    assert "retina" in result.trace["similar_cases_off_topic"]
    assert all(c.citations and set(c.citations) <= {i.number for i in result.evidence.similar}
               for c in result.answer.similar)


def test_a_similar_case_that_matches_the_rest_of_the_question_stays(kira):
    result = kira.ask("what colour is the coffee cup?", top_k=6, variant="dual_path")
    assert "desk" in {i.doc_id for i in result.evidence.similar}, [i.doc_id for i in result.evidence.similar]
    assert "cup of tea" in result.answer.text.split("Similar cases")[-1].lower(), result.answer.text


@pytest.fixture(scope="module")
def uncaptioned(tmp_path_factory):
    from kira.knowledge_base import KnowledgeBase

    names = ("coffee", "chelsea", "rocket", "astronaut", "camera")
    base = KnowledgeBase.create(tmp_path_factory.mktemp("similar_ids") / "kb")
    for n, name in enumerate(names):
        base.add_image(skimage_rgb(name), doc_id=f"IMG_{1000 + n}")
    base.add_image(skimage_rgb("coffee")[60:360, 80:520], doc_id="IMG_1005")  # a second espresso photo
    base.commit()
    yield Kira(base)
    base.close()


def test_a_question_about_its_subject_alone_keeps_the_similar_cases_that_show_the_same(uncaptioned):
    """"what does IMG_1000 show?" names IMG_1000 by the term '1000'; 'img' is its id's word too, not something
    the similar cases must match. Nothing is left of the question, so they must show what IMG_1000 shows
    ('espresso'): the other espresso photo stays, the cat and the rocket do not."""
    result = uncaptioned.ask("what does IMG_1000 show?", top_k=6, variant="dual_path")
    assert {i.doc_id for i in result.evidence.items} == {"IMG_1000"}
    similar = {i.doc_id for i in result.evidence.similar}
    assert similar == {"IMG_1005"}, (similar, result.answer.text)
    assert "IMG_1001" in result.trace["similar_cases_off_topic"]  # chelsea, 'Egyptian cat'
    assert "Egyptian cat" not in result.answer.text and "IMG_1005" in result.answer.text.split("Similar cases")[-1]
    asked = uncaptioned.ask("is IMG_1000 a cat?", top_k=5, variant="dual_path")  # the rest is judged: a cat
    assert {i.doc_id for i in asked.evidence.similar} <= {"IMG_1001"}, asked.answer.text  # chelsea, 'Egyptian cat'
    assert asked.trace["similar_cases_off_topic"]
    assert "nothing recorded" not in asked.answer.text  # a similar case must show something


def test_a_subject_nothing_recorded_describes_keeps_its_similar_cases(tmp_path):
    from kira.grounding.answer_relevance import subject_shows
    from kira.reasoning.types import EvidenceItem, EvidencePack

    bare = EvidenceItem(1, 1, "scan_1", "document", 1.0, provenance={"described_by": "describer"})
    other = EvidenceItem(2, 2, "scan_2", "document", 0.9, provenance={"described_by": "describer"})
    pack = EvidencePack.from_items("what does scan_1 show?", [bare], similar=[other], subject="scan_1")
    assert subject_shows(pack) == ""  # nothing to judge the similar cases by: on_topic_similar keeps them all
    labelled = EvidenceItem(1, 1, "IMG_1", "document", 1.0,
                            provenance={"described_by": "captioner", "labels": [{"label": "espresso", "p": 0.99}]})
    pack = EvidencePack.from_items("what does IMG_1 show?", [labelled, labelled], similar=[other], subject="1")
    assert subject_shows(pack) == "espresso"
    assert subject_shows(EvidencePack.from_items("espresso", [labelled])) == ""  # no subject, nothing to say
