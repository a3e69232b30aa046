"""Agreement across the views of one multiview set: worded only when every view that counts states the claim."""

from __future__ import annotations

from report_profile import REPORT_PROFILE


import pytest

from kira.reasoning.template_generator import TemplateGenerator
from kira.reasoning.types import EvidenceItem, EvidencePack
from kira.reasoning.view_agreement import ViewAgreement, agreeing_views, asks_agreement

HEART = "Enlarged cardiac silhouette, cardiothoracic ratio about 0.65"


def _film(doc: str, score: float, caption: str, views: str | None = "P007-views") -> EvidenceItem:
    prov = {"caption": caption, "compound": "P007"}
    if views:
        prov["views"] = views
    return EvidenceItem(0, 0, doc, "document", score, ("visual",), caption, prov)


def _answer(question: str, items: list[EvidenceItem]):
    return TemplateGenerator(profile=REPORT_PROFILE).generate(question, EvidencePack.from_items(question, items))


TOGETHER = "Patient P007 had PA and lateral views at the baseline study: what do the two views together show?"


def test_two_named_views_that_state_the_claim_are_worded_as_agreeing():
    answer = _answer(TOGETHER, [
        _film("P007-lat-t0", 0.95, f"lateral chest radiograph, patient P007, study 1. {HEART}."),
        _film("P007-pa-t1", 0.90, f"PA chest radiograph, patient P007, study 2, follow-up. {HEART}.", views=None),
        _film("P007-pa-t0", 0.85, f"PA chest radiograph, patient P007, study 1. {HEART}."),
    ])
    assert answer.claims[0].text.startswith("PA and lateral views each show enlarged cardiac silhouette")
    assert {1, 3} <= set(answer.claims[0].citations)  # both views are cited
    assert any("views of one multiview set (P007-views), each state" in t for t in answer.reasoning)


def test_a_named_view_that_states_only_bookkeeping_is_not_claimed_to_agree():
    question = "Do fields 1 and 3 of slide S020 agree, and what is the diagnosis for the slide?"
    answer = _answer(question, [
        _film("S020-f2", 0.95, "H&E section, slide S020, field 2, colon, 40x. Large pleomorphic nuclei in sheets."),
        _film("S020-f1", 0.90, "H&E section, slide S020, field 1, colon, 40x. Scanned 2024, case 1384."),
        _film("S020-f3", 0.85, "H&E section, slide S020, field 3, colon, 40x. Large pleomorphic nuclei in sheets."),
    ])
    assert answer.text == "Large pleomorphic nuclei in sheets [Evidence 1, 3]."
    trace = "\n".join(answer.reasoning)
    assert "[Evidence 2] do(es) not state" in trace and "does not say they agree" in trace


def test_a_yes_no_question_gets_yes_and_its_own_words_for_the_views():
    question = "Do fields 1 and 3 of slide S020 agree, and what is the diagnosis for the slide?"
    answer = _answer(question, [
        _film("S020-f3", 0.95, "H&E section, slide S020, field 3, colon, 40x. Large pleomorphic nuclei in sheets."),
        _film("S020-f2", 0.93, "H&E section, slide S020, field 2, colon, 40x. Small round nuclei in glands."),
        _film("S020-f1", 0.90, "H&E section, slide S020, field 1, colon, 40x. Large pleomorphic nuclei in sheets."),
    ])
    # field 2 disagrees, but the question asks about fields 1 and 3 only
    assert answer.claims[0].text.startswith("Yes, they agree: fields 1 and 3 each show large pleomorphic nuclei in sheets")
    assert set(answer.claims[0].citations) == {1, 3}


def test_views_that_state_different_findings_do_not_agree():
    answer = _answer(TOGETHER, [
        _film("P007-pa-t0", 0.95, f"PA chest radiograph, patient P007, study 1. {HEART}."),
        _film("P007-lat-t0", 0.90, "lateral chest radiograph, patient P007, study 1. Blunted costophrenic angle."),
    ])
    assert "each show" not in answer.text
    assert any("do(es) not state" in t for t in answer.reasoning)


def test_unnamed_views_count_when_they_all_state_the_claim():
    question = "What do the views of patient P007 show together?"
    items = [_film(f"P007-v{i}", 0.9 - i / 10, f"Radiograph {i}, patient P007. {HEART}.") for i in range(3)]
    assert _answer(question, items).claims[0].text.startswith("The 3 views each show enlarged cardiac silhouette")


def test_no_multiview_evidence_and_other_questions_are_left_as_they_were():
    films = [
        _film("P007-pa-t0", 0.95, f"PA chest radiograph, patient P007, study 1. {HEART}."),
        _film("P007-lat-t0", 0.90, f"lateral chest radiograph, patient P007, study 1. {HEART}."),
    ]
    plain = [_film(i.doc_id, i.score, i.provenance["caption"], views=None) for i in films]
    assert _answer(TOGETHER, plain).text.startswith("Enlarged cardiac silhouette")
    assert any("no two views" in t for t in _answer(TOGETHER, plain).reasoning)
    assert _answer("What does patient P007's film show?", films).text.startswith("Enlarged cardiac silhouette")


@pytest.mark.parametrize(("question", "expected"), [
    ("What do the two views together show?", True),
    ("Do fields 1 and 3 agree?", True),
    ("Are both films abnormal?", True),
    ("What does this radiograph show?", False),
    ("How has it changed since the baseline?", False),
])
def test_asks_agreement(question, expected):
    assert asks_agreement(question) is expected


def test_lead_wording():
    items = tuple(_film(f"d{i}", 1.0, "x") for i in range(3))
    assert ViewAgreement("s", items[:2], phrase="PA and lateral views").lead() == "PA and lateral views each show"
    assert ViewAgreement("s", items, yes_no=True).lead() == "Yes, they agree: the 3 views each show"
    assert ViewAgreement("s", items[:2]).word("RC low-pass filter") == "The 2 views each show RC low-pass filter"
    assert ViewAgreement("s", items[:2], missing=items[1:2]).agrees is False


def test_names_far_apart_in_the_question_give_no_phrase():
    items = [
        _film("a", 0.9, "PA chest radiograph, patient P007. Clear lungs."),
        _film("b", 0.8, "lateral chest radiograph, patient P007. Clear lungs."),
    ]
    question = "Is the PA film of patient P007, taken in the morning before the other one, agreeing with the lateral?"
    got = agreeing_views(question, items, items, items, lambda i: i.provenance["caption"].split(". ")[0])
    assert got is not None and got.agrees and got.phrase == ""
