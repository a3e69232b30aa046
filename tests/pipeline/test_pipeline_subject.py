"""The subject invariant: an answer never states about one subject what only another subject's evidence states."""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_fakes import FakeStack, flat

from kira.pipeline import VARIANTS, Kira
from kira.reasoning.subject import SIMILAR_HEADING, enforce_subject
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack

RED, GREEN, BLUE = (1, 0, 0), (0, 1, 0), (0, 0, 1)


def _item(doc: str, caption: str, score: float = 1.0) -> EvidenceItem:
    return EvidenceItem(0, hash(doc) % 1000, doc, "document", score, ("visual",), caption, {"caption": caption})


def test_a_claim_citing_only_another_subjects_evidence_moves_to_similar_cases():
    pack = EvidencePack.from_items("q", [_item("a1", "nothing of note")], similar=[_item("b1", "a large crack")],
                                   subject="A001")
    assert pack.numbers == (1,) and [i.number for i in pack.similar] == [2]
    written = Answer(text="x", claims=(Claim("Nothing of note [Evidence 1].", (1,)),
                                       Claim("A large crack [Evidence 2].", (2,)),
                                       Claim("Both [Evidence 1, 2].", (1, 2))))
    answer = enforce_subject(written, pack)
    assert [c.citations for c in answer.claims] == [(1,), (1,)]  # the subject's claims cite only its evidence
    assert [c.citations for c in answer.similar] == [(2,)]
    assert "crack" not in answer.text.split(SIMILAR_HEADING)[0]
    assert answer.text.split(SIMILAR_HEADING)[1].strip() == "A large crack [Evidence 2]."


def test_without_similar_cases_the_answer_is_unchanged():
    pack = EvidencePack.from_items("q", [_item("a1", "a crack")])
    written = Answer(text="A crack [Evidence 1].", claims=(Claim("A crack [Evidence 1].", (1,)),))
    assert enforce_subject(written, pack) is written


@pytest.fixture(scope="module")
def kb(tmp_path_factory, kb_factory):
    """Two subjects (sequences) S101 and S202. Only S202's records state a finding; S101's state only
    what was done. Both look alike (red), so retrieval for S101 finds S202's records too."""
    base = kb_factory(tmp_path_factory.mktemp("subject") / "kb", models=FakeStack())
    base.add_image(flat(RED), doc_id="S101-v0", caption="subject S101 visit 0: routine record",
                   sequence=("S101", 0))
    base.add_image(flat(RED, spot=(BLUE, 8, 8, 12)), doc_id="S101-v1", caption="subject S101 visit 1: routine record",
                   sequence=("S101", 1))
    base.add_image(flat(RED, spot=(BLUE, 8, 8, 20)), doc_id="S202-v0", caption="subject S202 visit 0: a large crack",
                   sequence=("S202", 0))
    base.add_image(flat(RED, spot=(BLUE, 8, 8, 22)), doc_id="S202-v1", caption="subject S202 visit 1: a large crack",
                   sequence=("S202", 1))
    base.add_image(flat(GREEN), doc_id="G1", caption="green lawn")
    base.commit()
    yield base
    base.close()


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_claim_about_the_named_subject_never_rests_on_another_subjects_evidence(kb, variant):
    result = Kira(kb).ask("What does subject S101 show?", image=flat(RED, spot=(BLUE, 8, 8, 20)), variant=variant,
                          top_k=4)
    pack = result.evidence
    own = {i.number: i.doc_id for i in pack.items}
    assert own and all(d.startswith("S101") for d in own.values())
    for claim in result.answer.claims:
        assert set(claim.citations) <= set(own), (variant, claim)
        assert "crack" not in claim.text.lower()
    subject_part = result.answer.text.split(SIMILAR_HEADING)[0]
    assert "crack" not in subject_part.lower()
    others = {i.number for i in pack.similar}
    for claim in result.answer.similar:
        assert claim.citations and set(claim.citations) <= others
    if result.answer.similar:
        assert SIMILAR_HEADING in result.answer.text
        card = result.card.to_text()
        assert "Similar cases" in card


def test_a_question_naming_no_subject_is_answered_from_all_the_evidence(kb):
    result = Kira(kb).ask("a large crack", variant="full")
    assert not result.evidence.similar and result.evidence.subject == ""
    assert "crack" in result.answer.text.lower()


def test_the_subject_is_its_documents_and_their_groups_by_document_chunk(kb):
    """subject_heads: the named documents' chunks and their sequence partners, read without any row; the subject
    stage splits the evidence by them and says how many documents the subject holds."""
    from kira.grounding.stages import subject_heads

    heads_of = kb.document_chunk_ids(["S101-v0", "S101-v1", "S202-v0", "S202-v1", "G1"])
    named = [heads_of["S101-v0"]]  # naming one visit names the sequence
    assert subject_heads(kb, named) == frozenset({heads_of["S101-v0"], heads_of["S101-v1"]})
    assert subject_heads(kb, []) == frozenset()
    result = Kira(kb).ask("What does subject S101 show?", image=flat(RED, spot=(BLUE, 8, 8, 20)), top_k=4)
    trace = result.trace["subject"]
    assert trace["document_count"] == 2 and trace["documents"] == ["S101-v0", "S101-v1"]
    assert {i.doc_id for i in result.evidence.similar} <= {"S202-v0", "S202-v1", "G1"}


def test_the_subject_follows_its_groups_from_one_to_the_next(tmp_path, kb_factory):
    """A0-A1 are a sequence, A1-B1 two views of one moment: naming A0 names B1 too, as the compound document
    (kira.knowledge_base.compound) holds all three."""
    from kira.grounding.stages import subject_heads

    base = kb_factory(tmp_path / "kb", models=FakeStack())
    base.add_image(flat(RED), doc_id="A0", caption="a red record", sequence=("A", 0))
    base.add_image(flat(GREEN), doc_id="A1", caption="a green record", sequence=("A", 1), view=("M", 0))
    base.add_image(flat(BLUE), doc_id="B1", caption="a blue record", view=("M", 1))
    base.add_image(flat(RED, spot=(BLUE, 8, 8, 12)), doc_id="C", caption="another record")
    base.commit()
    heads = base.document_chunk_ids(["A0", "A1", "B1", "C"])
    try:
        assert subject_heads(base, [heads["A0"]]) == frozenset({heads["A0"], heads["A1"], heads["B1"]})
        compound_of = base.compounds().compound_of  # the union-find of the groups agrees
        assert {d for d, key in compound_of.items() if key == compound_of["A0"]} == {"A0", "A1", "B1"}
    finally:
        base.close()
