"""The deterministic template generator: score-weighted vote, reasoning trace, citations only from the pack."""

from __future__ import annotations

from report_profile import REPORT_PROFILE

from kira.reasoning.sentences import vocabulary

from hypothesis import given, settings
from hypothesis import strategies as st

from kira.reasoning.sentences import sentences_of, text_of
from kira.reasoning.template_generator import NO_EVIDENCE_TEXT, TemplateGenerator
from kira.reasoning.types import EvidenceItem, EvidencePack

VOCAB = vocabulary(REPORT_PROFILE)


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
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("which condition?", pack)
    assert answer.text == "Chest x-ray showing pneumonia [Evidence 1, 3]."
    assert answer.plain_text == "Chest x-ray showing pneumonia."
    assert answer.citations == (1, 3) and len(answer.claims) == 1
    trace = "\n".join(answer.reasoning)
    assert "Conflict" in trace and "normal chest x-ray" in trace and "Agreement" in trace


def test_many_patches_of_one_document_do_not_outvote_several_documents() -> None:
    patches = [_item(0, "big", 0.5, "a forest", level="patch") for _ in range(4)]
    others = [_item(0, "w1", 0.45, "a lake"), _item(0, "w2", 0.44, "a lake")]
    pack = EvidencePack.from_items("q", [*patches, *others])
    assert TemplateGenerator(profile=REPORT_PROFILE).generate("q", pack).plain_text == "A lake."


def test_text_sources_in_order() -> None:
    assert text_of(EvidenceItem(1, 1, "d", "document", 1.0, (), "summary", {"caption": "C"})) == "C"
    assert text_of(EvidenceItem(1, 1, "d", "document", 1.0, (), "summary head; brightness 0.4")) == "summary head; brightness 0.4"
    assert text_of(EvidenceItem(1, 1, "d", "document", 1.0, (), "", {"tags": ["a", "b"]})) == "a, b"
    assert text_of(EvidenceItem(1, 1, "doc9", "document", 1.0, ())) == "doc9"


def test_sentences_split_heads_and_set_bookkeeping_aside() -> None:
    got = sentences_of(
        "PA chest radiograph, patient P001, study 1 (2020-01-13). Findings: patchy consolidation. "
        "Reported by Dr. Osei. Urban land cover: dense blocks; lungs clear"
    , VOCAB)
    assert got == [
        ("PA chest radiograph, patient P001, study 1 (2020-01-13)", True, ""),
        ("patchy consolidation", False, ""),
        ("Reported by Dr. Osei", True, ""),
        ("Urban land cover", False, ""),
        ("dense blocks", False, "Urban land cover"),
        ("lungs clear", False, ""),
    ]


def test_answers_with_the_content_the_evidence_agrees_on_not_its_bookkeeping() -> None:
    captions = [
        "PA chest radiograph, patient P001, study 1 (2020-01-13). Patchy consolidation in the right lower zone.",
        "Lateral chest radiograph, patient P001, study 1 (2020-01-13). Reported by Dr. Osei.",
        "PA chest radiograph, patient P004, study 2 (2021-02-03). Findings: patchy consolidation in the left lower "
        "zone. Impression: left lower lobe pneumonia.",
        "PA chest radiograph, patient P009, study 1 (2022-05-06). Clear lungs, normal cardiac silhouette.",
    ]
    pack = EvidencePack.from_items("Find chest X-rays showing pneumonia", [
        _item(0, f"doc{i}", s, c) for i, (c, s) in enumerate(zip(captions, (0.9, 0.8, 0.7, 0.6)))
    ])
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate(pack.question, pack)
    # the two sources split 0.9 / 0.7 on the side: no clear (> 70%) majority, so the side is left out
    assert answer.claims[0].text == "Patchy consolidation in the lower zone [Evidence 1, 3]."
    assert "P001" not in answer.text and "Osei" not in answer.text
    assert all(set(c.citations) <= {1, 3} for c in answer.claims)
    trace = "\n".join(answer.reasoning)
    assert "bookkeeping" in trace and "[Evidence 2, 4] state(s) none of it" in trace


def test_comparison_questions_are_answered_with_the_stated_change() -> None:
    pack = EvidencePack.from_items("How does revision B differ from revision A?", [
        _item(0, "a", 0.9, "Schematic C1 rev A: RC low-pass filter, R1 = 10k."),
        _item(0, "b", 0.8, "Schematic C1 rev B: RC low-pass filter, R1 = 47k. R1 changed from 10k to 47k, which "
                           "lowers the cutoff frequency."),
    ])
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate(pack.question, pack)
    assert answer.claims[0].text.startswith("R1 changed from 10k to 47k") and answer.claims[0].citations == (2,)
    assert answer.claims[1].citations == (1, 2)


def test_empty_pack_says_so_and_makes_no_claims() -> None:
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("anything?", EvidencePack("anything?"))
    assert answer.text == NO_EVIDENCE_TEXT and answer.claims == () and answer.citations == ()
    assert any("No evidence" in step for step in answer.reasoning)


def test_non_positive_scores_fall_back_to_rank_weights() -> None:
    pack = EvidencePack.from_items("q", [_item(0, "a", -0.1, "first"), _item(0, "b", -0.5, "second")])
    assert TemplateGenerator(profile=REPORT_PROFILE).generate("q", pack).plain_text == "First."


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
    generator = TemplateGenerator(profile=REPORT_PROFILE, max_claims=3)
    answer = generator.generate("q", pack)
    assert set(answer.citations) <= set(pack.numbers)
    assert all(c.citations for c in answer.claims)
    assert bool(answer.claims) == bool(items)
    assert generator.generate("q", pack) == answer


def test_a_comparison_is_answered_with_the_change_even_when_better_scored_evidence_states_none() -> None:
    pack = EvidencePack.from_items("Compare tile T003 acquired in 2019 with 2021: what changed?", [
        _item(0, "t1", 0.9, "Tile T001, acquired 2023-08-21. Dense residential blocks on a street grid."),
        _item(0, "t1b", 0.85, "Tile T001, acquired 2021-01-02. Dense residential blocks on a street grid."),
        _item(0, "t3", 0.5, "Tile T003, acquired 2021-09-24. Forest land cover: closed canopy. Change since the "
                            "previous acquisition: a clear-cut patch opened in the canopy."),
    ])
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate(pack.question, pack)
    assert answer.claims[0].text == "A clear-cut patch opened in the canopy [Evidence 3]."
    assert "Change since" not in answer.text and "residential" not in answer.text


def test_part_designators_are_content_not_bookkeeping() -> None:
    # R1, C1 name parts of the circuit; C032 names the design and 1 a sheet number
    got = sentences_of("Schematic C032 rev A: RC phase-shift oscillator, timing R1 = 10k, C1 = 10n. "
                       "Schematic C032 rev B, drawn by K. Adeyemi, sheet 1 of 1.", VOCAB)
    assert got == [
        ("Schematic C032 rev A", True, ""),
        ("RC phase-shift oscillator, timing R1 = 10k, C1 = 10n", False, "Schematic C032 rev A"),
        ("Schematic C032 rev B, drawn by K. Adeyemi, sheet 1 of 1", True, ""),
    ]


def test_a_comparison_whose_later_record_is_bookkeeping_describes_the_subject() -> None:
    # revision B's record says nothing about the design: answer with what revision A states, not B's title block
    pack = EvidencePack.from_items("How does revision B of design C032 differ from revision A?", [
        _item(0, "C032-revB", 1.0, "Schematic C032 rev B, drawn by K. Adeyemi, sheet 1 of 1."),
        _item(0, "C032-revA", 0.8, "Schematic C032 rev A: RC phase-shift oscillator, timing R1 = 10k, C1 = 10n."),
    ])
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate(pack.question, pack)
    assert answer.text == "RC phase-shift oscillator, timing R1 = 10k, C1 = 10n [Evidence 2]."


def test_a_weakly_supported_statement_that_complements_the_top_one_is_kept() -> None:
    # the function is stated by one of three documents that agree on the type: above min_support_ratio 0.1 of the best
    pack = EvidencePack.from_items("Find schematics of filter circuits.", [
        _item(0, "a", 1.0, "RC low-pass filter."),
        _item(0, "b", 0.9, "RC low-pass filter."),
        _item(0, "c", 0.5, "RC low-pass filter; it attenuates frequencies above the cutoff."),
    ])
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate(pack.question, pack)
    assert [c.citations for c in answer.claims] == [(1, 2, 3), (3,)]
    assert answer.claims[1].text.startswith("It attenuates frequencies above the cutoff")
    assert len(TemplateGenerator(profile=REPORT_PROFILE, min_support_ratio=0.5).generate(pack.question, pack).claims) == 1


def test_a_clear_majority_keeps_its_wording() -> None:
    # three of four equally weighted sources say "left" (75% > 70%): kept; three of five (60%) is no clear majority
    sides = ["left", "left", "left", "right"]
    pack = EvidencePack.from_items("q", [_item(0, f"d{i}", 0.8, f"Patchy consolidation in the {s} lower zone with air bronchograms.")
                                         for i, s in enumerate(sides)])
    assert TemplateGenerator(profile=REPORT_PROFILE).generate("q", pack).plain_text == "Patchy consolidation in the left lower zone with air bronchograms."
    split = EvidencePack.from_items("q", [_item(0, f"d{i}", 0.8, f"Patchy consolidation in the {s} lower zone with air bronchograms.")
                                          for i, s in enumerate(["left", "left", "left", "right", "right"])])
    assert TemplateGenerator(profile=REPORT_PROFILE).generate("q", split).plain_text == "Patchy consolidation in the lower zone with air bronchograms."


def test_rival_subtypes_stay_apart_and_the_function_statement_follows_the_majority() -> None:
    """'RC low-pass filter, R1 = 22k' and 'RC high-pass filter, R1 = 10k' differ in one word of four (values
    and part designators do not make them alike): two rival statements, not one 'RC pass filter'. The
    majority (high-pass, 60% of the weight) leads with the value most of it states (C1 = 1u); the
    function statement that both kinds share is the second claim, and the low-pass reading is not stated."""
    fn = "; it passes one band of frequencies and attenuates the rest"
    caps = [("C086", 1.0, "RC low-pass filter, R1 = 22k, C1 = 1u."),
            ("C006", 0.92, f"RC high-pass filter, R1 = 10k, C1 = 1u{fn}."),
            ("C066", 0.91, f"RC high-pass filter, R1 = 10k, C1 = 1u{fn}."),
            ("C042", 0.84, "RC high-pass filter, R1 = 22k, C1 = 47n."),
            ("C078", 0.79, "RC high-pass filter, R1 = 22k, C1 = 1u."),
            ("C086b", 0.79, f"RC low-pass filter, R1 = 100k, C1 = 1u{fn}."),
            ("C098", 0.79, f"RC low-pass filter, R1 = 10k, C1 = 100n{fn}."),
            ("C026", 0.78, f"RC low-pass filter, R1 = 4.7k, C1 = 47n{fn}."),
            ("C066b", 0.76, f"RC high-pass filter, R1 = 47k, C1 = 1u{fn}."),
            ("C078a", 0.76, f"RC high-pass filter, R1 = 4.7k, C1 = 1u{fn}.")]
    items = [_item(0, doc, score, f"Schematic {doc} rev A: {cap}") for doc, score, cap in caps]
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("Find schematics of filter circuits.", EvidencePack.from_items("q", items))
    assert len(answer.claims) == 2
    first, second = (c.text for c in answer.claims)
    assert first.startswith("RC high-pass filter, C1 = 1u [")
    assert second.startswith("It passes one band of frequencies and attenuates the rest")
    assert "low-pass" not in answer.text


def _film(doc: str, score: float, caption: str, compound: str | None) -> EvidenceItem:
    prov = {"caption": caption, **({"compound": compound} if compound else {})}
    return EvidenceItem(0, hash(doc) % 10_000, doc, "document", score, ("visual",), caption, prov)


def test_films_of_one_patient_are_one_witness_for_the_wording() -> None:
    """Three films of patient A say 'right', one film of patient B says 'left': by documents 'right' has
    75% of the weight and would be kept; by witnesses (compound documents) it is one patient against one,
    so the class-level wording leaves the side out. Without compound keys the documents vote as before."""
    films = [("A-t0", "A"), ("A-t1", "A"), ("A-t2", "A"), ("B-t0", "B")]
    side = {"A": "right", "B": "left"}
    grouped = [_film(d, 1.0, f"Patchy airspace consolidation in the {side[p]} lower zone.", p) for d, p in films]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find pneumonia", EvidencePack.from_items("q", grouped))
    assert answer.claims[0].text.startswith("Patchy airspace consolidation in the lower zone [")
    loose = [_film(d, 1.0, f"Patchy airspace consolidation in the {side[p]} lower zone.", None) for d, p in films]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find pneumonia", EvidencePack.from_items("q", loose))
    assert answer.claims[0].text.startswith("Patchy airspace consolidation in the right lower zone [")


def test_a_witness_states_only_what_all_its_documents_state() -> None:
    """Design X's two revisions disagree on Rf; design Y states Rf = 22k. X attests no Rf value, so
    22k has half the witnesses and its clause is left out; and within one design alone the revisions
    vote as documents (a value they disagree on is left out)."""
    items = [_film("X-revA", 1.0, "Inverting op-amp amplifier, feedback Rf = 22k.", "X"),
             _film("X-revB", 1.0, "Inverting op-amp amplifier, feedback Rf = 100k.", "X"),
             _film("Y-revA", 1.0, "Inverting op-amp amplifier, feedback Rf = 22k.", "Y")]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find amplifiers", EvidencePack.from_items("q", items))
    assert answer.claims[0].text.startswith("Inverting op-amp amplifier [")
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find amplifiers", EvidencePack.from_items("q", items[:2]))
    assert answer.claims[0].text.startswith("Inverting op-amp amplifier [")


def test_a_unitless_reading_the_witnesses_disagree_on_becomes_the_range_their_citations_state() -> None:
    caps = {"P1": "0.65", "P2": "0.62", "P3": "0.67"}
    items = [_film(f"{p}-t0", 1.0, f"Enlarged cardiac silhouette, cardiothoracic ratio about {v}.", p)
             for p, v in caps.items()]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find cardiomegaly", EvidencePack.from_items("q", items))
    assert answer.claims[0].text.startswith("Enlarged cardiac silhouette, cardiothoracic ratio about 0.62-0.67 [")
    # only cited documents bound the range: with max_citations=2 the two best-scored readings
    items = [_film(f"{p}-t0", s, f"Enlarged cardiac silhouette, cardiothoracic ratio about {v}.", p)
             for (p, v), s in zip(caps.items(), (1.0, 0.9, 0.8))]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1, max_citations=2).generate("find cardiomegaly",
                                                                        EvidencePack.from_items("q", items))
    assert answer.claims[0].text.startswith("Enlarged cardiac silhouette, cardiothoracic ratio about 0.62-0.65 [")
    # a value with a unit (22k, 47k) is not a plain reading: its clause is left out as before
    items = [_film(f"{p}-t0", 1.0, f"Inverting op-amp amplifier, feedback Rf = {v}.", p)
             for p, v in (("D1", "22k"), ("D2", "47k"), ("D3", "100k"))]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find amplifiers", EvidencePack.from_items("q", items))
    assert answer.claims[0].text.startswith("Inverting op-amp amplifier [")


def test_statements_that_differ_only_in_position_are_one_statement_worded_without_it() -> None:
    """'Left pleural effusion' and 'Right pleural effusion' (Jaccard 2/4) are one statement at two places:
    three patients on the left, two on the right, so the side is left out; 'Urban land cover' and 'Forest
    land cover' differ in what, not where, and stay rivals."""
    sides = ["left", "left", "left", "right", "right"]
    items = [_film(f"P{n}", 1.0, f"{side.capitalize()} pleural effusion.", f"P{n}") for n, side in enumerate(sides)]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find effusions", EvidencePack.from_items("q", items))
    assert answer.claims[0].text == "Pleural effusion [Evidence 1, 2, 3, 4, 5]."
    kinds = ["Urban", "Urban", "Urban", "Forest", "Forest"]
    items = [_film(f"T{n}", 1.0, f"{kind} land cover.", f"T{n}") for n, kind in enumerate(kinds)]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("what land cover?", EvidencePack.from_items("q", items))
    assert answer.claims[0].text == "Urban land cover [Evidence 1, 2, 3]."


def test_a_side_most_witnesses_agree_on_is_said_even_when_the_best_weighted_wording_has_the_other() -> None:
    """The best-scored film says right, three films with 3x its weight say left: more than 70% place it
    on the left, so the claim says left (worded from a witness that does), not the best film's right
    and not nothing."""
    items = [_film("P0", 1.0, "Opacity in the right lower zone.", "P0")]
    items += [_film(f"P{n}", 0.95, "Opacity in the left lower zone.", f"P{n}") for n in (1, 2, 3)]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find opacities", EvidencePack.from_items("q", items))
    assert answer.claims[0].text == "Opacity in the left lower zone [Evidence 1, 2, 3, 4]."
    items[1:3] = [_film(f"P{n}", 0.95, "Opacity in the right lower zone.", f"P{n}") for n in (1, 2)]
    answer = TemplateGenerator(profile=REPORT_PROFILE, max_claims=1).generate("find opacities", EvidencePack.from_items("q", items))
    assert answer.claims[0].text == "Opacity in the right lower zone [Evidence 1, 2, 3, 4]."


def test_a_comparison_is_answered_with_both_states_of_the_compared_document() -> None:
    """'How was it revised?' is a comparison; the revision's own statement leads, and the earlier revision's
    statement (another document of the same compound document) complements it instead of being a rival.
    'Revised schematic' is a lead-in, not a claim."""
    items = [_film("rc_rev1", 1.0, "Circuit schematic of an RC low-pass filter: 1k resistor, 100n capacitor.", "rc"),
             _film("rc_rev2", 0.9, "Revised schematic: two-stage RC low-pass filter with ground.", "rc"),
             _film("divider", 0.8, "Circuit schematic of a voltage divider: 9V battery and two 10k resistors.", None)]
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("Show me a low-pass filter schematic and how it was revised",
                                          EvidencePack.from_items("q", items))
    texts = [c.text for c in answer.claims]
    assert texts[0] == "Two-stage RC low-pass filter with ground [Evidence 2]."
    assert texts[1].startswith("Circuit schematic of an RC low-pass filter [Evidence 1")
    # not a comparison: the earlier revision is a rival reading, not a complement
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("Show me a two-stage low-pass filter", EvidencePack.from_items("q", items))
    assert not any("1k" in c.text or "RC low-pass filter [" in c.text for c in answer.claims[1:])


def test_a_non_prefix_stays_on_its_word_so_non_inverting_is_not_inverting() -> None:
    pack = EvidencePack.from_items("which amplifier?", [
        _item(0, "a", 0.9, "Non-inverting op-amp amplifier."),
        _item(0, "b", 0.8, "Non-inverting op-amp amplifier."),
        _item(0, "c", 0.7, "Inverting op-amp amplifier."),
    ])
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("which amplifier?", pack)
    assert answer.claims[0].text == "Non-inverting op-amp amplifier [Evidence 1, 2]."  # not "Inverting ..." from all three
    assert all(not c.text.startswith("Inverting") or c.citations == (3,) for c in answer.claims)


def test_a_finding_with_its_value_clause_restates_a_claim_that_holds_the_finding() -> None:
    """'Enlarged cardiac silhouette, cardiothoracic ratio about 0.65' says nothing the measured claim
    '... enlarged cardiac silhouette has remained unchanged' does not, but its value: it is not a second
    claim, the impression is; a statement with words of its own beyond its values still complements."""
    caption = "Patient P001. Findings: enlarged cardiac silhouette, cardiothoracic ratio about 0.65. Impression: cardiomegaly."
    films = [_film("P001-s1", 1.0, caption, "P001"), _film("P001-s2", 0.9, caption, "P001")]
    statement = "Compared with the baseline, enlarged cardiac silhouette has remained unchanged"
    measured = EvidenceItem(0, 7, "P001-s2", "document", 0.9, ("measured",), statement, {"label": statement})
    question = "Compare the latest study of patient P001 with the baseline: how has it changed?"
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate(question, EvidencePack.from_items(question, [*films, measured]))
    assert [c.text for c in answer.claims] == [f"{statement} [Evidence 3].", "Cardiomegaly [Evidence 1, 2]."]
    other = "Patient P001. Findings: enlarged cardiac silhouette, small left effusion, ratio about 0.65."
    films = [_film("P001-s1", 1.0, other, "P001"), _film("P001-s2", 0.9, other, "P001")]
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate(question, EvidencePack.from_items(question, [*films, measured]))
    assert answer.claims[1].text.startswith("Enlarged cardiac silhouette, small left effusion")


def test_a_reading_most_witnesses_agree_on_still_spans_the_range_with_the_best_weighted_one() -> None:
    """Patient P101 (best weighted) reads 0.67, P102-P104 read 0.65: 0.65 has most of the weight,
    but the claim is first worded with A's 0.67; the clause becomes the range its citations state
    instead of being dropped as a value without its reading."""
    films = [("P101", 1.0, "0.67"), ("P101", 0.98, "0.67"), ("P102", 0.9, "0.65"), ("P103", 0.85, "0.65"),
             ("P104", 0.8, "0.65")]
    items = [_film(f"{p}{n}", score, f"Patient {p}. Findings: enlarged cardiac silhouette, cardiothoracic ratio about "
                   f"{value}; lungs clear.", p) for n, (p, score, value) in enumerate(films)]
    answer = TemplateGenerator(profile=REPORT_PROFILE).generate("what does it show?", EvidencePack.from_items("q", items))
    assert answer.claims[0].text.startswith("Enlarged cardiac silhouette, cardiothoracic ratio about 0.65-0.67 [")


def test_a_claim_and_its_head_read_as_the_sentence_they_were_split_from() -> None:
    """The demo answered "9V battery and two 10k resistors [Evidence 1]. Circuit schematic of a voltage divider
    [Evidence 1]." from the caption "circuit schematic of a voltage divider: 9V battery and two 10k resistors"."""
    caption = "circuit schematic of a voltage divider: 9V battery and two 10k resistors"
    pack = EvidencePack.from_items("q", [_item(0, "divider", 0.9, caption), _item(0, "led", 0.8,
                                                                                 "circuit schematic: LED on 5V")])
    answer = TemplateGenerator().generate("a circuit with a battery and resistors", pack)
    assert answer.text == ("Circuit schematic of a voltage divider: 9V battery and two 10k resistors "
                           "[Evidence 1]."), answer.text
    assert len(answer.claims) == 1 and any("Joined" in step for step in answer.reasoning)
    alone = TemplateGenerator(max_claims=1).generate("a circuit with a battery and resistors", pack)
    assert alone.plain_text == "9V battery and two 10k resistors."  # its head not chosen: the body alone


def test_a_consensus_that_would_open_on_a_leaning_clause_is_one_witness_wording_citing_only_it() -> None:
    """DomainVQA-R's similar cases read "Which lowers the cutoff frequency [Evidence 4, 5, 6, 7].": the
    witnesses disagree on the first clause's values, and what was left leaned on it. Now the best witness's
    own sentence is said, citing only the documents that word it so; no document is cited for values it
    does not state."""
    items = [_film("D1", 1.0, "R1 changed from 22k to 100k, which lowers the cutoff frequency.", "D1"),
             _film("D2", 0.9, "R1 changed from 4.7k to 22k, which lowers the cutoff frequency.", "D2"),
             _film("D3", 0.8, "R1 changed from 10k to 47k, which lowers the cutoff frequency.", "D3")]
    answer = TemplateGenerator(max_claims=1).generate("which filters changed?", EvidencePack.from_items("q", items))
    assert answer.claims[0].text == "R1 changed from 22k to 100k, which lowers the cutoff frequency [Evidence 1]."
    # a dropped first clause that leaves a clause standing on its own is a wording as before
    from kira.reasoning.consensus import consensus_text
    from kira.reasoning.sentences import stems_of

    assert consensus_text("C1 = 1u, RC low-pass filter", stems_of("RC low-pass filter")) == "RC low-pass filter"
    assert consensus_text("R1 = 22k, which lowers the cutoff", stems_of("which lowers the cutoff")) == ""
