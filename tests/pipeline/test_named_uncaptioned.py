"""A question that names uncaptioned photos is answered about each of them, by name.

"what does IMG_1005 show?" was answered "The closest match, IMG_1005, has no caption; ..." (it is no closest
match: it is what was asked about), and "compare IMG_1001 and IMG_1004" described IMG_1004 alone. Each document
the question names now gets its own sentence, led by its name (kira.reasoning.field_answer.NAMED).
"""

from __future__ import annotations

import pytest
from skimage_photos import captioned_kb

from kira.pipeline import Kira
from kira.reasoning.template_generator import TemplateGenerator
from kira.reasoning.types import EvidenceItem, EvidencePack

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")


@pytest.fixture(scope="module")
def kira(tmp_path_factory):
    base = captioned_kb(tmp_path_factory.mktemp("named_bare") / "kb", dict.fromkeys(
        ("coffee", "chelsea", "astronaut", "rocket", "camera")))
    yield Kira(base)
    base.close()


def test_a_named_uncaptioned_photo_is_described_by_its_name(kira):
    result = kira.ask("what does coffee show?", top_k=5)
    assert result.answer.text.startswith("coffee has no caption; the image classifier labels it"), result.answer.text
    assert "closest match" not in result.answer.text.split("\n\n")[0]


def test_two_named_uncaptioned_photos_each_get_a_sentence(kira):
    result = kira.ask("compare coffee and chelsea", top_k=6)
    subject = result.answer.text.split("\n\n")[0]
    assert "coffee has no caption" in subject and "chelsea has no caption" in subject, result.answer.text
    assert len(result.answer.claims) == 2
    assert {result.evidence.items[c.citations[0] - 1].doc_id for c in result.answer.claims} == {"coffee", "chelsea"}


def _item(number: int, doc: str, label: str, paths: tuple[str, ...]) -> EvidenceItem:
    return EvidenceItem(number, number, doc, "document", 1.0, paths, "", {"labels": [{"label": label, "p": 0.9}]})


def test_the_generator_names_each_named_document_once_and_the_closest_match_otherwise():
    named = ("visual", "identifier")
    pack = EvidencePack.from_items("q", [_item(0, "A", "tabby cat", named), _item(0, "A", "tabby cat", named),
                                         _item(0, "B", "espresso", named), _item(0, "C", "tripod", ("visual",))])
    answer = TemplateGenerator().generate("compare A and B", pack)
    assert answer.text == ("A has no caption; the image classifier labels it 'tabby cat' (p 0.90) [Evidence 1]. "
                           "B has no caption; the image classifier labels it 'espresso' (p 0.90) [Evidence 3].")
    plain = EvidencePack.from_items("q", [_item(0, "C", "tripod", ("visual",)), _item(0, "A", "tabby cat", named)])
    assert TemplateGenerator().generate("a tripod", plain).text.startswith("The closest match, C, has no caption")
