"""A group's id names its members however many documents it has (kira.knowledge_base.identifiers).

Found through /ask: in a knowledge base of three photos, two of them in sequence "breakfast-log", "what does the
breakfast-log show?" answered "Nothing in this knowledge base matches ...": 'breakfast' and 'log' are held by more
than half of the documents, and such a word was taken for the naming scheme ("img" in IMG_1000 ...)."""

from __future__ import annotations

from pipeline_fakes import FakeStack, photo

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.identifiers import IdentifierIndex


def _fill(kb: KnowledgeBase) -> None:
    kb.add_image(photo(0), doc_id="cup_monday", caption="a full cup of coffee", sequence=("breakfast-log", 0))
    kb.add_image(photo(1), doc_id="cup_tuesday", caption="a cat where the cup was", sequence=("breakfast-log", 1))
    kb.add_image(photo(2), doc_id="launch", caption="a rocket on its pad")
    kb.commit()


def _docs(kb, postings) -> dict[str, list[str]]:
    return {w: sorted(r.doc_id for r in kb.chunks(ids).values()) for w, ids in postings.items()}


def _names_as_designed(kb: KnowledgeBase) -> None:
    both = ["cup_monday", "cup_tuesday"]
    assert _docs(kb, kb.identifier_postings("what does the breakfast-log show?")) == {"breakfast": both, "log": both}
    # 'cup' is a word of two doc ids, two of three documents: the naming scheme, as before
    assert _docs(kb, kb.identifier_postings("what does cup show?")) == {}


def test_a_group_id_held_by_most_documents_names_its_members(tmp_path, kb_factory):
    with kb_factory(tmp_path / "kb", models=FakeStack()) as kb:
        _fill(kb)
        if kb_factory.backend == "milvus":
            assert type(kb.lexical()).__name__ == "MilvusLexical"  # named by text_match in Milvus
        _names_as_designed(kb)


def test_a_word_shared_by_a_group_and_other_names_stays_the_naming_scheme():
    index = IdentifierIndex.build([(1, ["a1", "series"], []), (2, ["a2", "series"], []), (3, ["b1", "other"], ["series"])])
    assert "series" not in index.postings  # held by all three, the third through a metadata value: no one group's name
    index = IdentifierIndex.build([(1, ["a1", "series"], []), (2, ["a2", "series"], []), (3, ["b1"], [])])
    assert index.postings["series"].tolist() == [1, 2]
