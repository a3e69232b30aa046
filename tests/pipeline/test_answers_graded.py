"""The graded decision on real uncaptioned photos: answer, low-confidence answer, or abstain.

An uncaptioned photo is known by its ImageNet labels. kira.reasoning.relevance judges a
label-only item against everything the classifier could have said as well as against everyday
phrases:

* "a man with a camera": scikit-image's cameraman is labelled 'tripod', a label near the question
  but not the same: the answer says what the classifier saw, with low confidence, and does not
  abstain (it abstained before the graded decision); every card opens with a low-confidence banner.
* "an elephant": the only animal photo is labelled 'Egyptian cat'; the classifier could have said
  'African elephant' and did not, so the answer abstains (before, the two being animals was enough
  to answer).
* "a cat": the label names it: a plain answer.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from kira.knowledge_base import KnowledgeBase
from kira.models.cnn.labels import imagenet_labels
from kira.pipeline import Kira
from kira.reasoning.relevance import LOW_CONFIDENCE, RelevanceJudge
from kira.reasoning.types import EvidenceItem, EvidencePack

skimage_data = pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

PHOTOS = {"IMG_2000": "camera", "IMG_2001": "chelsea", "IMG_2002": "coffee", "IMG_2003": "rocket"}


def _rgb(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    return np.ascontiguousarray(np.repeat(image[:, :, None], 3, 2) if image.ndim == 2 else image[:, :, :3])


@pytest.fixture(scope="module")
def kira(tmp_path_factory):
    base = KnowledgeBase.create(tmp_path_factory.mktemp("graded") / "kb")
    for doc, name in PHOTOS.items():
        base.add_image(_rgb(getattr(skimage_data, name)()), doc_id=doc)  # no caption, no tags
    base.commit()
    yield Kira(base)
    base.close()


def test_a_label_near_the_question_answers_with_low_confidence(kira):
    result = kira.ask("a man with a camera", top_k=3)
    answer = result.answer
    assert not answer.abstained, answer.text
    assert answer.text.startswith("The closest match, IMG_2000, has no caption; the image classifier labels it "
                                  "'tripod'"), answer.text
    assert answer.confidence is not None and answer.confidence < LOW_CONFIDENCE
    note = result.trace["relevance"]
    assert note["grade"] == "low" and note["near"][0][1] == "tripod"
    assert result.card.to_text().splitlines()[2].startswith("LOW CONFIDENCE: ")
    assert json.loads(result.card.to_json())["notice"]["kind"] == "low"


def test_a_label_of_the_same_kind_only_abstains(kira):
    answer = kira.ask("an elephant", top_k=3).answer
    assert answer.abstained, answer.text
    assert answer.text.startswith("Nothing in this knowledge base matches 'an elephant'"), answer.text


def test_a_label_that_names_the_question_answers_plainly(kira):
    result = kira.ask("a cat", top_k=3)
    assert not result.answer.abstained and result.trace["relevance"]["grade"] == "answer"
    assert "'Egyptian cat'" in result.answer.text


def _labelled(number: int, label: str, p: float) -> EvidenceItem:
    return EvidenceItem(number=number, chunk_id=number, doc_id=f"IMG_{number}", level="document", score=1.0,
                        paths=("text",), summary=f"labels: {label}",
                        provenance={"described_by": "captioner", "labels": [{"label": label, "p": p}]})


@pytest.fixture(scope="module")
def encoder():
    from kira.models import load_default

    return load_default(image_encoder="pixel").text


def test_the_judge_grades_label_only_items_against_the_classifier_vocabulary(encoder):
    vocabulary = [c.name for c in imagenet_labels()]
    graded = RelevanceJudge(encoder, vocabulary=vocabulary)
    ungraded = RelevanceJudge(encoder)
    cat = EvidencePack.from_items("an elephant", [_labelled(1, "Egyptian cat", 0.75)])
    assert ungraded.judge("an elephant", cat).relevant  # same kind of thing: the probes alone let it through
    verdict = graded.judge("an elephant", cat)
    assert not verdict.relevant and verdict.grade == "abstain"
    tripod = EvidencePack.from_items("a man with a camera", [_labelled(1, "Egyptian cat", 0.75),
                                                              _labelled(2, "tripod", 0.99)])
    assert not ungraded.judge("a man with a camera", tripod).relevant
    verdict = graded.judge("a man with a camera", tripod)
    assert verdict.relevant and verdict.grade == "low" and verdict.best == 2
    assert verdict.near[0][:2] == (2, "tripod") and verdict.matches(2) and not verdict.matches(1)
    assert verdict.confidence is not None and verdict.confidence < LOW_CONFIDENCE
    kitten = graded.judge("a kitten", EvidencePack.from_items("a kitten", [_labelled(1, "Egyptian cat", 0.75)]))
    assert kitten.grade == "answer" and kitten.score >= 0.5


def test_label_standouts_reads_only_label_only_items(encoder):
    judge = RelevanceJudge(encoder, vocabulary=[c.name for c in imagenet_labels()])
    captioned = EvidenceItem(number=3, chunk_id=3, doc_id="IMG_3", level="document", score=1.0, paths=("text",),
                             summary="a cat on a sofa", provenance={"described_by": "user caption/tags",
                                                                    "caption": "a cat on a sofa",
                                                                    "labels": [{"label": "tabby", "p": 0.4}]})
    standing = judge.label_standouts("a kitten", [_labelled(1, "Egyptian cat", 0.7), _labelled(2, "tripod", 0.9),
                                                  captioned])
    assert set(standing) == {1, 2}  # a captioned item is judged by its caption, not its labels
    assert standing[1][0] == "Egyptian cat" and standing[1][1] > standing[2][1]
    assert standing[1][2] < standing[2][2]  # the vocabulary names a kitten better than 'tripod' does
    assert RelevanceJudge(encoder).label_standouts("a kitten", [_labelled(1, "Egyptian cat", 0.7)]) == {}


def test_the_tagger_vocabulary_is_every_imagenet_name():
    from kira.models.cnn.tagger import ImageNetTagger
    from kira.grounding.answer_relevance import label_vocabulary

    tagger = ImageNetTagger(encoder=None)  # type: ignore[arg-type]  # the vocabulary needs no forward pass
    assert len(tagger.vocabulary) == 1000 and "Egyptian cat" in tagger.vocabulary
    assert label_vocabulary(type("Stack", (), {"captioner": tagger})()) == tagger.vocabulary
    assert label_vocabulary(object()) == ()


def test_a_kind_the_classifier_has_no_one_name_for_is_judged_by_its_words(encoder):
    """"an animal" has no one ImageNet name, so a cat labelled 'Egyptian cat' still answers it."""
    graded = RelevanceJudge(encoder, vocabulary=[c.name for c in imagenet_labels()])
    pack = EvidencePack.from_items("an animal", [_labelled(1, "Egyptian cat", 0.75)])
    verdict = graded.judge("an animal", pack)
    assert verdict.grade == "answer" and verdict.relevant
    _, v, gap = graded.label_standouts("an animal", pack.items)[1]
    assert gap < 3.0 and v < 3.5


def test_the_item_that_most_surely_shows_it_leads_the_answer(encoder):
    """Two label-only items both match "a cup of coffee": retrieval put a scan labelled 'espresso maker'
    (p 0.38) first and the coffee photo labelled 'espresso' (p 0.99) second. The verdict's best is the
    surer one, and the answer leads with it, so the confidence shown is that of the item the answer names."""
    from kira.grounding.answer_relevance import relevant_first

    judge = RelevanceJudge(encoder, vocabulary=[c.name for c in imagenet_labels()])
    pack = EvidencePack.from_items("a cup of coffee", [_labelled(1, "espresso maker", 0.38),
                                                        _labelled(2, "espresso", 0.99),
                                                        _labelled(3, "tripod", 0.9)])
    verdict = judge.judge("a cup of coffee", pack)
    assert verdict.matches(1) and verdict.matches(2) and not verdict.matches(3)
    assert verdict.best == 2 and verdict.support == pytest.approx(0.99)
    ordered, moved = relevant_first(pack, verdict)
    assert [i.doc_id for i in ordered.items] == ["IMG_2", "IMG_1", "IMG_3"]
    assert moved.best == 1 and dict(moved.items)[1] == dict(verdict.items)[2]
    alone = EvidencePack.from_items("a cup of coffee", [_labelled(1, "espresso", 0.99),
                                                        _labelled(2, "espresso maker", 0.38)])
    kept, _ = relevant_first(alone, judge.judge("a cup of coffee", alone))
    assert kept is alone  # the surest match already leads: nothing moves


def test_an_unmatched_but_surer_item_does_not_outrank_a_match(encoder):
    """A match with an unsure label stays the best over a confident label that does not match."""
    judge = RelevanceJudge(encoder, vocabulary=[c.name for c in imagenet_labels()])
    pack = EvidencePack.from_items("a cup of coffee", [_labelled(1, "tripod", 0.99),
                                                        _labelled(2, "espresso", 0.2)])
    verdict = judge.judge("a cup of coffee", pack)
    assert verdict.relevant and verdict.best == 2 and verdict.score >= 0.5


def test_the_coffee_photo_answers_a_cup_of_coffee_before_a_scan(tmp_path):
    """On real uncaptioned images: the coffee photo and pydicom's nuclear-medicine scan (which the
    classifier calls 'espresso maker', p 0.38); the answer names the coffee photo's 'espresso'."""
    pydicom = pytest.importorskip("pydicom")
    from pydicom.data import get_testdata_file

    scan = pydicom.dcmread(get_testdata_file("JPEG2000.dcm")).pixel_array.astype(np.float64)
    lo, hi = np.percentile(scan, (0.5, 99.5))  # a viewer's window, as benchmarks/suites/answers_real_photos.py
    scan = np.clip((scan - lo) / max(hi - lo, 1e-9) * 255, 0, 255).astype(np.uint8)
    with KnowledgeBase.create(tmp_path / "kb") as base:
        base.add_image(_rgb(scan), doc_id="IMG_3000")
        base.add_image(_rgb(skimage_data.coffee()), doc_id="IMG_3001")
        base.commit()
        answer = Kira(base).ask("a cup of coffee", top_k=3).answer
    assert not answer.abstained
    assert answer.text.startswith("The closest match, IMG_3001,") and "'espresso'" in answer.text, answer.text


def test_equally_sure_matches_keep_retrieval_order(encoder):
    """r saturates near 1 and differs by 1e-6 between equally good matches: that noise must not reorder
    the evidence; within SUREST_TIE the first retrieved leads."""
    from kira.grounding.answer_relevance import relevant_first

    judge = RelevanceJudge(encoder, vocabulary=[c.name for c in imagenet_labels()])
    pack = EvidencePack.from_items("a cup of coffee", [_labelled(1, "espresso", 0.99), _labelled(2, "espresso", 0.995)])
    verdict = judge.judge("a cup of coffee", pack)
    assert verdict.best == 1
    assert relevant_first(pack, verdict)[0] is pack
