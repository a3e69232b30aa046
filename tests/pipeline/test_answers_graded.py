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
