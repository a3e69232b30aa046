"""`kira check` of a Milvus knowledge base's ``__terms`` (kira.knowledge_base.milvus.check_terms): damaged rows
found and rewritten from the chunks, and a format-1 knowledge base upgraded in place with the same lexical ranking."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from milvus_fixtures import release_lite  # noqa: E402
from pipeline_fakes import FakeStack, photo  # noqa: E402

from kira.cli import main  # noqa: E402
from kira.knowledge_base import KnowledgeBase  # noqa: E402
from kira.knowledge_base.check import check  # noqa: E402
from kira.knowledge_base.milvus.lexical import terms_name  # noqa: E402

CAPTIONS = {"astronaut": "an astronaut in a white suit beside the flag", "cat": "a ginger cat looking up",
            "coffee": "a cup of coffee on a saucer, no sugar", "rocket": "a rocket on the launch pad at dawn"}
QUESTIONS = ["a cup of coffee", "the rocket launch", "ginger cat", "astronaut flag", "coffee without sugar",
             "launch pad cleared", "breakfast"]


def _fill(kb: KnowledgeBase) -> None:
    for n, (name, caption) in enumerate(CAPTIONS.items()):
        kb.add_image(photo(n), doc_id=name, caption=caption)
    kb.add_document("manual", passages=["The launch pad is cleared before a rocket launch.",
                                        "Coffee is served at breakfast without sugar."], caption="site manual")
    kb.commit()


@pytest.fixture()
def lite_kb(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack(), backend="milvus") as kb:
        _fill(kb)
    yield path
    release_lite(path / "milvus.db")


def _ranking(kb: KnowledgeBase) -> dict[str, tuple[list[int], np.ndarray]]:
    lexical = kb.lexical()
    return {q: (lexical.search(q, 10).ids.tolist(), lexical.search(q, 10).scores) for q in QUESTIONS}


def test_terms_rows_that_disagree_with_the_chunks_are_found_and_rewritten(lite_kb, capsys):
    with KnowledgeBase.open(lite_kb) as kb:
        before = _ranking(kb)
        col = kb.storage.collection
        terms = terms_name(col.name)
        cat, coffee = kb.document_chunk_ids(["cat", "coffee"]).values()
        row = col.client.get(terms, ids=[coffee], output_fields=["doc_id", "level", "names", "groups", "group_order"])[0]
        col.client.delete(terms, ids=[cat])  # a write cut short: the cat has no terms row
        col.client.upsert(terms, [{**row, "id": coffee, "lexical": "astronaut astronaut"}])  # written outside kira
        col.client.upsert(terms, [{**row, "id": 987654321, "lexical": "coffee"}])  # a removal cut short
        kb.storage.note_external_writes()
    report = check(lite_kb)
    problems = {f.problem.split(" (chunk ids")[0]: f.problem for f in report.findings if f.where == "terms"}
    assert len(report.findings) == 3 and len(problems) == 3, report.to_text()
    assert any("have no terms row" in p and f"[{cat}]" in p for p in problems.values())
    assert any("differ from their chunk's terms" in p and f"[{coffee}]" in p for p in problems.values())
    assert any("belong to no document or passage chunk" in p and "[987654321]" in p for p in problems.values())
    assert all("kira check --repair" in f.repair for f in report.findings)
    assert main(["check", str(lite_kb), "--repair"]) == 0
    assert "checked again after the repair: everything agrees" in capsys.readouterr().out
    with KnowledgeBase.open(lite_kb, read_only=True) as kb:
        after = _ranking(kb)
    # the same hits in the same order; scores shift (Milvus Lite's BM25 statistics keep overwritten rows: check_terms)
    assert {q: ids for q, (ids, _) in after.items()} == {q: ids for q, (ids, _) in before.items()}
    assert all((scores > 0).all() for _, scores in after.values())
    assert check(lite_kb).ok


def test_a_format_1_knowledge_base_is_upgraded_in_place_by_repair_with_the_same_lexical_ranking(tmp_path, monkeypatch,
                                                                                              capsys):
    from kira.knowledge_base.lexical import LexicalIndex
    from kira.knowledge_base.milvus import schema

    made = schema.MilvusConfig
    monkeypatch.setattr(schema, "MilvusConfig", lambda **fields: made(**{**fields, "kira_terms": False}))
    path = tmp_path / "old"
    with KnowledgeBase.create(path, models=FakeStack(), backend="milvus") as kb:  # as kira before format 2 made it
        kb.storage.settings["format"] = 1
        kb.storage.records.put({"setting:kira": json.dumps(kb.storage.settings)})
        _fill(kb)
        assert not kb.storage.client.has_collection(terms_name(kb.storage.name))
    monkeypatch.undo()
    try:
        with KnowledgeBase.open(path, read_only=True) as kb:
            assert isinstance(kb.lexical(), LexicalIndex)  # rows read into this process
            before = _ranking(kb)
        [finding] = check(path).findings
        assert finding.where == "format" and "format 1: no kira__terms" in finding.problem
        assert "kira check --repair builds kira__terms" in finding.repair
        assert main(["check", str(path), "--repair"]) == 0
        assert "checked again after the repair: everything agrees" in capsys.readouterr().out
        with KnowledgeBase.open(path, read_only=True) as kb:
            assert type(kb.lexical()).__name__ == "MilvusLexical" and kb.storage.settings["format"] == 2
            after = _ranking(kb)
            assert sorted(kb.identifier_postings("what does coffee show")) == ["coffee"]
        for q in QUESTIONS:
            assert after[q][0] == before[q][0], q
            np.testing.assert_allclose(after[q][1], before[q][1], rtol=1e-4, err_msg=q)
        assert sum(len(ids) for ids, _ in after.values()) > len(QUESTIONS)  # the rankings compared are not empty
        with KnowledgeBase.open(path, models=FakeStack()) as kb:  # writes after the upgrade keep the terms whole
            kb.add_image(photo(5), doc_id="later", caption="a second cup of coffee")
        assert check(path).ok
    finally:
        release_lite(path / "milvus.db")


def test_an_upgrade_cut_short_stays_format_1_until_repair_finishes_it(lite_kb):
    """A `__terms` collection made by an upgrade that stopped before recording format 2 is not read: its rows
    may be partial, so the knowledge base answers as format 1 until `kira check --repair` completes it."""
    from kira.knowledge_base.lexical import LexicalIndex

    with KnowledgeBase.open(lite_kb) as kb:
        kb.storage.settings["format"] = 1
        kb.storage.records.put({"setting:kira": json.dumps(kb.storage.settings)})
        col = kb.storage.collection
        some = col.client.query(terms_name(col.name), filter="id >= 0", output_fields=["id"], limit=3)
        col.client.delete(terms_name(col.name), ids=[int(r["id"]) for r in some])
    with KnowledgeBase.open(lite_kb, read_only=True) as kb:
        assert isinstance(kb.lexical(), LexicalIndex)
    report = check(lite_kb, repair=True)
    assert [f.where for f in report.findings] == ["format"] and report.repaired and not report.remaining
    with KnowledgeBase.open(lite_kb, read_only=True) as kb:
        assert type(kb.lexical()).__name__ == "MilvusLexical"
        assert len(kb.lexical()) == len(kb.level_ids(["document", "passage"]))
