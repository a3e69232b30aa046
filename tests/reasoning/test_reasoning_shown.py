"""What an item shows and how it looks; field sentences; the relevance judge on hand-built evidence."""

from __future__ import annotations

import pytest

from kira.reasoning.field_answer import abstention_text, closest_summary, fact_phrases, item_sentence, label_phrase
from kira.reasoning.relevance import RelevanceJudge, question_words, source_support
from kira.reasoning.shown import appearance_words, asks_about_appearance, shown, shows_text
from kira.reasoning.types import EvidenceItem, EvidencePack

DESCRIBED = ("labels: espresso, espresso maker; A medium-brightness, high-contrast colour image (600x400, landscape) "
             "dominated by orange (54%), brown (26%) and red (13%); highly textured; 3 salient regions: a large one "
             "at the centre (49%), a medium one at the bottom-left (10%) and a small one at the top (1%).")


def _item(number=1, doc="IMG_1001", summary=DESCRIBED, level="document", **prov):
    provenance = {"described_by": "captioner", **prov}
    return EvidenceItem(number, number, doc, level, 1.0, ("text",), summary, provenance)


def test_an_uncaptioned_item_shows_its_labels_and_looks_without_figures():
    view = shown(_item(labels=[{"label": "espresso", "p": 0.9907}]))
    assert view.labels == (("espresso", 0.9907),) and not view.human_text and not view.empty
    assert view.looks == ("a medium-brightness, high-contrast colour image dominated by orange, brown and red",
                          "highly textured")
    assert shows_text(_item(labels=[{"label": "espresso", "p": 0.99}])) == "espresso"
    assert shown(_item()).empty  # only looks: nothing says what it shows


def test_a_captioned_region_shows_its_caption_tags_text_and_location():
    summary = ("a cup of coffee; tags: cafe, morning; text: MENU; region at x 10-80, y 5-60 of 600x400; "
               "A dark colour image (70x55, square)")
    view = shown(_item(summary=summary, level="region", caption="a cup of coffee", tags=["cafe", "morning"],
                       text_read=[{"text": "MENU", "box": [0, 0, 5, 5]}], metadata={"ward": "3"}))
    assert view.human_text == "a cup of coffee" and view.tags == ("cafe", "morning") and view.text_read == ("MENU",)
    assert view.location == "region at x 10-80, y 5-60 of 600x400" and view.looks == ("a dark colour image",)
    assert view.content_text() == "a cup of coffee. cafe, morning. MENU. ward 3"


def test_hand_built_evidence_keeps_its_summary_as_content():
    item = EvidenceItem(1, 1, "d", "document", 1.0, (), "Enlarged heart outline.", {})
    assert shown(item).human_text == "Enlarged heart outline." and not shown(item).looks


def test_appearance_words_and_questions():
    assert asks_about_appearance("a dark image") and asks_about_appearance("mostly red")
    assert not asks_about_appearance("a cup of coffee")
    assert asks_about_appearance("a glossy finish", extra_words=("glossy",))
    assert appearance_words("3 salient regions: a large one at the centre (49%)") == ""
    assert appearance_words("A dark image (512x512, square) dominated by gray (80%)") == "a dark image dominated by gray"


def test_field_sentences_read_as_a_person_would_write_them():
    item = _item(labels=[{"label": "space shuttle", "p": 0.62}, {"label": "missile", "p": 0.2}])
    assert item_sentence(item, appearance=False) == ("The closest match, IMG_1001, has no caption; the image "
                                                     "classifier labels it 'space shuttle' (p 0.62) or 'missile' (p 0.20)")
    assert "measured, it is a medium-brightness" in item_sentence(item, appearance=True)
    assert label_phrase(shown(_item())) == "" and fact_phrases(shown(_item()), appearance=False) == []
    assert "nothing recorded says what it shows" in item_sentence(_item(), appearance=False)
    assert closest_summary(item) == "IMG_1001 (labelled 'space shuttle', p 0.62)"
    other = _item(2, "IMG_1002", tags=["brick"])
    assert abstention_text("a violin", [item, other, item]) == (
        "Nothing in this knowledge base matches 'a violin'; the closest items are IMG_1001 (labelled "
        "'space shuttle', p 0.62) [Evidence 1] and IMG_1002 (tagged 'brick') [Evidence 2].")
    # named closest in meaning first, each cites its own number, not its place in the sentence
    assert "are IMG_1002 (tagged 'brick') [Evidence 2] and IMG_1001" in abstention_text("a violin", [other, item])
    assert abstention_text("", [], image_query=True) == "Nothing in this knowledge base matches the query image."
    # the closest items known only by classifier labels: the answer says how little "nothing matches" rests on
    assert abstention_text("a rocket", [item]) == (
        "Nothing in this knowledge base matches 'a rocket'; the closest item is IMG_1001 (labelled 'space shuttle', "
        "p 0.62) [Evidence 1]. It has no caption: kira knows it only by an image classifier's labels, which may not name what it "
        "shows.")
    labelled = _item(2, "IMG_1002", labels=[{"label": "obelisk", "p": 0.5}])
    assert abstention_text("a rocket", [item, labelled]).endswith(
        "They have no captions: kira knows them only by an image classifier's labels, which may not name what "
        "they show.")


def test_question_words_and_source_support():
    assert question_words("Find photos of a brick wall") == ["brick", "wall"]
    assert source_support(shown(_item(labels=[{"label": "x", "p": 0.4}]))) == 0.4
    assert source_support(shown(_item(caption="a cat", summary="a cat"))) == 1.0
    assert source_support(shown(_item())) == 0.0


def test_the_judge_abstains_on_an_absent_concept_and_not_on_a_present_one(minilm):
    judge = RelevanceJudge(minilm)
    pack = EvidencePack.from_items("q", [_item(labels=[{"label": "tabby cat", "p": 0.55}]),
                                         _item(2, "IMG_1002", labels=[{"label": "espresso", "p": 0.99}])])
    cat = judge.judge("a kitten", pack)
    assert cat.relevant and cat.best == 1 and cat.support == pytest.approx(0.55) and cat.confidence < cat.score
    wall = judge.judge("a brick wall", pack)
    assert not wall.relevant and wall.score < 0.5 and dict(wall.items).keys() == {1, 2}
    assert judge.judge("what does this show?", pack, image_query=True).score is None
    about_image = judge.judge("a brick wall", pack, image_query=True)  # a query image never abstains
    assert about_image.relevant and about_image.score is None and about_image.basis == "image"
    assert not judge.judge("a brick wall", EvidencePack.from_items("q", [_item()])).relevant  # shows nothing
    assert judge.judge("a brick wall", EvidencePack.from_items("q", [_item()]), image_query=True).relevant
    with pytest.raises(ValueError):
        RelevanceJudge(minilm, probes=())
