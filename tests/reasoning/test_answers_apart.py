"""Evidence about a kind of thing is many subjects: another one that answers the question is said, not outvoted.

"which photos show a cup?" on scikit-image's captioned photos found the coffee photo ("a cup of coffee on a
saucer") and a desk photo ("a cat beside a cup of tea on a wooden desk"), both clear matches, and answered
with the coffee cup alone: the consensus took the desk photo's caption for a rival reading and reported it
"outweighed". With no subject, each document is its own subject, so a statement of another subject (witness)
whose item clearly matches the question (r >= CLEAR_MATCH) and that holds every question word the first claim
holds is said after it, up to `max_claims` - 1 (kira.reasoning.statement_votes.answers_apart).
A statement that matches only the question's domain words (a normal film for "films showing cardiomegaly"),
evidence about one subject, a comparison, an image query (no match measured) and a near miss keep the
consensus. Photos known only by labels: "The closest match, IMG_1001, ... Another match, IMG_1005, ...".
"""

from __future__ import annotations

import pytest

from kira.reasoning.template_generator import TemplateGenerator
from kira.reasoning.types import EvidenceItem, EvidencePack

CUP = "which photos show a cup?"


def _captioned(n: int, doc: str, score: float, caption: str) -> EvidenceItem:
    return EvidenceItem(n, 100 + n, doc, "document", score, ("text",), caption, {"caption": caption})


def _labelled(n: int, doc: str, label: str, p: float) -> EvidenceItem:
    return EvidenceItem(n, 100 + n, doc, "document", 1.0 - n / 10, ("text",), "",
                        {"described_by": "captioner", "labels": [{"label": label, "p": p}]})


def _cups(matches: dict[int, float] | None = None, **kw) -> EvidencePack:
    items = (_captioned(1, "coffee", 1.0, "A cup of coffee on a saucer with a spoon."),
             _captioned(2, "clock", 0.95, "A wall clock photographed at an angle."),
             _captioned(3, "desk", 0.9, "A cat beside a cup of tea on a wooden desk."),
             _captioned(4, "mug", 0.85, "A cup of cocoa in a mug."))
    return EvidencePack(CUP, items, matches=matches if matches is not None else {1: 0.9, 2: 0.29, 3: 0.9, 4: 0.6},
                        **kw)


def test_another_subject_that_clearly_matches_is_said_after_the_first():
    answer = TemplateGenerator().generate(CUP, _cups())
    assert [c.text for c in answer.claims] == ["A cup of coffee on a saucer with a spoon [Evidence 1].",
                                               "A cat beside a cup of tea on a wooden desk [Evidence 3]."]
    assert any("Another subject answers the question too" in step for step in answer.reasoning)


def test_one_subjects_evidence_a_near_miss_or_no_measured_match_keeps_the_consensus():
    assert len(TemplateGenerator().generate(CUP, _cups(subject="kitchen")).claims) == 1  # one subject's readings
    assert len(TemplateGenerator().generate(CUP, _cups({})).claims) == 1  # an image query: no match measured
    assert len(TemplateGenerator().generate(CUP, _cups({1: 0.9, 2: 0.29, 3: 0.6, 4: 0.6})).claims) == 1  # near
    every = _cups({1: 0.9, 2: 0.9, 3: 0.9, 4: 0.9})
    assert len(TemplateGenerator().generate(CUP, every).claims) == 2  # at most max_claims - 1 said apart
    texts = [c.text for c in TemplateGenerator(max_claims=4).generate(CUP, every).claims]
    assert len(texts) == 3 and not any("clock" in t for t in texts), texts  # the clock holds no 'cup'


def test_a_statement_that_matches_only_the_questions_domain_words_is_no_answer_of_its_own():
    question = "Find chest films showing cardiomegaly."
    items = (_captioned(1, "P1", 1.0, "Chest film: cardiomegaly, enlarged cardiac silhouette."),
             _captioned(2, "P2", 0.9, "Chest film: clear lungs, normal cardiomediastinal silhouette."))
    answer = TemplateGenerator().generate(question, EvidencePack(question, items, matches={1: 0.99, 2: 0.95}))
    assert "clear lungs" not in answer.text.lower(), answer.text


def test_a_statement_sharing_another_word_of_the_question_than_the_first_is_no_answer_of_its_own():
    question = "Which schematics show an oscillator with positive feedback?"
    items = (_captioned(1, "C7", 1.0, "RC phase-shift oscillator."),
             _captioned(2, "C4", 0.9, "Non-inverting op-amp amplifier with negative feedback."),
             _captioned(3, "C9", 0.8, "Wien bridge oscillator."))
    answer = TemplateGenerator().generate(question, EvidencePack(question, items, matches={1: 0.99, 2: 0.95, 3: 0.9}))
    assert [c.text for c in answer.claims] == ["RC phase-shift oscillator [Evidence 1].",
                                               "Wien bridge oscillator [Evidence 3]."], answer.text


def _views(second_of: str) -> EvidencePack:
    items = [_captioned(1, "P1-pa", 1.0, "Right lower lobe opacity."),
             _captioned(2, "P1-lat", 0.9, "Patchy opacity behind the heart.")]
    items = [EvidenceItem(i.number, i.chunk_id, i.doc_id, i.level, i.score, i.paths, i.summary,
                          {**i.provenance, "compound": c}) for i, c in zip(items, ("multiview:P1", second_of))]
    return EvidencePack("find opacity", tuple(items), matches={1: 0.99, 2: 0.99})


def test_views_of_one_compound_document_are_one_subject_not_two_answers():
    same = TemplateGenerator().generate("find opacity", _views("multiview:P1")).claims  # P1's lateral view is P1
    assert [c.text for c in same] == ["Right lower lobe opacity [Evidence 1]."], same
    other = TemplateGenerator().generate("find opacity", _views("multiview:P2")).claims  # another subject answers
    assert [c.text for c in other] == ["Right lower lobe opacity [Evidence 1].",
                                       "Patchy opacity behind the heart [Evidence 2]."], other


def test_photos_known_only_by_labels_that_clearly_match_are_each_named():
    items = (_labelled(1, "IMG_1001", "Egyptian cat", 0.75), _labelled(2, "IMG_1005", "tabby cat", 0.6),
             _labelled(3, "IMG_1000", "espresso", 0.99))
    pack = EvidencePack("a cat", items, matches={1: 0.99, 2: 0.95, 3: 0.02})
    answer = TemplateGenerator().generate("a cat", pack)
    assert answer.text == ("The closest match, IMG_1001, has no caption; the image classifier labels it 'Egyptian cat' "
                           "(p 0.75) [Evidence 1]. Another match, IMG_1005, has no caption; the image classifier "
                           "labels it 'tabby cat' (p 0.60) [Evidence 2].")
    unsure = (*items[:1], _labelled(2, "IMG_1012", "tiger cat", 0.38), items[2])  # a clear match, an unsure label
    assert len(TemplateGenerator().generate("a cat", EvidencePack("a cat", unsure, matches={1: 0.99, 2: 0.95})).claims) == 1
    weak = EvidencePack("a cat", items, matches={1: 0.6, 2: 0.95, 3: 0.02})  # the first only just matches
    assert len(TemplateGenerator().generate("a cat", weak).claims) == 1
    assert len(TemplateGenerator().generate("a cat", EvidencePack("a cat", items, matches={1: 0.99, 2: 0.95},
                                                                  subject="1001")).claims) == 1


@pytest.fixture(scope="module")
def two_cats(tmp_path_factory):
    pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")
    from skimage_photos import skimage_rgb

    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    kb = KnowledgeBase.create(tmp_path_factory.mktemp("apart") / "kb")
    for n, name in enumerate(("coffee", "chelsea", "rocket", "astronaut", "camera")):
        kb.add_image(skimage_rgb(name), doc_id=f"IMG_{1000 + n}")
    kb.add_image(skimage_rgb("chelsea")[30:280, 120:420], doc_id="IMG_1005")  # a second photo of a cat
    kb.commit()
    yield Kira(kb)
    kb.close()


def test_a_question_two_uncaptioned_photos_answer_names_both(two_cats):
    result = two_cats.ask("a cat", top_k=5, variant="full")
    text = result.answer.text
    assert text.startswith("The closest match, IMG_100"), text
    assert "Another match, IMG_100" in text and {"IMG_1001", "IMG_1005"} <= set(text.replace(",", " ").split()), text
    assert "espresso" not in text
