"""A word the knowledge base uses more to describe documents than to name them names a document only through a
whole id (kira.knowledge_base.identifiers): the demo's "a circuit with a battery and resistors" was answered about
led_circuit alone, because 'circuit' is a word of that id, though three other captions speak of circuits."""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_fakes import FakeStack, photo

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.identifiers import IdentifierIndex
from kira.pipeline import Kira

SCHEMATICS = {  # doc id -> caption: 'circuit' is a word of one id and of four captions
    "led_circuit": "circuit schematic: LED with a 330 ohm resistor on 5V",
    "voltage_divider": "circuit schematic of a voltage divider: 9V battery and two 10k resistors",
    "rc_filter": "circuit schematic of an RC low-pass filter",
    "opamp": "circuit schematic of an inverting op-amp amplifier",
    "P017_scan": "a chest film, compared with the earlier P017 film",
}


def _fill(kb: KnowledgeBase) -> None:
    for n, (doc_id, caption) in enumerate(SCHEMATICS.items()):
        kb.add_image(photo(n), doc_id=doc_id, caption=caption, sequence=("P017", 0) if doc_id == "P017_scan" else None)
    kb.commit()


def _docs(kb, postings) -> dict[str, list[str]]:
    return {w: sorted(r.doc_id for r in kb.chunks(ids).values()) for w, ids in postings.items()}


def _names_as_designed(kb: KnowledgeBase) -> None:
    assert _docs(kb, kb.identifier_postings("a circuit with a battery and resistors")) == {}
    assert _docs(kb, kb.identifier_postings("what does the led circuit show?")) == {
        "circuit": ["led_circuit"], "led": ["led_circuit"]}
    assert _docs(kb, kb.identifier_postings("an LED")) == {"led": ["led_circuit"]}  # no caption but its own says LED
    # P017_scan's own caption holds 'p017' too: a word describing only what it names is a name
    assert _docs(kb, kb.identifier_postings("what does P017 show?")) == {"p017": ["P017_scan"]}
    assert _docs(kb, kb.identifier_postings("the voltage divider")) == {
        "divider": ["voltage_divider"], "voltage": ["voltage_divider"]}


def test_a_word_of_one_id_and_of_many_captions_names_nothing_alone_embedded(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        _fill(kb)
        _names_as_designed(kb)
        answer = Kira(kb).ask("a circuit with a battery and resistors", top_k=4, variant="full")
        assert not answer.trace.get("subject") and not answer.answer.similar  # about circuits, not about led_circuit
        named = Kira(kb).ask("what does the led circuit show?", top_k=4, variant="full")
        assert named.trace.get("subject") and {i.doc_id for i in named.evidence.items} == {"led_circuit"}


def test_a_word_of_one_id_and_of_many_captions_names_nothing_alone_milvus(tmp_path):
    pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
    pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')
    from milvus_fixtures import release_lite

    try:
        with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(), backend="milvus") as kb:
            _fill(kb)
            assert type(kb.lexical()).__name__ == "MilvusLexical"  # names answered by text_match in Milvus
            _names_as_designed(kb)
    finally:
        release_lite(tmp_path / "kb" / "milvus.db")


def test_identifier_index_names_a_content_word_only_through_a_whole_id():
    index = IdentifierIndex.build([(10, ["led_circuit"], []), (11, ["opamp"], ["circuit"]), (12, ["divider"], []),
                                   (13, ["bridge"], []), (14, ["relay"], [])])
    assert sorted(index.postings) == ["bridge", "circuit", "divider", "led", "opamp", "relay"]
    assert index.ids_of[10] == (frozenset({"led", "circuit"}),)
    describing = {"circuit": np.array([10, 11, 12, 13, 14, 99])}  # 99: a passage chunk, not a document
    holding = lambda word: describing.get(word, np.zeros(0, np.int64))  # noqa: E731
    assert index.named("a circuit")["circuit"].tolist() == [10, 11]  # without `holding` every name word names
    assert index.named("a circuit", holding=holding) == {}  # names 2, describes 3 others
    assert index.named("the led circuit", holding=holding)["circuit"].tolist() == [10]  # through the whole id
    assert index.describes_more("circuit", index.postings["circuit"], describing["circuit"])
    assert not index.describes_more("circuit", index.postings["circuit"], np.array([10, 11, 12, 99]))
