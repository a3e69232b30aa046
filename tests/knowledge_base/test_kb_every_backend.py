"""What every knowledge-base backend does alike, run once per backend (`kb_factory`, tests/conftest.py): writes
and removals through the one write path, text pieces at ingest and later, `kira check`, and the domain adapter
(set on the embedded backend, refused on Milvus naming what to do)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pipeline_fakes import FakeStack, flat

from kira import KiraConfig
from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.check import check
from kira.knowledge_base.storage import Storage, StoredRows
from kira.text.pieces import summary_pieces

RED, GREEN, BLUE = (1, 0, 0), (0, 1, 0), (0, 0, 1)


def _config(pieces: bool) -> KiraConfig:
    base = KiraConfig()
    return dataclasses.replace(base, grounding=dataclasses.replace(base.grounding, pieces_at_ingest=pieces))


def _fill(kb: KnowledgeBase) -> None:
    kb.add_image(flat(RED), doc_id="red", caption="a red card. It is bright.", sequence=("cards", 0))
    kb.add_image(flat(GREEN), doc_id="green", caption="a green lawn. It is wide.", sequence=("cards", 1))
    kb.add_document("note", passages=["The red card came first. The green lawn came later."])
    kb.commit()


def _stored_pieces(kb: KnowledgeBase, doc_id: str) -> dict[tuple[str, str], np.ndarray]:
    caption = kb.documents([doc_id])[doc_id].caption or ""
    texts = {p for p in summary_pieces(caption)}
    texts |= {p for row in kb.chunks(kb.level_ids(["document", "passage"])).values() if row.doc_id == doc_id
              for p in summary_pieces(row.description)}
    return dict(kb.piece_vectors([(doc_id, t) for t in texts], FakeStack().text.dim))


def test_a_knowledge_base_writes_reads_and_removes_alike_on_this_backend(kb_factory, tmp_path):
    with kb_factory(tmp_path / "kb", models=FakeStack()) as kb:
        assert kb.backend == kb_factory.backend and kb.stats()["backend"] == kb_factory.backend
        assert isinstance(kb.storage, Storage) and isinstance(kb.storage.rows, StoredRows)
        first = kb.generation()
        _fill(kb)
        assert kb.generation() == first + 1 and len(kb) == 3 and kb.has_document("note")
        assert kb.compound_of() == {"red": "green", "green": "green"}  # keyed by its smallest doc id
        with pytest.raises(ValueError, match="already in the knowledge base"):
            kb.add_image(flat(BLUE), doc_id="red")
        assert len(kb) == 3  # nothing of the refused batch was stored
        kb.add_image(flat(BLUE), doc_id="blue", caption="blue sky", sequence="cards")  # joins the group last
        kb.commit()
        assert [docs for kind, gid, docs in kb.storage.rows.groups() if gid == "cards"] == [["red", "green", "blue"]]
        kb.remove("blue")
        kb.commit()
        assert not kb.has_document("blue") and kb.thumbnail("blue") is None and kb.thumbnail("red").shape[2] == 3
        with pytest.raises(ValueError, match="no document 'blue'"):
            kb.remove("blue")
        stats = kb.stats()
        assert stats["documents"] == 3 and stats["chunks"]["passage"] == 1 and stats["groups"]["temporal"] == 1


def test_text_pieces_are_stored_at_ingest_on_this_backend(kb_factory, tmp_path):
    with kb_factory(tmp_path / "kb", models=FakeStack(), config=_config(pieces=True)) as kb:
        _fill(kb)
        encoder = FakeStack().text
        for doc_id in ("red", "green", "note"):  # an image's pieces and a passage's
            pieces = _stored_pieces(kb, doc_id)
            assert pieces, doc_id
            for (_doc, text), vector in pieces.items():
                np.testing.assert_allclose(vector, encoder.encode([text])[0], atol=1e-5)
        assert kb.store_text_pieces() == 0  # every document has them already


def test_store_text_pieces_fills_what_ingest_left_out_on_this_backend(kb_factory, tmp_path):
    with kb_factory(tmp_path / "kb", models=FakeStack(), config=_config(pieces=False)) as kb:
        _fill(kb)
        assert _stored_pieces(kb, "red") == {} and _stored_pieces(kb, "note") == {}
        kb.add_image(flat(BLUE), doc_id="blue", caption="blue sky over the sea. The water is calm.")
        with pytest.raises(ValueError, match="commit"):
            kb.store_text_pieces()
        kb.commit()
        generation = kb.generation()
        with pytest.raises(ValueError, match="batch must be an integer"):
            kb.store_text_pieces(batch=0)
        assert kb.store_text_pieces(batch=2) == 4 and kb.store_text_pieces() == 0
        assert kb.generation() == generation  # the indexes did not change: readers rebuild nothing
        filled = _stored_pieces(kb, "blue")
        encoder = FakeStack().text
        for (_doc, text), vector in filled.items():
            np.testing.assert_allclose(vector, encoder.encode([text])[0], atol=1e-5)
        assert len(filled) >= 2 and _stored_pieces(kb, "note")
    with KnowledgeBase.open(tmp_path / "kb", models=FakeStack(), read_only=True) as kb, \
            pytest.raises(ValueError, match="read-only"):
        kb.store_text_pieces()


def test_kira_check_finds_nothing_wrong_on_this_backend(kb_factory, tmp_path):
    kb = kb_factory(tmp_path / "kb", models=FakeStack())
    _fill(kb)
    kb.close()
    if kb_factory.backend == "milvus":
        from milvus_fixtures import release_lite

        release_lite(tmp_path / "kb" / "milvus.db")  # check opens it again in this process
    report = check(tmp_path / "kb")
    assert report.ok and report.fixed, report.to_text()
    assert report.checked  # it looked at something


def test_the_domain_adapter_is_set_where_the_backend_keeps_one_and_refused_with_the_fix_elsewhere(kb_factory,
                                                                                                   tmp_path):
    with kb_factory(tmp_path / "kb", models=FakeStack()) as kb:
        _fill(kb)
        if kb_factory.backend == "embedded":
            kb.set_adapter(None)  # no adapter: the visual index holds the raw vectors, re-projected and saved
            assert kb.adapter is None and kb.stats()["adapter"] == ""
            return
        for call, what in ((lambda: kb.set_adapter(None), "set it"), (lambda: kb.adapt({"red": "a"}), "kb.adapt"),
                           (lambda: kb.classify(["red"]), "kb.classify")):
            with pytest.raises(ValueError, match=f"milvus backend.*{what} on an embedded knowledge base"):
                call()
        assert kb.adapter is None and kb.adaptation is None and len(kb) == 3
