"""A question whose distinctive words no record holds, inside a domain, is answered by meaning only, and says so.

Real images: pydicom's test scans (CT, MR, ultrasound, nuclear medicine) with captions in an imaging archive's
style, every one of which says 'scan'. Before, "a scan of a fractured wrist" was answered with a caption about
another scan at full confidence: the relevance judge's everyday phrases stand far from every medical caption, so
each scan looked a clear match. And a head every record states ("CT scan") was a claim of its own, citing every
scan for the one finding it was joined to.
"""

from __future__ import annotations

import json

import pytest

from kira import Kira, KnowledgeBase
from kira.grounding.unheld_words import MIN_RECORDS
from kira.reasoning.relevance import LOW_CONFIDENCE, MEANING_ONLY
from scan_archive import SCANS, scan_archive, scan_id
from skimage_photos import CAPTIONS, captioned_kb, skimage_rgb

pytest.importorskip("pydicom")

@pytest.fixture(scope="module")
def archive(tmp_path_factory, kb_factory):
    kb = scan_archive(tmp_path_factory.mktemp("archive") / "kb", kb_factory)
    yield Kira(kb)
    kb.close()


def test_a_question_no_record_holds_a_word_of_opens_with_it_under_the_banner(archive):
    result = archive.ask("a scan of a fractured wrist", top_k=5)
    answer = result.answer
    assert not answer.abstained
    assert answer.text.startswith("No record in this knowledge base mentions 'fractured' or 'wrist'; what follows "
                                  "matches the question by meaning only."), answer.text
    assert answer.confidence is not None and answer.confidence <= MEANING_ONLY < LOW_CONFIDENCE
    assert result.trace["relevance"]["unheld"] == "fractured wrist"
    card = json.loads(result.card.to_json())
    assert card["notice"]["kind"] == "low"
    assert card["notice"]["text"].startswith("Low confidence (0.49): no record in this knowledge base mentions "
                                             "'fractured' or 'wrist'; the evidence below matches the question by "
                                             "meaning only"), card["notice"]
    from kira.explain.card import match_kind, match_label

    labels = [match_label(result.card, item) for item in result.evidence.items]
    assert labels[0].startswith("matches the question by meaning only") and match_kind(labels[0]) == "part"
    assert "matches the question by meaning only" in result.card.to_html()


def test_a_word_no_record_holds_is_quoted_as_the_question_wrote_it(archive):
    answer = archive.ask("an X-ray of the knee", top_k=5).answer  # holds no shared word: the best scan's text does
    assert answer.text.startswith("No record in this knowledge base mentions 'X-ray' or 'knee'"), answer.text


def test_a_question_some_record_answers_in_its_own_words_is_answered_as_before(archive):
    answer = archive.ask("a scan with a liver lesion", top_k=5).answer
    assert "No record" not in answer.text
    assert answer.text.startswith("MR scan: abdomen, a marked lesion in the liver [Evidence 1]"), answer.text
    assert answer.confidence is not None and answer.confidence >= LOW_CONFIDENCE


def test_a_head_every_record_states_cites_only_the_scans_stating_the_finding(archive):
    """'CT scan' was a claim of its own stated by both CT scans, outvoting every finding and cited for it."""
    result = archive.ask("a CT scan with a soft tissue window", top_k=5)
    assert result.answer.claims[0].text.startswith("CT scan: axial slice, soft tissue window [Evidence 1]")
    for claim in result.answer.claims:
        cited = {result.evidence.by_number(n).doc_id for n in claim.citations}
        for doc in cited:
            caption = next(c for f, c in SCANS.items() if scan_id(f) == doc)
            body = claim.text.split(" [")[0].split(": ", 1)[-1].lower()
            assert body in caption.lower(), (claim.text, doc, caption)


def test_a_yes_no_question_about_a_named_scan_says_its_record_does_not_mention_what_is_asked(archive):
    """"does <the bone scan> show a fracture?" was answered with the bone scan's caption alone, which matches
    'fracture' by meaning; a reader took it for a yes."""
    bone = scan_id("JPEG2000.dcm")
    result = archive.ask(f"does {bone} show a fracture?", top_k=5)
    assert result.answer.text.startswith(f"Nothing recorded about {bone} mentions 'fracture'. Nuclear medicine "
                                         "scan: whole body bone scan [Evidence 1]"), result.answer.text
    assert result.trace["yes_no"]["answer"] == "not mentioned"
    assert not result.evidence.similar and "Similar cases" not in result.answer.text  # no record has a fracture
    assert result.trace["similar_cases_off_topic"]
    liver = scan_id("examples_overlay.dcm")
    held = archive.ask(f"is there a lesion in {liver}?", top_k=5).answer.text
    assert held.startswith("MR scan: abdomen, a marked lesion in the liver [Evidence 1]"), held  # quoted, no opening


def test_a_similar_case_inside_a_domain_stays_when_some_record_holds_what_is_asked(archive):
    ct = scan_id("CT_small.dcm")
    result = archive.ask(f"does {ct} show an axial slice?", top_k=5)
    assert any("axial slice" in i.summary for i in result.evidence.similar), result.evidence.similar


def test_photos_of_different_things_share_no_word_and_a_paraphrase_is_answered_as_before(tmp_path):
    """Where records share no word the judge's scale holds: "a photographer with his equipment" finds the
    cameraman (no caption says 'photographer'), with no notice and no cap."""
    assert len(CAPTIONS) >= MIN_RECORDS
    with captioned_kb(tmp_path / "kb", CAPTIONS) as kb:
        answer = Kira(kb).ask("a photographer with his equipment", top_k=5).answer
    assert "No record" not in answer.text
    assert answer.text.startswith("Black and white photo of a man with a camera on a tripod"), answer.text
    assert answer.confidence is not None and answer.confidence >= LOW_CONFIDENCE
    # metadata every record carries alike (as the demo's {"demo": True}) says where they come from, not a domain
    with KnowledgeBase.create(tmp_path / "alike") as kb:
        for name, caption in CAPTIONS.items():
            kb.add_image(skimage_rgb(name), doc_id=name, caption=caption, metadata={"source": "archive"})
        kb.commit()
        alike = Kira(kb).ask("a photographer with his equipment", top_k=5).answer
    assert "No record" not in alike.text and alike.confidence is not None and alike.confidence >= LOW_CONFIDENCE
