"""Kira.warm / KnowledgeBase.warm: the first ask after a commit builds nothing warm did not
already build, sees what was committed, and answers as it would cold."""

from __future__ import annotations

import pytest
from pipeline_fakes import FakeStack, flat

from kira import _core
from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base import lexical as lexical_module
from kira.pipeline import Kira

RED, GREEN, BLUE, YELLOW, PURPLE = (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0.6, 0, 0.8)
QUESTIONS = (
    dict(question="show me the blue sky"),
    dict(question="the green lawn", image=flat(GREEN, spot=(YELLOW, 30, 10, 16))),
    dict(question="what changed in the red card since the previous scan?"),
    dict(question="do the front and side views of the lawn agree?"),
)


def _fill(kb: KnowledgeBase) -> None:
    kb.add_image(flat(RED, spot=(BLUE, 8, 8, 20)), doc_id="red_t0", caption="red card scan", sequence=("card", 0))
    kb.add_image(flat(RED), doc_id="red_t1", caption="red card follow-up; the blue spot has gone", sequence=("card", 1))
    kb.add_image(flat(GREEN), doc_id="green_front", caption="green lawn", view=("lawn", 0))
    kb.add_image(flat(GREEN, spot=(YELLOW, 30, 10, 16)), doc_id="green_side", caption="green lawn with a yellow flower",
                 view=("lawn", 1))
    kb.add_image(flat(GREEN), doc_id="green_top", caption="Lawn L001, view 3. Photographed by J. Park.", view=("lawn", 2))
    kb.add_image(flat(BLUE), doc_id="blue", caption="blue sky")
    kb.commit()


def _answers(kira: Kira) -> list[tuple[str, list[str]]]:
    out = []
    for q in QUESTIONS:
        result = kira.ask(**q)
        out.append((result.answer.text, [i.doc_id for i in result.evidence.items]))
    return out


def test_after_warm_an_ask_builds_no_derived_view(tmp_path, monkeypatch):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        _fill(kb)
        kira = Kira(kb)
        seconds = kira.warm()
        from kira.knowledge_base.views import DERIVED_VIEWS

        assert {spec.name for spec in DERIVED_VIEWS} | {"fine_levels", "concepts"} <= set(seconds)
        assert {"lexical", "document_groups", "compounds"} <= set(seconds)
        assert all(s >= 0 for s in seconds.values())
        warmed = set(map(str, kb.views.caches))
        builds: list[str] = []
        build, group_map = lexical_module.LexicalIndex.build, _core.GroupMap
        monkeypatch.setattr(lexical_module.LexicalIndex, "build",
                            classmethod(lambda cls, *a: builds.append("lexical") or build(*a)))
        monkeypatch.setattr(_core, "GroupMap", lambda *a: builds.append("groups") or group_map(*a))
        _answers(kira)
        assert builds == []
        assert set(map(str, kb.views.caches)) == warmed  # every view the asks read was already there
        kira.warm()  # nothing new committed: nothing is rebuilt
        assert builds == []


def test_warm_answers_as_cold_and_sees_the_latest_commit(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        _fill(kb)
        kira = Kira(kb)
        cold = _answers(kira)
        kb.commit()  # drops the views the cold asks built
        assert not kb.views.caches or set(kb.views.caches) <= {"bridge"}
        kira.warm()
        assert _answers(kira) == cold
        before = len(kb.lexical())
        kb.add_image(flat(PURPLE), doc_id="purple", caption="purple tulip")
        kb.commit()
        kira.warm()
        assert len(kb.lexical()) == before + 1
        assert kira.ask("purple tulip").evidence.items[0].doc_id == "purple"


def test_a_reader_warms_after_refresh(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as writer:
        _fill(writer)
        reader = KnowledgeBase.open(tmp_path / "kb", models=FakeStack(), read_only=True)
        try:
            Kira(reader).warm()
            writer.add_image(flat(PURPLE), doc_id="purple", caption="purple tulip")
            writer.commit()
            Kira(reader).warm()  # refreshes first: the new commit is picked up, then indexed
            assert not reader.refresh()
            assert "purple" in {reader.store.chunks([int(i)])[int(i)].doc_id for i in reader.lexical().ids}
        finally:
            reader.close()


def test_warm_reads_the_bridge_back_for_a_stack_without_a_text_tower(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(image_text=None)) as kb:
        _fill(kb)
        kb.views.caches.clear()  # as after a reader's refresh
        assert "bridge" in Kira(kb).warm() and kb.views.caches["bridge"] is not None
    with KnowledgeBase.create(tmp_path / "kb2", models=FakeStack()) as kb:
        _fill(kb)
        assert "bridge" not in kb.warm()  # the stack maps text into image space itself


def test_warm_on_an_empty_and_on_a_closed_knowledge_base(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", models=FakeStack())
    seconds = Kira(kb).warm()
    assert "lexical" in seconds and len(kb.lexical()) == 0
    assert "knowledge base is empty" in Kira(kb).ask("anything?").answer.text.lower()
    kb.close()
    with pytest.raises(ValueError, match="closed"):
        kb.warm()


class _LabelledStack(FakeStack):
    """A FakeStack whose captioner names a label vocabulary, as the default stack's classifier does."""

    def __init__(self) -> None:
        super().__init__()
        self.captioner.vocabulary = ("tabby cat", "fire engine", "espresso", "obelisk")


def test_warm_encodes_the_relevance_probes_and_label_vocabulary_so_the_first_ask_does_not(tmp_path):
    stack = _LabelledStack()
    with KnowledgeBase.create(tmp_path / "kb", models=stack) as kb:
        _fill(kb)
        kira = Kira(kb)
        assert "relevance" in kira.warm()
        encoded: list[str] = []
        encode = stack.text.encode
        stack.text.encode = lambda texts: encoded.extend(texts) or encode(texts)
        kira.ask("show me the blue sky")
        assert encoded and not set(encoded) & set(stack.captioner.vocabulary)  # the question, not the vocabulary
        from kira.reasoning.relevance import PROBES

        assert not set(encoded) & set(PROBES)
