"""The Milvus collection layer on Milvus Lite: schema, idempotent upserts, cascading deletes, refusals at open."""

from __future__ import annotations

import socket
import sys

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig, expected_fields  # noqa: E402
from kira.knowledge_base.milvus.writes import ChunkRecord, delete_documents, upsert_chunks  # noqa: E402
from milvus_fixtures import records_for, release_lite, unit_rows  # noqa: E402


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("milvus") / "kb.db")
    yield path
    release_lite(path)


def _config(uri: str, name: str, **kw) -> MilvusConfig:
    return MilvusConfig(uri=uri, collection=name, visual_dim=kw.pop("visual_dim", 12), text_dim=kw.pop("text_dim", 6),
                        **kw)


def test_a_new_collection_has_kiras_schema_and_holds_every_chunk_field(uri):
    cfg = _config(uri, "fields", batch_size=4)
    visual, text = unit_rows(6, 12, seed=1), unit_rows(6, 6, seed=2)
    with MilvusCollection.open(cfg) as col:
        described = {f["name"] for f in col.client.describe_collection(col.name)["fields"]}
        assert described == set(expected_fields(cfg))
        index = col.client.describe_index(col.name, "visual")
        assert (index["index_type"], index["metric_type"]) == ("HNSW", "COSINE")
        assert index["params"] == {"M": 16, "efConstruction": 200}
        records = records_for(2, 3, visual, text)
        records.append(ChunkRecord(id=100, doc_id="doc0", doc_chunk=1, level="passage", description="a page",
                                   text=text[0]))  # no visual vector
        assert upsert_chunks(col, records) == 7
        row = col.client.get(col.name, ids=[5], output_fields=["*"])[0]
        assert (row["doc_id"], row["doc_chunk"], row["level"], row["parent"]) == ("doc1", 4, "patch", 4)
        assert list(row["box"]) == [1, 1, 9, 9] and list(row["tags"]) == ["odd"]
        assert row["metadata"] == {"site": 1, "name": "d1"} and list(row["groups"]) == ["temporal:s1"]
        assert row["group_order"] == {"temporal:s1": 1.0}
        np.testing.assert_allclose(row["visual"], visual[4], atol=1e-6)
        assert col.count("has_visual == true") == 6 and col.count("has_text == true") == 7


def test_upserts_are_idempotent_by_chunk_id(uri):
    cfg = _config(uri, "idem", batch_size=3)
    visual, text = unit_rows(8, 12, seed=3), unit_rows(8, 6, seed=4)
    with MilvusCollection.open(cfg) as col:
        records = records_for(2, 4, visual, text)
        upsert_chunks(col, records)
        records[0].description = "changed"
        upsert_chunks(col, records)  # a retried job writes the same ids again
        assert col.count() == 8
        assert col.client.get(col.name, ids=[1], output_fields=["description"])[0]["description"] == "changed"


def test_deleting_a_document_deletes_all_its_chunks_and_nothing_else(uri):
    visual, text = unit_rows(9, 12, seed=5), unit_rows(9, 6, seed=6)
    with MilvusCollection.open(_config(uri, "cascade")) as col:
        upsert_chunks(col, records_for(3, 3, visual, text))
        assert delete_documents(col, ["doc1"]) == 3
        assert col.count("doc_id == \"doc1\"") == 0 and col.count() == 6
        assert delete_documents(col, ["nope"]) == 0 and col.count() == 6


def test_a_bad_record_is_refused_with_the_fix_and_its_batch_is_not_written(uri):
    visual, text = unit_rows(4, 12, seed=7), unit_rows(4, 6, seed=8)
    with MilvusCollection.open(_config(uri, "bad", batch_size=10)) as col:
        records = records_for(1, 4, visual, text)
        records[2].visual = np.zeros(12, np.float32)
        with pytest.raises(ValueError, match="chunk 3: vector is zero"):
            upsert_chunks(col, records)
        records[2].visual = np.ones(5, np.float32)
        with pytest.raises(ValueError, match="5 dimensions, the collection holds 12"):
            upsert_chunks(col, records)
        assert col.count() == 0


def test_a_dimension_or_schema_mismatch_is_refused_at_open_and_nothing_is_written(uri):
    visual, text = unit_rows(3, 12, seed=9), unit_rows(3, 6, seed=10)
    with MilvusCollection.open(_config(uri, "mismatch")) as col:
        upsert_chunks(col, records_for(1, 3, visual, text))
    with pytest.raises(ValueError, match="'visual': dim 12, config says 16"):
        MilvusCollection.open(_config(uri, "mismatch", visual_dim=16))
    with pytest.raises(ValueError, match="'description_bm25' is not in kira's schema"):
        MilvusCollection.open(_config(uri, "mismatch", bm25=False))
    with MilvusCollection.open(_config(uri, "mismatch"), create=False) as col:
        assert col.count() == 3
    with pytest.raises(LookupError, match="no collection 'absent'"):
        MilvusCollection.open(_config(uri, "absent"), create=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server_fails_at_open_naming_the_uri():
    dead = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(ConnectionError, match=f"cannot reach Milvus at '{dead}'"):
        MilvusCollection.open(_config(dead, "x", timeout=2.0))


def test_bad_config_names_the_fix():
    with pytest.raises(ValueError, match="use letters, digits"):
        _config("a.db", "my-kb")
    with pytest.raises(ValueError, match="choose 'HNSW', 'IVF_FLAT' or 'FLAT'"):
        _config("a.db", "kb", index="DISKANN")


def test_without_pymilvus_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymilvus", None)
    with pytest.raises(ImportError, match=r'pip install "kira\[milvus\]"'):
        MilvusCollection.open(_config("x.db", "kb"))
