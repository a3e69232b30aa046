"""A Milvus-backed knowledge base: opened from the uri alone, refusals at open, idempotent writes, passages."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from milvus_fixtures import release_lite  # noqa: E402
from pipeline_fakes import FakeStack, GridColourEncoder, flat  # noqa: E402

from kira import DomainProfile, KiraConfig  # noqa: E402
from kira.knowledge_base import KnowledgeBase  # noqa: E402

RED, GREEN, BLUE = (1, 0, 0), (0, 1, 0), (0, 0, 1)


class OtherImageEncoder(GridColourEncoder):
    """Same dimension, another encoder: its vectors are not comparable."""


@pytest.fixture()
def uri(tmp_path):
    path = tmp_path / "shared.db"
    yield str(path)
    release_lite(path)


def _collections(uri: str) -> list[str]:
    from pymilvus import MilvusClient

    return sorted(MilvusClient(uri=uri).list_collections())


def test_a_knowledge_base_named_at_a_uri_opens_from_milvus_alone_with_its_config_and_profile(uri, tmp_path):
    config = dataclasses.replace(KiraConfig(), retrieval=dataclasses.replace(KiraConfig().retrieval, candidates=33))
    profile = DomainProfile(name="colours", concepts=("a red card",))
    kb = KnowledgeBase.create("team photos", config=config, models=FakeStack(), backend="milvus", uri=uri,
                              profile=profile, index="hnsw", levels=["document", "patch"])
    kb.add_image(flat(RED), doc_id="red", caption="red card", sequence="s")
    kb.add_image(flat(GREEN), doc_id="green", caption="green lawn", sequence="s")
    kb.close()
    assert not any(tmp_path.glob("team*"))  # nothing kept in a local file
    again = KnowledgeBase.open("team photos", uri=uri)  # the uri alone says "milvus"
    try:
        assert again.config.retrieval.candidates == 33 and again.profile == profile
        assert again.levels == ("document", "patch") and again.stats()["index_kind"] == "hnsw"
        assert again.built_with() == {"image": "GridColourEncoder", "text": "HashingTextEncoder"}
        assert again.store.groups() == [("temporal", "s", ["red", "green"])]  # positions 0, 1 as the embedded store
        assert again.store.generation() == 1
    finally:
        again.close()
    with pytest.raises(ValueError, match="no kira knowledge base 'other'"):
        KnowledgeBase.open("other", uri=uri)
    with pytest.raises(ValueError, match="already exists"):
        KnowledgeBase.create("team photos", models=FakeStack(), backend="milvus", uri=uri)


def test_another_image_encoder_or_changed_dimensions_are_refused_at_open_with_nothing_written(uri):
    kb = KnowledgeBase.create("kb", models=FakeStack(), backend="milvus", uri=uri)
    kb.add_image(flat(RED), doc_id="red")
    kb.close()
    before = _collections(uri)
    with pytest.raises(ValueError, match="built with the image encoder GridColourEncoder"):
        KnowledgeBase.open("kb", models=FakeStack(image=OtherImageEncoder()), uri=uri)
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri)
    client.upsert("kb__kb", [{"key": "setting:dims", "value": json.dumps({"visual": 7, "text": 64}),
                              "unused": [1.0, 0.0]}])
    with pytest.raises(ValueError, match="does not match.*'visual': dim 48, config says 7"):
        KnowledgeBase.open("kb", uri=uri)
    assert _collections(uri) == before
    assert client.get("kb__kb", ids=["setting:generation"], output_fields=["value"])[0]["value"] == "1"


def test_an_unreachable_server_fails_at_open_naming_the_uri():
    with pytest.raises(ConnectionError, match="127.0.0.1:9"):
        KnowledgeBase.open("kb", backend="milvus", uri="http://127.0.0.1:9")


def test_without_pymilvus_the_error_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pymilvus", None)
    with pytest.raises(ImportError, match=r"kira\[milvus\]"):
        KnowledgeBase.create(tmp_path / "kb", backend="milvus")
    with pytest.raises(ValueError, match="backend must be 'embedded' or 'milvus'"):
        KnowledgeBase.create(tmp_path / "kb2", backend="faiss")
    with pytest.raises(ValueError, match="a uri is for the Milvus backend"):
        KnowledgeBase.open("kb", backend="embedded", uri="http://127.0.0.1:9")


def test_a_batch_written_again_duplicates_nothing_and_passages_are_stored(uri):
    from kira.knowledge_base.milvus.kb_writes import milvus_rows, write_items
    from kira.knowledge_base.writing import prepare_batch

    kb = KnowledgeBase.create("kb", models=FakeStack(), backend="milvus", uri=uri)
    try:
        kb.add_image(flat(BLUE), doc_id="blue", caption="blue sky")
        kb.add_document("page", passages=["The Jolly Roger flag is black.", "Pirates sailed the Caribbean."],
                        caption="a page about pirates")
        generation = kb.commit()
        assert kb.commit() == generation == kb.store.generation()  # nothing written since: nothing published
        chunks = kb.stats()["chunks"]
        assert chunks["passage"] == 2
        item = {"pixels": flat(GREEN), "doc_id": "green", "caption": "green lawn", "tags": (), "metadata": {}}
        batch = milvus_rows(prepare_batch(kb.models, [item], config=kb.config, levels=kb.levels), [50])
        storage = kb.storage
        assert write_items(storage.collection, storage.records, batch) == write_items(storage.collection, storage.records, batch)
        kb.commit()
        after = kb.stats()["chunks"]
        assert after["document"] == chunks["document"] + 1 and after["patch"] == 2 * chunks["patch"]
        hits = kb.lexical().search("Jolly Roger", 3)
        rows = kb.store.chunks(hits.ids)
        assert rows[int(hits.ids[0])].level == "passage" and rows[int(hits.ids[0])].doc_id == "page"
        before = kb.stats()["chunks"]
        with pytest.raises(ValueError, match="over Milvus's 65535"):  # a document record too big for one row
            kb.add_image(flat(RED), doc_id="huge", metadata={"notes": "x" * 70_000})
        assert kb.stats()["chunks"] == before and not kb.store.has_document("huge")  # nothing written
        vectors = kb.index("visual").get_vectors(np.array([r.id for r in batch.records[:2]]))
        assert np.allclose(vectors, [r.visual / np.linalg.norm(r.visual) for r in batch.records[:2]], atol=1e-6)
    finally:
        kb.close()


def test_a_reader_opened_before_the_first_image_picks_up_a_writers_commits(uri):
    from kira.pipeline import Kira

    writer = KnowledgeBase.create("kb", models=FakeStack(), backend="milvus", uri=uri)
    reader = KnowledgeBase.open("kb", models=FakeStack(), uri=uri, read_only=True)
    try:
        assert reader.index("visual") is None and len(reader) == 0
        writer.add_image(flat(RED), doc_id="red", caption="red card")
        writer.commit()
        assert reader.refresh() and not reader.refresh()
        assert len(reader.index("visual")) == len(writer.index("visual")) > 0
        writer.add_image(flat(BLUE), doc_id="blue", caption="blue sky")
        writer.commit()
        answer = Kira(reader).ask("blue sky", variant="dual_path")  # ask refreshes: the new rows are counted
        assert answer.evidence.items[0].doc_id == "blue"
        assert len(reader.index("text")) == len(writer.index("text"))
    finally:
        reader.close()
        writer.close()


def test_an_embedded_knowledge_base_copied_to_milvus_answers_alike_with_the_same_chunk_ids(uri, tmp_path):
    from skimage import data

    from kira.knowledge_base.milvus.copy import copy_to_milvus
    from kira.models import load_default
    from kira.pipeline import Kira

    stack = load_default()
    embedded = KnowledgeBase.create(tmp_path / "embedded", models=stack,
                                    profile=DomainProfile(name="photos", concepts=("a cup of coffee",)))
    embedded.add_image(data.coffee()[::2, ::2], doc_id="coffee", caption="a cup of coffee", tags=["drink"],
                       metadata={"site": "a"}, sequence=("table", 0))
    embedded.add_image(data.chelsea()[::2, ::2], doc_id="chelsea", caption="a tabby cat", sequence=("table", 1))
    embedded.add_image(data.rocket()[::2, ::2], doc_id="rocket")
    embedded.add_document("page", passages=["The rocket launched on a Sunday morning."], caption="launch notes")
    embedded.commit()
    copy = copy_to_milvus(embedded, "copied", uri=uri)
    try:
        assert copy.documents() == embedded.documents() and copy.profile == embedded.profile
        assert copy.store.groups() == embedded.store.groups()
        assert copy.store.provenances(["rocket"]) == embedded.store.provenances(["rocket"])
        assert copy.thumbnail("rocket").shape == embedded.thumbnail("rocket").shape
        ids = embedded.store.chunk_ids()
        assert np.array_equal(copy.store.chunk_ids(), ids)
        for question in ("a cup of coffee", "when did the rocket launch"):
            for variant in ("dual_path", "query_expansion"):
                a, b = (Kira(kb, models=stack).ask(question, variant=variant) for kb in (embedded, copy))
                assert [(i.chunk_id, round(i.score, 5)) for i in a.evidence.items] == [
                    (i.chunk_id, round(i.score, 5)) for i in b.evidence.items]
                assert a.answer.text == b.answer.text
        copy.add_image(data.moon()[::2, ::2], doc_id="moon", caption="the moon")  # ids above every copied one
        assert copy.store.document_chunk_ids(["moon"])["moon"] > ids.max()
    finally:
        copy.close()
        embedded.close()
    with KnowledgeBase.open(tmp_path / "embedded", read_only=True) as again, pytest.raises(ValueError,
                                                                                         match="already exists"):
        copy_to_milvus(again, "copied", uri=uri)
