"""A temporal subject is answered in order, each member from its own evidence (kira.reasoning.sequence_answer).

Before: the demo's "Show me a low-pass filter schematic and how it was revised" was answered "Revised
schematic: two-stage RC low-pass filter with ground [Evidence 1, 4]." The first revision's evidence was
'outweighed' as if it were a rival reading, though it is the same design at an earlier time.
"""

from __future__ import annotations

from kira.reasoning.sequence_answer import sequence_in_evidence
from kira.reasoning.template_generator import TemplateGenerator
from kira.reasoning.types import Claim, EvidenceItem, EvidencePack
from kira.reasoning.verifier import GroundingVerifier

REV1 = "circuit schematic of an RC low-pass filter: 1k resistor, 100n capacitor"
REV2 = "revised schematic: two-stage RC low-pass filter with ground"


def _item(doc: str, caption: str, score: float, place: int | None, of: int = 2, *, level: str = "document",
          paths: tuple[str, ...] = ("visual",), sequence: str = "rc-filter-design") -> EvidenceItem:
    prov: dict = {"caption": caption}
    if place is not None:
        prov["sequence"] = {"id": sequence, "place": place, "of": of}
    return EvidenceItem(0, hash((doc, level)) % 10_000, doc, level, score, paths, caption, prov)


def _pack(question: str, items: list[EvidenceItem], subject: str = "rc-filter-design") -> EvidencePack:
    return EvidencePack.from_items(question, items, subject=subject)


def test_each_revision_is_stated_in_sequence_order_citing_its_own_evidence() -> None:
    q = "show me a low-pass filter schematic and how it was revised"
    pack = _pack(q, [_item("rev2", REV2, 1.0, 2), _item("rev1", REV1, 0.98, 1),
                     _item("rev1", REV1, 0.93, 1, level="region"), _item("rev2", REV2, 0.88, 2, level="region")])
    answer = TemplateGenerator().generate(q, pack)
    first, second = answer.claims
    # the earlier revision first although the later one scored higher, each led by its id and place
    assert first.text == ("rev1 (rc-filter-design, 1 of 2): Circuit schematic of an RC low-pass filter: "
                          "1k resistor, 100n capacitor [Evidence 2, 3].")
    assert second.text == ("rev2 (rc-filter-design, 2 of 2): Revised schematic: two-stage RC low-pass filter "
                           "with ground [Evidence 1, 4].")
    assert first.lead == "rev1 (rc-filter-design, 1 of 2)" and second.lead == "rev2 (rc-filter-design, 2 of 2)"
    assert first.statement.startswith("Circuit schematic") and answer.text == f"{first.text} {second.text}"
    assert any("temporal sequence rc-filter-design" in step for step in answer.reasoning)


def test_members_that_state_the_same_are_answered_once_by_the_consensus() -> None:
    q = "what does the design show?"
    pack = _pack(q, [_item("rev2", REV1, 1.0, 2), _item("rev1", REV1, 0.9, 1)])
    answer = TemplateGenerator().generate(q, pack)
    assert answer.text == "Circuit schematic of an RC low-pass filter: 1k resistor, 100n capacitor [Evidence 1, 2]."
    assert not any("temporal sequence" in step for step in answer.reasoning)


def test_a_question_naming_one_member_alone_is_answered_about_it() -> None:
    q = "what does rev1 show?"
    items = [_item("rev1", REV1, 1.0, 1, paths=("identifier",)), _item("rev2", REV2, 0.9, 2)]
    assert sequence_in_evidence(EvidencePack.from_items(q, items).items) is None
    answer = TemplateGenerator().generate(q, _pack(q, items))
    assert answer.claims[0].text.startswith("Circuit schematic") and not answer.claims[0].lead


def test_a_subject_that_is_more_than_the_sequence_gets_the_consensus() -> None:
    """A film's lateral view, or a second series, would go unsaid in an answer that lists one sequence."""
    items = [_item("rev2", REV2, 1.0, 2), _item("rev1", REV1, 0.95, 1), _item("lat", "a side view", 0.9, None)]
    assert sequence_in_evidence(EvidencePack.from_items("q", items).items) is None
    items = [_item("rev2", REV2, 1.0, 2), _item("rev1", REV1, 0.95, 1),
             _item("x1", "another design", 0.9, 1, sequence="other-design")]
    assert sequence_in_evidence(EvidencePack.from_items("q", items).items) is None
    answer = TemplateGenerator().generate("q", _pack("q", items))
    assert not any(c.lead for c in answer.claims)
    # not the first item's: an unrelated sequence's members do not make the answer ordered
    items = [_item("other", "an op-amp amplifier", 1.0, None), _item("rev1", REV1, 0.9, 1), _item("rev2", REV2, 0.8, 2)]
    assert sequence_in_evidence(EvidencePack.from_items("q", items).items) is None


def test_a_long_sequence_keeps_the_first_members_and_the_last() -> None:
    items = [_item(f"visit{p}", f"finding number {p} of the series", 1.0 - p / 100, p, of=9, sequence="patient")
             for p in (9, 1, 2, 3, 4, 5, 6)]
    seq = sequence_in_evidence(EvidencePack.from_items("q", items).items, max_members=4)
    assert [m.doc_id for m in seq.members] == ["visit1", "visit2", "visit3", "visit9"]
    assert seq.length == 9 and seq.place(seq.members[-1]) == "(patient, 9 of 9)"
    answer = TemplateGenerator(max_citations=4).generate("q", EvidencePack.from_items("q", items, subject="patient"))
    assert [c.lead.split(" ")[0] for c in answer.claims if c.lead] == ["visit1", "visit2", "visit3", "visit9"]
    assert any("3 more left out" in step for step in answer.reasoning)


def test_similar_cases_are_never_ordered_as_one_subject() -> None:
    pack = _pack("q", [_item("rev2", REV2, 1.0, 2), _item("rev1", REV1, 0.9, 1)])
    similar = EvidencePack("q", items=pack.items, of_similar_cases=True, subject=pack.subject)  # only that differs
    assert not any(c.lead for c in TemplateGenerator().generate("q", similar).claims)


def test_uncaptioned_members_are_each_described_from_their_fields() -> None:
    def bare(doc, place, label):
        return EvidenceItem(0, place, doc, "document", 1.0 / place, ("visual",), doc,
                            {"described_by": "captioner", "labels": [{"label": label, "p": 0.8}],
                             "sequence": {"id": "site", "place": place, "of": 2}})
    pack = EvidencePack.from_items("q", [bare("t1", 1, "lakeside"), bare("t0", 2, "valley")], subject="site")
    answer = TemplateGenerator().generate("q", pack)
    assert answer.text == ("t1 (site, 1 of 2) has no caption; the image classifier labels it 'lakeside' (p 0.80) "
                           "[Evidence 1]. t0 (site, 2 of 2) has no caption; the image classifier labels it 'valley' "
                           "(p 0.80) [Evidence 2].")


def test_the_verifier_checks_what_a_claim_states_after_its_lead(minilm) -> None:
    pack = _pack("q", [_item("rev1", REV1, 1.0, 1)])
    plain = Claim(text="Circuit schematic of an RC low-pass filter [Evidence 1].", citations=(1,))
    led = Claim(text="rev1 (rc-filter-design, 1 of 2): Circuit schematic of an RC low-pass filter [Evidence 1].",
                citations=(1,), lead="rev1 (rc-filter-design, 1 of 2)")
    verifier = GroundingVerifier(minilm)
    a, b = verifier.score_claim(plain, pack), verifier.score_claim(led, pack)
    assert abs(a.grounding - b.grounding) < 1e-6 and not b.hallucination_risk
    try:
        Claim(text="something else", lead="rev1")
    except ValueError as exc:
        assert "lead must open" in str(exc)
    else:
        raise AssertionError("a lead that does not open the text is refused")


def test_the_json_card_names_a_claims_lead() -> None:
    from kira.explain.render_json import _CLAIM_SCHEMA, claim_dict

    led = Claim(text="rev1 (d, 1 of 2): A lawn [Evidence 1].", citations=(1,), lead="rev1 (d, 1 of 2)")
    assert claim_dict(led)["lead"] == "rev1 (d, 1 of 2)" and "lead" not in claim_dict(Claim(text="A lawn."))
    assert _CLAIM_SCHEMA["properties"]["lead"]["type"] == "string" and "lead" not in _CLAIM_SCHEMA["required"]


def test_cards_show_where_each_item_sits_in_its_sequence() -> None:
    from kira.explain.render_html import _evidence_block
    from kira.explain.render_text import _evidence_plain
    from kira.reasoning.sequence_answer import sequence_label

    item = EvidencePack.from_items("q", [_item("rev2", REV2, 1.0, 2)]).items[0]
    assert sequence_label(item) == "rc-filter-design, 2 of 2"
    assert _evidence_plain(item).startswith("  [Evidence 1] rev2 (rc-filter-design, 2 of 2): ")
    assert "rev2 <span class='muted'>(rc-filter-design, 2 of 2)</span>" in _evidence_block(item, "[Evidence 1]")
    alone = EvidencePack.from_items("q", [_item("other", REV2, 1.0, None)]).items[0]
    assert sequence_label(alone) == "" and _evidence_plain(alone).startswith("  [Evidence 1] other: ")


def test_evidence_for_a_kind_of_thing_is_many_subjects_answered_by_the_consensus() -> None:
    """DomainVQA-R's "find pneumonia" put one patient's visits first; without a subject the pack is many
    patients' evidence, and the answer is what they agree on, not one patient's history."""
    items = [_item("p1-t1", "patchy consolidation in the right lower zone", 1.0, 2, of=3, sequence="p1"),
             _item("p1-t2", "patchy consolidation in the right lower zone, improving", 0.95, 3, of=3, sequence="p1"),
             _item("p2-t0", "patchy consolidation in the right lower zone", 0.9, None)]
    answer = TemplateGenerator().generate("find consolidation", EvidencePack.from_items("q", items))
    assert not any(c.lead for c in answer.claims), answer.text


def test_consecutive_members_that_state_the_same_are_said_once() -> None:
    same, other = "a lawn with young trees", "the same lawn, the trees in leaf"
    items = [_item("may", same, 1.0, 1, of=3, sequence="garden"), _item("june", same, 0.9, 2, of=3, sequence="garden"),
             _item("july", other, 0.8, 3, of=3, sequence="garden")]
    answer = TemplateGenerator().generate("how did the garden change?", _pack("q", items, "garden"))
    assert answer.text == ("may and june (garden, 1 and 2 of 3): A lawn with young trees [Evidence 1, 2]. "
                           "july (garden, 3 of 3): The same lawn, the trees in leaf [Evidence 3].")


def test_a_member_that_states_only_bookkeeping_says_nothing() -> None:
    from report_profile import REPORT_PROFILE

    items = [_item("revA", "Drawn by J. Park.", 1.0, 1, of=3), _item("revB", REV2, 0.9, 2, of=3),
             _item("revC", REV1, 0.8, 3, of=3)]
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("how was it revised?", _pack("q", items))
    assert [c.lead for c in answer.claims if c.lead] == ["revB (rc-filter-design, 2 of 3)", "revC (rc-filter-design, 3 of 3)"]
    assert "Park" not in answer.text


def test_a_question_about_what_views_show_together_is_not_ordered() -> None:
    pack = _pack("q", [_item("rev2", REV2, 1.0, 2), _item("rev1", REV1, 0.9, 1)])
    answer = TemplateGenerator().generate("what do the views show together?", pack)
    assert not any(c.lead for c in answer.claims)


def test_a_query_image_that_shows_one_member_is_answered_about_it() -> None:
    items = [_item("rev2", REV2, 1.0, 2, paths=("visual", "clear_match")), _item("rev1", REV1, 0.9, 1)]
    assert sequence_in_evidence(EvidencePack.from_items("q", items).items) is None
    answer = TemplateGenerator().generate("what is this?", _pack("q", items))
    assert not any(c.lead for c in answer.claims) and answer.claims[0].text.startswith("Revised schematic")


def test_members_whose_main_statement_agrees_get_the_consensus() -> None:
    """DomainVQA-R: three visits all state the blunted angle, one of them also the effusion it names. That is no
    change over time, only what retrieval brought of each visit: the consensus weighs it, as before."""
    items = [_item("t0", "blunted left costophrenic angle", 1.0, 1, of=3, sequence="p"),
             _item("t1", "blunted left costophrenic angle; left pleural effusion", 0.9, 2, of=3, sequence="p"),
             _item("t2", "blunted left costophrenic angle", 0.8, 3, of=3, sequence="p")]
    answer = TemplateGenerator().generate("what does p show?", _pack("q", items, "p"))
    assert not any(c.lead for c in answer.claims)
    assert answer.claims[0].text == "Blunted left costophrenic angle [Evidence 1, 2, 3].", answer.text


def test_a_language_model_reads_each_items_place_in_its_sequence() -> None:
    from kira.reasoning.prompting import evidence_block

    item = EvidenceItem(1, 1, "rev2", "document", 1.0, ("visual",), REV2,
                        {"caption": REV2, "described_by": "user caption/tags",
                         "sequence": {"id": "rc-filter-design", "place": 2, "of": 2}})
    assert evidence_block(item, appearance=False).startswith("[Evidence 1] rev2 (rc-filter-design, 2 of 2): revised")
