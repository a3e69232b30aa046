"""The deterministic template generator: score-weighted vote, reasoning trace, citations only from the pack."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kira.reasoning.template_generator import NO_EVIDENCE_TEXT, TemplateGenerator, label_of
from kira.reasoning.types import EvidenceItem, EvidencePack


def _item(n: int, doc: str, score: float, caption: str | None = None, summary: str = "", **kw) -> EvidenceItem:
    prov = {"caption": caption} if caption else {}
    return EvidenceItem(n, 100 + n, doc, kw.pop("level", "document"), score, ("visual",), summary or (caption or ""), prov, **kw)


def test_answers_with_the_score_weighted_majority_and_cites_its_evidence() -> None:
    pack = EvidencePack.from_items(
        "which condition?",
        [
            _item(0, "a", 0.90, "chest x-ray showing pneumonia"),
            _item(0, "b", 0.85, "normal chest x-ray"),
            _item(0, "c", 0.60, "chest x-ray showing pneumonia"),
            _item(0, "d", 0.30, "normal chest x-ray"),
        ],
    )
    answer = TemplateGenerator().generate("which condition?", pack)
    assert answer.text == "Chest x-ray showing pneumonia [Evidence 1, 3]."
    assert answer.plain_text == "Chest x-ray showing pneumonia."
    assert answer.citations == (1, 3) and len(answer.claims) == 1
    trace = "\n".join(answer.reasoning)
    assert "Conflict" in trace and "normal chest x-ray" in trace and "Agreement" in trace


def test_many_patches_of_one_document_do_not_outvote_several_documents() -> None:
    patches = [_item(0, "big", 0.5, "a forest", level="patch") for _ in range(4)]
    others = [_item(0, "w1", 0.45, "a lake"), _item(0, "w2", 0.44, "a lake")]
    pack = EvidencePack.from_items("q", [*patches, *others])
    assert TemplateGenerator().generate("q", pack).plain_text == "A lake."


def test_label_sources_in_order() -> None:
    assert label_of(EvidenceItem(1, 1, "d", "document", 1.0, (), "summary head; brightness 0.4", {"label": "L"})) == "L"
    assert label_of(EvidenceItem(1, 1, "d", "document", 1.0, (), "summary head; brightness 0.4")) == "summary head"
    assert label_of(EvidenceItem(1, 1, "d", "document", 1.0, (), "", {"tags": ["a", "b"]})) == "a, b"
    assert label_of(EvidenceItem(1, 1, "doc9", "document", 1.0, ())) == "doc9"


def test_full_detail_adds_attribute_and_alternative_claims_with_their_own_citations() -> None:
    pack = EvidencePack.from_items(
        "q",
        [
            _item(0, "a", 0.9, "rc low-pass filter", summary="rc low-pass filter; cutoff 1 kHz"),
            _item(0, "b", 0.2, "555 oscillator"),
        ],
    )
    answer = TemplateGenerator(detail="full").generate("q", pack)
    assert [c.citations for c in answer.claims] == [(1,), (1,), (2,)]
    assert "cutoff 1 kHz" in answer.claims[1].text and "555 oscillator" in answer.claims[2].text


def test_empty_pack_says_so_and_makes_no_claims() -> None:
    answer = TemplateGenerator().generate("anything?", EvidencePack("anything?"))
    assert answer.text == NO_EVIDENCE_TEXT and answer.claims == () and answer.citations == ()
    assert any("No evidence" in step for step in answer.reasoning)


def test_non_positive_scores_fall_back_to_rank_weights() -> None:
    pack = EvidencePack.from_items("q", [_item(0, "a", -0.1, "first"), _item(0, "b", -0.5, "second")])
    assert TemplateGenerator().generate("q", pack).plain_text == "First."


_captions = st.sampled_from(["cat", "dog", "lake", "forest", "pneumonia", ""])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_captions, st.floats(-1, 1, allow_nan=False), st.integers(0, 3)), min_size=0, max_size=8),
    st.lists(st.integers(1, 40), min_size=0, max_size=8, unique=True),
)
def test_cites_only_numbers_in_the_pack_and_is_deterministic(rows, numbers) -> None:
    items = [
        EvidenceItem(n, i, f"doc{d}", "region", s, ("text",), c, {"caption": c} if c else {})
        for i, ((c, s, d), n) in enumerate(zip(rows, numbers))
    ]
    pack = EvidencePack("q", tuple(items))
    generator = TemplateGenerator(detail="full")
    answer = generator.generate("q", pack)
    assert set(answer.citations) <= set(pack.numbers)
    assert all(c.citations for c in answer.claims)
    assert bool(answer.claims) == bool(items)
    assert generator.generate("q", pack) == answer
