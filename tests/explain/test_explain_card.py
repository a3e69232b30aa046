"""Rationale cards: completeness, and the text / JSON / HTML renderings, with and without optional parts."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
from PIL import Image

from kira.explain.card import REQUIRED_FIELDS, RationaleCard, critic_summary
from kira.explain.render_html import thumbnail_png
from kira.explain.render_json import JSON_SCHEMA, SCHEMA_VERSION, validate
from kira.reasoning.critic import filter_by_probability
from kira.reasoning.template_generator import TemplateGenerator
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack

HOSTILE = '<script>alert("x")</script> & "quotes"'


def _full_card() -> RationaleCard:
    thumb = np.full((80, 120, 3), 200, np.uint8)
    items = [
        EvidenceItem(0, 7, "cxr-001", "region", 0.91, ("visual", "fine"), f"opacity, right lower lobe {HOSTILE}",
                     {"caption": "pneumonia", "image_size": (240, 160), "tags": ["a", "b"]},
                     box=(120, 80, 240, 160), thumbnail=thumb),
        EvidenceItem(0, 9, "cxr-002", "document", 0.40, ("text", "hop2"), "pneumonia, follow-up",
                     {"caption": "pneumonia"}),
    ]
    dropped = [EvidenceItem(0, 3, "sch-1", "document", 0.1, ("text",), "a circuit")]
    decision = filter_by_probability([*items, *dropped], [0.9, 0.6, 0.02], 0.1)
    pack = EvidencePack.from_items(HOSTILE, decision.kept, dropped=decision.dropped)
    answer = TemplateGenerator().generate(HOSTILE, pack)
    claims = tuple(Claim(c.text, c.citations, 0.8, 0.9, 0.85, False) for c in answer.claims)
    bad = Claim(f"{HOSTILE} [Evidence 2].", (2,), 0.0, 0.1, 0.05, True)
    answer = Answer(answer.text, answer.reasoning, (*claims, bad), grounding=0.45, generator="template")
    return RationaleCard(
        question=HOSTILE, answer=answer, pack=pack, variant="full", query_image=np.zeros((30, 40, 3), np.uint8),
        expansions=["hypothesis: pneumonia", "concept: consolidation"],
        hops=[{"hop": 1, "ids": [7, 9], "confidence": 0.7}, {"hop": 2, "ids": [9], "confidence": 0.88}],
        stop_reason="confidence", critic=critic_summary(decision),
        timings={"retrieve": 1.5, "generate": 0.2}, config={"top_k": 5, "alpha": 0.6},
    )


def _bare_card() -> RationaleCard:
    pack = EvidencePack("")
    return RationaleCard(question=None, answer=TemplateGenerator().generate("", pack), pack=pack)


def test_a_full_card_is_complete_and_a_bare_one_is_not() -> None:
    assert _full_card().completeness() == 1.0 and _full_card().missing_fields() == []
    bare = _bare_card()
    assert set(bare.missing_fields()) == set(REQUIRED_FIELDS) - {"answer", "reasoning"}
    assert bare.completeness() == pytest.approx(2 / len(REQUIRED_FIELDS))


def test_each_field_counts() -> None:
    card = _full_card()
    card.hops = []
    assert card.missing_fields() == ["hop_chain"]
    card = _full_card()
    card.answer = Answer(card.answer.text, card.answer.reasoning, (Claim("x", (1,)),))
    assert card.missing_fields() == ["grounding"]
    card = _full_card()
    card.question, card.query_image = "", None
    assert card.missing_fields() == ["query"]


@pytest.mark.parametrize("make", [_full_card, _bare_card])
def test_json_follows_the_documented_schema(make) -> None:
    card = make()
    data = json.loads(card.to_json())
    assert validate(data) == []
    assert data["schema_version"] == SCHEMA_VERSION
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.validate(data, JSON_SCHEMA)


def test_json_content_of_a_full_card() -> None:
    data = _full_card().to_dict()
    assert [e["number"] for e in data["evidence"]] == [1, 2] and data["evidence"][0]["box"] == [120, 80, 240, 160]
    assert data["dropped"][0]["doc_id"] == "sch-1"
    assert data["critic"]["kept"] == [7, 9] and data["critic"]["dropped"] == [3]
    assert data["answer"]["claims"][-1]["hallucination_risk"] is True
    assert data["hops"][1] == {"hop": 2, "ids": [9], "confidence": 0.88}
    assert data["has_query_image"] is True and data["completeness"] == 1.0
    assert data["evidence"][0]["provenance"]["image_size"] == [240, 160]


def test_validator_reports_problems() -> None:
    data = _full_card().to_dict()
    del data["answer"]["claims"][0]["grounding"]
    data["evidence"][0]["level"] = "page"
    data["timings_ms"]["x"] = "slow"
    errors = validate(data)
    assert any("grounding" in e for e in errors) and any("page" in e for e in errors)
    assert any("timings_ms.x" in e for e in errors)


def test_text_card_shows_every_part() -> None:
    text = _full_card().to_text()
    for needle in ("[Evidence 1]", "HALLUCINATION RISK", "hop 2: 1 chunk confidence", "Stopped because: confidence",
                   "Critic: kept 2 (7, 9), dropped 1 (3)", "Dropped by the critic (1)", "retrieve 1.50",
                   "concept: consolidation", "Completeness: 1.00"):
        assert needle in text
    bare = _bare_card().to_text()
    assert "Evidence (0):" in bare and "(none)" in bare


def test_html_is_self_contained_and_escapes_user_text() -> None:
    page = _full_card().to_html()
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>")
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert not re.search(r"(src|href)=['\"](?!data:|#)", page)  # nothing fetched from outside (#: links within)
    assert page.count("data:image/png;base64,") == 2  # query image + the one evidence thumbnail
    for needle in ("hallucination risk", "hop 2", "threshold 0.1", "retrieve", "Dropped by the critic"):
        assert needle in page
    bare = _bare_card().to_html()
    assert "no evidence" in bare and "not run" in bare and "data:image" not in bare


def _decode(uri: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))


def test_thumbnails_have_the_region_box_drawn_in_thumbnail_coordinates() -> None:
    image = np.full((80, 120, 3), 200, np.uint8)
    # box given in a 240x160 original -> the right-bottom quarter of the 120x80 thumbnail
    pixels = _decode(thumbnail_png(image, (120, 80, 240, 160), image_size=(240, 160)))
    assert pixels.shape == (80, 120, 3)
    red = (pixels[..., 0] > 230) & (pixels[..., 1] < 80)
    ys, xs = np.nonzero(red)
    assert xs.min() == 60 and ys.min() == 40 and xs.max() == 119 and ys.max() == 79
    assert not red[:38, :].any() and not red[:, :58].any()
    big = _decode(thumbnail_png(np.zeros((400, 200, 3), np.uint8)))
    assert max(big.shape[:2]) == 160
    with pytest.raises(ValueError, match="uint8"):
        thumbnail_png(np.zeros((4, 4), np.uint8))


def test_card_accepts_raw_pipeline_objects() -> None:
    class Hop:  # the core's Hop shape
        ids = np.array([4, 2, -1], np.int64)
        confidence = np.float32(0.5)

    pack = EvidencePack.from_items("q", [EvidenceItem(0, 4, "d", "document", 1.0, ("visual",), "s")])
    decision = filter_by_probability(list(pack.items), [0.05], 0.1)
    card = RationaleCard("q", TemplateGenerator().generate("q", pack), pack, hops=[Hop()], critic=decision,
                         stop_reason="max_hops")
    assert card.hops == [{"ids": [4, 2], "confidence": 0.5, "hop": 1}]
    assert card.critic is not None and card.critic["fallback"] is True and card.critic["kept"] == [4]
    assert validate(card.to_dict()) == []
    assert "kept the retrieval's first item" in card.to_text() and "first item" in card.to_html()
    with pytest.raises(ValueError, match="query_image"):
        RationaleCard("q", card.answer, pack, query_image=np.zeros((4, 4), np.uint8))


def test_dropped_items_are_numbered_apart_from_the_evidence() -> None:
    card = _full_card()
    assert [i.number for i in card.pack.items] == [1, 2]
    for page in (card.to_text(), card.to_html()):
        assert "[Dropped 1]" in page
        assert page.count("[Evidence 3]") == 0  # no evidence number a dropped item could be mistaken for
    text = card.to_text()
    dropped_line = next(line for line in text.splitlines() if "[Dropped 1]" in line)
    assert "sch-1" in dropped_line and "[Evidence" not in dropped_line


def test_the_answer_and_evidence_lead_and_diagnostics_follow() -> None:
    card = _full_card()
    text = card.to_text()
    assert text.index("Answer:") < text.index("Evidence (2):") < text.index("DIAGNOSTICS") < text.index("s_sim=")
    assert text.index("DIAGNOSTICS") < text.index("fused=0.910") and "fused" not in text[: text.index("DIAGNOSTICS")]
    page = card.to_html()
    assert page.index("<h2>Answer</h2>") < page.index("data:image/png", page.index("<h2>Answer</h2>")) \
        < page.index("Diagnostics") < page.index("<h2>Claims</h2>")
    assert page.index("score 0.910") > page.index("<details>")  # scores folded under the evidence


def test_a_huge_summary_is_cut_on_the_card() -> None:
    from kira.explain.render_text import MAX_SUMMARY_CHARS

    item = EvidenceItem(0, 5, "big", "document", 0.5, ("visual",), "harbour " * 200_000, {"source": "y" * 50_000})
    pack = EvidencePack.from_items("q", [item])
    card = RationaleCard(question="q", answer=Answer("A harbour [Evidence 1].", ()), pack=pack)
    text, page = card.to_text(), card.to_html()
    line = next(ln for ln in text.splitlines() if ln.startswith("  [Evidence 1] big:"))
    assert line.endswith("more characters)") and len(line) < MAX_SUMMARY_CHARS + 100
    assert "more characters)" in page and "harbour " * 100 not in page and "y" * (MAX_SUMMARY_CHARS + 1) not in page
    assert len(text) < 10 * MAX_SUMMARY_CHARS and len(page) < 20 * MAX_SUMMARY_CHARS


def test_match_labels_say_whether_each_item_answers_and_bad_matches_are_refused() -> None:
    import dataclasses

    from kira.explain.card import match_kind, match_label

    card = dataclasses.replace(_full_card(), query_image=None)
    first, second = card.pack.items
    assert match_label(card, first) == "" and card.to_dict()["evidence"][0]["match"] is None  # nothing judged
    judged = dataclasses.replace(card, matches={1: 0.9}, near=())
    assert match_label(judged, first) == "matches the question 0.90" and match_kind(match_label(judged, first)) == "yes"
    assert match_label(judged, second) == "not judged: nothing recorded says what it shows"
    low = dataclasses.replace(card, matches={1: 0.2, 2: 0.31}, near=(2,))
    assert match_label(low, first) == "does not match the question"
    assert match_label(low, second) == "partly matches the question (0.31: a classifier label near it)"
    assert "[Evidence 2] cxr-002 (partly matches the question" in low.to_text()
    assert "<span class='match part'>partly matches" in low.to_html()
    assert [e["match"] for e in low.to_dict()["evidence"]] == [0.2, 0.31] and validate(low.to_dict()) == []
    for bad in ({1: 1.5}, {1: float("nan")}):
        with pytest.raises(ValueError, match="matches must be in"):
            dataclasses.replace(card, matches=bad)


def test_for_a_query_image_the_card_says_which_item_it_shows_and_how_alike_the_rest_look() -> None:
    import dataclasses

    from kira.explain.card import match_label

    card = _full_card()  # a query image, no relevance verdict
    shown_item = dataclasses.replace(card.pack.items[0], paths=("visual", "clear_match"))
    alike = dataclasses.replace(card.pack.items[1], provenance={"cosine": 0.6123})
    assert match_label(card, shown_item) == "the query image shows this image (a copy, crop or mirror)"
    assert match_label(card, alike) == "looks like the query image (cosine 0.61)"
    assert match_label(card, card.pack.items[1]) == ""  # nothing measured: nothing said
