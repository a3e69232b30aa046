"""CompoundIndex: one representation of the compound groups, and every read form derived from it."""

from __future__ import annotations

from kira.knowledge_base.compound import CompoundIndex

GROUPS = [
    ("temporal", "S1", ["s1-t0", "s1-t1", "s1-t2"]),
    ("multiview", "S1-t2", ["s1-t2", "s1-side"]),  # shares s1-t2 with the sequence: one compound document
    ("temporal", "S2", ["s2-t0", "s2-t1"]),
    ("multiview", "lonely", ["x"]),  # a group of one groups nothing
]
DOC_CHUNK = {"s1-t0": 1, "s1-t1": 11, "s1-t2": 21, "s1-side": 31, "s2-t0": 41, "s2-t1": 51, "x": 61}


def test_every_read_form_comes_from_the_one_representation():
    c = CompoundIndex.build(GROUPS, DOC_CHUNK)
    assert c.compound_of == {"s1-t0": "s1-side", "s1-t1": "s1-side", "s1-t2": "s1-side", "s1-side": "s1-side",
                             "s2-t0": "s2-t0", "s2-t1": "s2-t0"}
    assert c.view_set_of == {"s1-t2": "S1-t2", "s1-side": "S1-t2"}
    assert c.partners[21] == frozenset({1, 11, 31}) and c.partners[41] == frozenset({51}) and 61 not in c.partners
    assert c.kinds[(1, 21)] == "temporal" and c.kinds[(21, 31)] == "multiview"
    assert (1, 31) not in c.kinds  # in one compound document, but in no group together


def test_the_knowledge_base_reads_compounds_per_commit(tmp_path):
    from pipeline_fakes import FakeStack, flat

    from kira.knowledge_base import KnowledgeBase

    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(flat((1, 0, 0)), doc_id="a0", sequence=("A", 0))
        kb.add_image(flat((1, 0, 0)), doc_id="a1", sequence=("A", 1))
        kb.commit()
        assert kb.compound_of() == {"a0": "a0", "a1": "a0"}
        first = kb.compounds()
        assert kb.compounds() is first  # built once per commit
        kb.add_image(flat((0, 1, 0)), doc_id="a2", sequence=("A", 2))
        kb.commit()
        assert kb.compounds() is not first and kb.compound_of()["a2"] == "a0"
