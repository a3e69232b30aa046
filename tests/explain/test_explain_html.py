"""The HTML card as a person reads it (issue 34 item 17), on a card from real photos.

The answer box is styled apart from the question box; [Evidence N] markers link to their
evidence; no Python reprs or "None" reach the page; key/value tables keep each label beside
its value (auto width, not a full-width table); the hop chain names documents, not chunk ids.
benchmarks/studies/render_card.py renders the same cards and screenshots them with headless Chromium.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kira.explain.card import RationaleCard
from kira.explain.render_html import linked, readable, to_html
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack

skimage_data = pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")


def _card(confidence: float | None = 0.9, abstained: bool = False) -> RationaleCard:
    coffee = np.ascontiguousarray(skimage_data.coffee()[::4, ::4])
    prov = {"described_by": "captioner", "labels": [{"label": "espresso", "p": 0.9907}], "source": None,
            "chunk_id": 12, "parent_id": None, "image_size": (600, 400), "cosine": 0.61}
    summary = ("labels: espresso, espresso maker; A medium-brightness, high-contrast colour image (600x400, "
               "landscape) dominated by orange (54%); highly textured; 1 salient region: a large one at the centre (49%).")
    item = EvidenceItem(1, 12, "IMG_1001", "document", 0.031, ("visual", "text"), summary, prov, thumbnail=coffee)
    pack = EvidencePack.from_items("a cup of coffee", [item])
    text = "The closest match, IMG_1001, has no caption; the image classifier labels it 'espresso' (p 0.99) [Evidence 1]."
    answer = Answer(text, ("step",), (Claim(text, (1,), 0.6, 0.8, 0.7, False),), grounding=0.7, generator="template",
                    confidence=confidence, abstained=abstained)
    hops = [{"hop": 1, "ids": [12, 40], "confidence": 0.5, "documents": ["IMG_1001", "IMG_1002"]}]
    return RationaleCard("a cup of coffee", answer, pack, hops=hops, stop_reason="no_new",
                         timings={"encode": 3.25, "total": 40.0}, config={"levels": None, "top_k": 3})


def test_markers_link_to_their_evidence_and_the_answer_box_is_not_the_question_box():
    page = to_html(_card())
    assert "<a href=\"#evidence-1\">1</a>" in page and 'id="evidence-1"' in page
    assert "class='box question'" in page and "class='box answer'" in page
    css = page[page.index("<style>"):page.index("</style>")]
    assert re.search(r"\.question\{[^}]*background", css) and re.search(r"\.answer\{[^}]*border-left", css)


def test_no_python_reprs_and_what_the_photo_shows_comes_first():
    page = to_html(_card())
    assert "{'label'" not in page and "[{" not in page and ">None<" not in page and "None" not in page
    assert "espresso (p 0.99)" in page
    shows, looks = page.index("<b>Shows:</b>"), page.index("<b>Looks:</b>")
    assert shows < looks and "%" not in page[looks:looks + 200]


def test_tables_keep_labels_beside_values_and_hops_name_documents():
    page = to_html(_card())
    assert re.search(r"table\.kv\{width:auto\}", page)
    timings = page[page.index("<h2>Timings</h2>"):]
    assert timings.index("<table class='kv'>") < timings.index("encode")
    chain = page[page.index("hop chain"):page.index("stop reason")]
    assert "IMG_1001, IMG_1002" in chain and "12" not in chain and "40" not in chain


def test_low_confidence_and_no_match_open_the_page():
    low = to_html(_card(confidence=0.3))
    assert low.index("banner low") < low.index("<h2>Question</h2>") and "Low confidence (0.30)" in low
    assert "banner" not in to_html(_card(confidence=0.9)).split("<h2>Question</h2>")[0].split("<body>")[1]


def test_readable_and_linked_helpers():
    assert readable([{"label": "espresso", "p": 0.9907}]) == "espresso (p 0.99)"
    assert readable(None) == "" and readable((600, 400)) == "600 x 400"
    assert readable({"ward": "3", "note": None}) == "ward: 3"
    assert linked("A <b> [Evidence 1, 3].") == ('A &lt;b&gt; [Evidence <a href="#evidence-1">1</a>, '
                                               '<a href="#evidence-3">3</a>].')


def test_an_abstentions_confidence_says_what_it_is_the_confidence_of():
    from kira.explain.render_text import to_text

    nomatch, answered = _card(confidence=0.23, abstained=True), _card(confidence=0.9)
    for render in (to_html, to_text):
        assert "confidence that the closest item matches: 0.23" in render(nomatch)
        assert "confidence 0.90" in render(answered) and "closest item matches" not in render(answered)


def test_the_similar_cases_section_is_its_own_paragraph_in_the_answer_box():
    import dataclasses

    card = _card()
    text = card.answer.text + "\n\nSimilar cases (other subjects, for comparison only): A cat [Evidence 2]."
    page = to_html(dataclasses.replace(card, answer=dataclasses.replace(card.answer, text=text)))
    box = page[page.index("class='box answer'"):]
    box = box[:box.index("</div>")]
    assert box.count("<p>") == 2 and "</p><p>Similar cases (other subjects" in box
