"""LexicalIndex (BM25) against a direct Okapi BM25 reference, identifiers, specificity, KnowledgeBase.lexical."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.lexical import BM25_B, BM25_K1, LexicalIndex, is_identifier, lexical_terms
from kira.text.tokens import stem

TEXTS = [
    "PA chest radiograph, patient P017, study 1 (2020-01-13). Lungs clear.",
    "Lateral chest radiograph, patient P017, study 2 (2020-04-20). Small left pleural effusion.",
    "PA chest radiograph, patient P071, study 1 (2021-02-02). Right lower lobe pneumonia.",
    "Schematic C012 rev A: inverting op-amp amplifier, Rin = 2.2k.",
    "Sentinel-2 tile T042 acquired 2020-01-13. Dense residential blocks.",
]
IDS = [10, 11, 12, 30, 40]


def reference_bm25(query: str, texts: list[str]) -> np.ndarray:
    docs = [lexical_terms(t) for t in texts]
    n = len(docs)
    avg = sum(len(d) for d in docs) / n
    out = np.zeros(n)
    for term in set(lexical_terms(query)):
        df = sum(term in d for d in docs)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            tf = Counter(d)[term]
            out[i] += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * len(d) / avg))
    return out


@pytest.fixture(scope="module")
def index():
    return LexicalIndex.build(IDS, TEXTS)


@pytest.mark.parametrize("query", ["patient P017 pleural effusion", "pneumonia right lower lobe", "C012 amplifier",
                                   "acquired 2020-01-13", "radiograph"])
def test_scores_match_reference_bm25(index, query):
    ref = reference_bm25(query, TEXTS)
    hits = index.search(query, 10)
    expected = [IDS[i] for i in np.lexsort((IDS, -ref)) if ref[i] > 0]
    assert hits.ids.tolist() == expected
    got = dict(zip(hits.ids.tolist(), hits.scores.tolist()))
    for i, cid in enumerate(IDS):
        assert got.get(cid, 0.0) == pytest.approx(ref[i], rel=1e-5, abs=1e-6)


def test_identifiers_stay_whole_and_are_recognised():
    assert "p017" in lexical_terms("patient P017") and "2020-01-13" in lexical_terms("on 2020-01-13.")
    assert is_identifier("p017") and is_identifier("c012") and is_identifier("2020-01-13")
    assert not is_identifier("chest") and not is_identifier("3") and not is_identifier("2020")


def test_negated_terms_are_indexed_apart_up_to_the_end_of_the_clause():
    terms = lexical_terms("Clear lungs, no effusion or pneumothorax. Impression: no acute abnormality (normal), "
                          "patient P017 without change but stable.")
    assert {stem("lungs"), stem("normal"), stem("stable")} <= set(terms)  # outside any negation's clause
    assert {"not:" + stem(w) for w in ("effusion", "pneumothorax", "acute", "abnormality", "change")} <= set(terms)
    assert not {stem(w) for w in ("effusion", "pneumothorax", "abnormality", "change")} & set(terms)
    assert "p017" in terms  # identifiers are never negated


def test_a_negated_finding_does_not_match_a_search_for_it():
    texts = ["Clear lungs, normal heart, no effusion or pneumothorax; no acute abnormality.",
             "Right pleural effusion with a meniscus.",
             "Enlarged heart, cardiomegaly; no effusion."]
    index = LexicalIndex.build([1, 2, 3], texts)
    assert index.search("pleural effusion", 5).ids.tolist() == [2]
    assert index.search("which abnormality does this film show?", 5).ids.tolist() == []
    # a query that negates the finding too matches the documents that negate it
    assert set(index.search("no effusion", 5).ids.tolist()) == {1, 3}


def test_identifier_matches_find_only_named_documents(index):
    assert index.identifier_matches("Compare the studies of patient P017").tolist() == [10, 11]
    assert index.identifier_matches("what was acquired on 2020-01-13?").tolist() == [10, 40]
    assert index.identifier_matches("patient P999 chest").tolist() == []
    assert index.identifier_matches("patient P017", allow=np.array([11])).tolist() == [11]


def test_search_respects_allow_k_and_unknown_terms(index):
    top = index.search("patient P017", 1).ids.tolist()
    assert len(top) == 1 and top == index.search("patient P017", 10).ids[:1].tolist() and top[0] in (10, 11)
    assert set(index.search("patient P017", 10, allow=np.array([11, 12])).ids.tolist()) <= {11, 12}
    assert len(index.search("zebra quantum", 5).ids) == 0
    assert len(index.search("what is shown", 5).ids) == 0  # request and stop words never match
    with pytest.raises(ValueError, match="k must be"):
        index.search("x", 0)


def test_specificity_orders_generic_below_specific(index):
    generic = index.specificity("What is the most likely finding on this chest radiograph?")
    disease = index.specificity("Find radiographs showing pneumonia")
    named = index.specificity("patient P071")
    assert generic < disease <= named <= 1.0
    assert index.specificity("nothing here matches") == 0.0
    assert LexicalIndex.build([], []).specificity("P017") == 0.0


def test_build_rejects_bad_input():
    with pytest.raises(ValueError, match="one text per id"):
        LexicalIndex.build([1, 2], ["a"])
    with pytest.raises(ValueError, match="repeat"):
        LexicalIndex.build([1, 1], ["a", "b"])


def test_knowledge_base_lexical_indexes_captions_ids_and_metadata_and_refreshes(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", models=FakeStack())
    kb.add_image(flat((1, 0, 0)), doc_id="scan-a", caption="chest film of patient P017", metadata={"site": "W42"})
    kb.commit()
    lex = kb.lexical()
    assert len(lex) == 1  # document chunk only, not its regions and patches
    doc_chunk = kb.store.document_chunk_ids(["scan-a"])["scan-a"]
    assert lex.identifier_matches("P017").tolist() == [doc_chunk]
    assert lex.identifier_matches("site W42").tolist() == [doc_chunk]
    assert lex.search("scan", 5).ids.tolist() == [doc_chunk]  # the doc id is searchable
    kb.add_image(flat((0, 1, 0)), doc_id="scan-b", caption="patient P018")
    kb.commit()
    assert len(kb.lexical()) == 2 and len(kb.lexical().identifier_matches("P018")) == 1
    kb.close()


def _same_index(a: LexicalIndex, b: LexicalIndex) -> bool:
    return (np.array_equal(a.ids, b.ids) and np.array_equal(a.lengths, b.lengths) and a.postings.keys() == b.postings.keys()
            and all(np.array_equal(a.postings[t][0], b.postings[t][0]) and np.array_equal(a.postings[t][1], b.postings[t][1])
                    for t in a.postings))


def test_updated_equals_a_fresh_build_and_refuses_ids_out_of_order():
    index = LexicalIndex.build(IDS, TEXTS)
    grown = index.updated([11, 999], [50, 51], ["Circuit C013 rev B: RC low-pass filter.", "Forest canopy, tile T043."])
    fresh = LexicalIndex.build([10, 12, 30, 40, 50, 51], [TEXTS[0], *TEXTS[2:], "Circuit C013 rev B: RC low-pass filter.",
                                                         "Forest canopy, tile T043."])
    assert _same_index(grown, fresh) and _same_index(index, LexicalIndex.build(IDS, TEXTS))  # the old one is untouched
    with pytest.raises(ValueError, match="above every id"):
        index.updated([], [40], ["again"])
    with pytest.raises(ValueError, match="one text per id"):
        index.updated([], [60, 61], ["one"])


def test_knowledge_base_lexical_follows_adds_removals_commits_and_rollbacks(tmp_path, monkeypatch):
    """After every step the index a writer and a reader hold equals one built from scratch,
    and once built it is updated, not rebuilt (only the new chunks are tokenised)."""
    rng = np.random.default_rng(0)
    writer = KnowledgeBase.create(tmp_path / "kb", models=FakeStack())
    reader = None
    built: list[int] = []
    build = LexicalIndex.build.__func__
    monkeypatch.setattr(LexicalIndex, "build", classmethod(lambda cls, ids, texts: built.append(1) or build(cls, ids, texts)))

    def scratch(kb: KnowledgeBase) -> LexicalIndex:
        return build(LexicalIndex, *kb.views.lexical_texts(0, kb.store.max_chunk_id()))

    rollbacks = 0
    try:
        writer.add_image(flat((0.5, 0.5, 0.5)), doc_id="first", caption="the first case")
        live: list[str] = ["first"]
        assert _same_index(writer.lexical(), scratch(writer))
        for step in range(40):
            action = rng.choice(["add", "add", "remove", "commit", "rollback"])
            if action == "add" or not live and action == "remove":
                name = f"doc{step}"
                writer.add_image(flat(tuple(rng.uniform(0, 1, 3))), doc_id=name, caption=f"case {step} of {name}")
                live.append(name)
            elif action == "remove":
                writer.remove(live.pop(int(rng.integers(len(live)))))
            elif action == "commit":
                writer.commit()
                if reader is None:
                    reader = KnowledgeBase.open(tmp_path / "kb", models=FakeStack(), read_only=True)
            else:
                writer.rollback()
                rollbacks += 1
                live = sorted(writer.documents())
            assert _same_index(writer.lexical(), scratch(writer)), (step, action)
            if reader is not None:
                reader.refresh()
                assert _same_index(reader.lexical(), scratch(reader)), (step, action)
        # built from scratch once per holder, and by the writer again after each rollback; else updated
        assert reader is not None and rollbacks > 0 and len(built) == 2 + rollbacks
    finally:
        writer.close()
        if reader is not None:
            reader.close()


def test_the_document_chunk_map_follows_adds_and_removals(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        def scratch():
            rows = kb.store.conn.execute("SELECT c.id, d.id FROM chunks c JOIN chunks d ON d.doc_id = c.doc_id "
                                         "AND d.level = 'document' ORDER BY c.id").fetchall()
            return [r[0] for r in rows], [r[1] for r in rows]

        for step, colour in enumerate([(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0)]):
            kb.add_image(flat(colour), doc_id=f"d{step}")
            if step == 2:
                kb.remove("d0")
            kb.commit()
            keys, values = kb.views.document_chunk_map()
            assert (keys.tolist(), values.tolist()) == scratch()
            assert kb.views.kept["doc_chunk_map"][2][0] is keys  # kept across the commit, to be updated next time
        doc = kb.store.document_chunk_ids(["d1"])["d1"]
        parts = [c for c, r in kb.store.chunks(kb.store.chunk_ids()).items() if r.doc_id == "d1"]
        assert set(kb.document_chunk_of(np.array(parts)).tolist()) == {doc}


def test_level_ids_are_kept_across_commits_and_follow_adds_and_removals(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        for step, colour in enumerate([(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0)]):
            kb.add_image(flat(colour, spot=((0, 0, 0), 8, 8, 12)), doc_id=f"d{step}")
            if step == 2:
                kb.remove("d1")
            kb.commit()
            for levels in (["region", "patch"], ["document"]):
                assert kb.level_ids(levels).tolist() == kb.store.chunk_ids(levels=levels).tolist()
        assert "levels:patch,region" in kb.views.kept and "levels:document" in kb.views.kept
        kb.remove("d3")
        kb.rollback()  # drops the kept views: they may hold what the rollback undid
        assert not kb.views.kept and kb.level_ids(["document"]).tolist() == kb.store.chunk_ids(levels=["document"]).tolist()
