"""A yes/no question about one subject opens its answer with what it asks: no match, or a classifier's yes.

"is this a dog?" asked with a crop of an uncaptioned coffee photo was answered "The query image shows
IMG_1027, which has no caption; the image classifier labels it 'espresso' (p 0.99)" and never said that
nothing matched 'dog': a reader could take it for a yes. The answer now opens "Nothing recorded about
IMG_1027 matches 'dog' (it has no caption: ...)." before what is known of the image. The same held for a
question that names its subject ("does IMG_1027 show a dog?"), where the subject's name made the evidence
relevant and nothing measured the rest; and a question answered by the labels ("is this a cat?" about a
photo labelled 'Egyptian cat') never said yes. Both now open with what was asked of the subject
(kira.grounding.yes_no). An open question ("what is this?"), one offering alternatives ("benign or
malignant?") or also asking what, and a match in what a person wrote (kira does not read negation) get no
opening sentence.
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


def test_yes_no_questions_that_also_ask_what_are_not_yes_no():
    assert not asks_yes_no("Do fields 3 and 5 of slide S1 agree, and what is the diagnosis for the slide?")
    assert not asks_yes_no("is this a cat, and how old is it?")
    assert asks_yes_no("is there a cat in IMG_1004?") and asks_yes_no("Has the crack grown?")


def test_a_classifier_label_that_matches_a_yes_no_question_about_a_query_image_opens_with_yes(uncaptioned):
    result = uncaptioned.ask("is this a cat?", image=_crop("chelsea"), top_k=5)
    text = result.answer.text
    assert text.startswith("Yes, by the image classifier's labels: what is recorded about chelsea matches 'cat'. "), text
    assert "the query image shows chelsea" in text.lower()  # then what the labels are
    assert result.trace["yes_no"]["answer"] == "yes" and result.trace["yes_no"]["documents"] == ["chelsea"]
    assert all("yes" not in c.text.lower() for c in result.answer.claims)  # the opening is no claim
    assert any("opens with 'yes'" in step for step in result.answer.reasoning)


def test_a_yes_no_question_naming_its_subject_is_measured_on_what_it_asks_besides_the_name(uncaptioned):
    dog = uncaptioned.ask("does chelsea show a dog?", top_k=5)
    assert dog.evidence.subject == "chelsea", dog.evidence.subject
    assert dog.answer.text.startswith("Nothing recorded about chelsea matches 'dog' (it has no caption: kira knows it "
                                      "only by an image classifier's labels"), dog.answer.text
    assert dog.trace["yes_no"] == {"asked": "dog", "answer": "nothing recorded", "documents": ["chelsea"]}
    cat = uncaptioned.ask("is there a cat in chelsea?", top_k=5)
    assert cat.answer.text.startswith("Yes, by the image classifier's labels: what is recorded about chelsea "
                                      "matches 'cat'."), cat.answer.text
    named_only = uncaptioned.ask("is this chelsea?", top_k=5)  # nothing asked besides the name
    assert "yes_no" not in named_only.trace and not named_only.answer.text.startswith(("Yes", "Nothing")), \
        named_only.answer.text


def test_a_weak_label_says_possibly_and_a_knowledge_base_wide_question_says_which_image(uncaptioned):
    # the astronaut photo's labels are a classifier's guess ('bobsled', p ~0.3): a match, but an unsure one
    weak = uncaptioned.ask("does astronaut show a bobsled?", top_k=5)
    assert weak.answer.text.startswith("Possibly, by the image classifier's labels: what is recorded about "
                                       "astronaut matches 'bobsled'."), weak.answer.text
    assert weak.trace["yes_no"]["answer"] == "possibly" and weak.trace["yes_no"]["confidence"] < 0.5
    anywhere = uncaptioned.ask("is there a cat?", top_k=5)  # asks the knowledge base: which image says yes
    assert anywhere.answer.text.startswith("Yes, by the image classifier's labels: what is recorded about chelsea "
                                           "matches 'cat'."), anywhere.answer.text


def test_a_match_in_what_a_person_wrote_is_quoted_not_read_as_yes(captioned):
    # a caption may say "no crack"; kira does not read negation, so the caption answers, unread as a yes
    for question in ("does rocket show a rocket on a launch pad?", "is there a rocket?"):
        result = captioned.ask(question, top_k=5)
        assert not result.answer.text.startswith(("Yes", "Possibly", "Nothing")), (question, result.answer.text)
        assert "launch pad" in result.answer.text, result.answer.text
        assert "yes_no" not in result.trace
    dog = captioned.ask("does chelsea show a dog?", top_k=5)  # ... but nothing matching is said
    assert dog.answer.text.startswith("Nothing recorded about chelsea matches 'dog'."), dog.answer.text
    assert "classifier" not in dog.answer.text.split(".")[0]


def test_what_was_asked_is_quoted_as_the_question_wrote_it():
    from kira.reasoning.question_form import asked_phrase

    assert asked_phrase("is this a cup of coffee?", "cup coffee") == "cup of coffee"
    assert asked_phrase("Does IMG_1015 show a woman in uniform?", "woman uniform") == "woman in uniform"
    assert asked_phrase("is there a dog in IMG_1004?", "dog") == "dog"
    # a stretch that would take in the subject's name is not quoted: the words are
    assert asked_phrase("does a dog sit in IMG_1004 on a sofa?", "dog sit sofa") == "dog sit sofa"
    assert asked_phrase(None, "dog") == "dog" and asked_phrase("is it?", "") == ""


def test_a_yes_no_question_nothing_answers_quotes_what_it_asks(uncaptioned):
    asked = uncaptioned.ask("is there a bicycle?", top_k=5)
    assert asked.answer.abstained
    assert asked.answer.text.startswith("Nothing in this knowledge base matches 'bicycle';"), asked.answer.text
    plain = uncaptioned.ask("a bicycle", top_k=5)  # a phrase is quoted as it was written
    assert plain.answer.abstained and plain.answer.text.startswith("Nothing in this knowledge base matches 'a bicycle';")


def test_a_yes_names_only_the_images_it_surely_rests_on():
    from kira.grounding.yes_no import _labels_match
    from kira.reasoning.relevance import Relevance
    from kira.reasoning.types import EvidenceItem

    def labelled(n: int, doc: str, label: str, p: float) -> EvidenceItem:
        return EvidenceItem(n, n, doc, "document", 1.0, ("text",), "",
                            {"described_by": "captioner", "labels": [{"label": label, "p": p}]})

    items = [labelled(1, "IMG_1", "espresso", 0.99), labelled(2, "IMG_2", "espresso maker", 0.38)]
    verdict = Relevance(relevant=True, score=0.98, items=((1, 0.98), (2, 0.97)), basis="text", asked="espresso")
    notice = _labels_match(items, verdict, "this knowledge base", "is there an espresso?")
    assert notice is not None and notice.text == ("Yes, by the image classifier's labels: what is recorded about "
                                                  "IMG_1 matches 'espresso'."), notice
    unsure = _labels_match(items[1:], verdict, "this knowledge base", "is there an espresso?")
    assert unsure is not None and unsure.text.startswith("Possibly, ") and "IMG_2" in unsure.text
