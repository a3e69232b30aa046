"""MilvusIndex is a VectorIndex: the pipeline's search gives the core FlatIndex's ids on the same vectors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from kira import _core  # noqa: E402
from kira.backends import VectorIndex, search_options  # noqa: E402
from kira.knowledge_base.milvus.index import MilvusIndex, filter_expression, hybrid_search, lexical_search  # noqa: E402
from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig  # noqa: E402
from kira.knowledge_base.milvus.writes import upsert_chunks  # noqa: E402
from kira.retrieval.search import search  # noqa: E402
from milvus_fixtures import records_for, release_lite, unit_rows  # noqa: E402

N_DOCS, PER_DOC, DIM = 60, 5, 16


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("milvus") / "kb.db")
    visual, text = unit_rows(N_DOCS * PER_DOC, DIM, seed=11), unit_rows(N_DOCS * PER_DOC, 8, seed=12)
    records = records_for(N_DOCS, PER_DOC, visual, text)
    cols = {}
    for index in ("FLAT", "HNSW"):
        cfg = MilvusConfig(uri=uri, collection=f"c_{index.lower()}", visual_dim=DIM, text_dim=8, index=index,
                           hnsw_m=8, ef_construction=64, ef_search=32)
        cols[index] = MilvusCollection.open(cfg)
        upsert_chunks(cols[index], records)
    flat = _core.FlatIndex(DIM)
    flat.add(np.array([r.id for r in records], np.int64), visual)
    yield cols, flat, records, visual
    for col in cols.values():
        col.close()
    release_lite(uri)


def _same(got, want):
    for (a_ids, a_scores), (b_ids, b_scores) in zip(got, want):
        assert a_ids.tolist() == b_ids.tolist()
        np.testing.assert_allclose(a_scores, b_scores, atol=1e-5)


def test_an_exact_milvus_index_gives_the_core_flat_indexs_ids_through_the_pipeline_search(corpus):
    cols, flat, records, _ = corpus
    index = MilvusIndex(cols["FLAT"], "visual")
    assert isinstance(index, VectorIndex) and index.dim == DIM and len(index) == len(records)
    assert search_options(index, ef=64) == {}  # an exact index takes no ef
    queries = unit_rows(6, DIM, seed=13)
    _same(search(index, queries, 10, None), search(flat, queries, 10, None))
    allow = np.array([r.id for r in records[::3]], np.int64)
    _same(search(index, queries, 10, allow), search(flat, queries, 10, allow))
    ids = np.array([r.id for r in records], np.int64)
    groups = _core.GroupMap(ids, np.array([r.doc_chunk for r in records], np.int64))
    got = search(index, queries, 10, None, groups, 2)
    _same(got, search(flat, queries, 10, None, groups, 2))
    for row_ids, _ in got:  # at most 2 chunks of one document
        docs = groups.group_of(row_ids)
        assert np.bincount(docs - docs.min()).max() <= 2


def test_hnsw_takes_ef_and_keeps_recall_at_10_against_exact(corpus):
    cols, flat, _, _ = corpus
    index = MilvusIndex(cols["HNSW"], "visual")
    assert search_options(index, ef=96) == {"ef": 96}
    queries = unit_rows(40, DIM, seed=14)
    got = search(index, queries, 10, None, ef=96)
    want = search(flat, queries, 10, None)
    recall = np.mean([len(set(a.tolist()) & set(b.tolist())) / 10 for (a, _), (b, _) in zip(got, want)])
    assert recall >= 0.95


def test_levels_and_metadata_filters_run_in_milvus_and_equal_an_allow_list(corpus):
    cols, flat, records, _ = corpus
    index = MilvusIndex(cols["FLAT"], "visual")
    queries = unit_rows(3, DIM, seed=15)
    ids, scores = index.search(queries, 8, levels=["patch"], where={"site": [0, 2]})
    allow = np.array([r.id for r in records if r.level == "patch" and r.metadata["site"] in (0, 2)], np.int64)
    want_ids, want_scores = flat.search(queries, 8, allow=allow)
    assert ids.tolist() == want_ids.tolist()
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)
    assert filter_expression(levels=["document"], where={"name": 'a "b"'}) == \
        'level in ["document"] and metadata["name"] == "a \\"b\\""'


def test_an_empty_allow_list_returns_padding_and_bad_shapes_name_the_fix(corpus):
    index = MilvusIndex(corpus[0]["FLAT"], "visual")
    ids, scores = index.search(unit_rows(2, DIM), 4, allow=np.zeros(0, np.int64))
    assert (ids == -1).all() and (scores == -1).all()
    with pytest.raises(ValueError, match=r"queries must be \(m, 16\)"):
        index.search(np.zeros((2, 3), np.float32), 4)
    with pytest.raises(ValueError, match="1..16384"):
        index.search(unit_rows(1, DIM), 0)


def test_contains_and_get_vectors_read_what_was_written(corpus):
    cols, _, records, visual = corpus
    index = MilvusIndex(cols["FLAT"], "visual")
    assert index.contains(records[7].id) and not index.contains(10**9)
    picked = np.array([records[9].id, records[2].id], np.int64)
    np.testing.assert_allclose(index.get_vectors(picked), visual[[9, 2]], atol=1e-6)
    with pytest.raises(ValueError, match="no visual vector for chunk id"):
        index.get_vectors(np.array([10**9]))


def test_bm25_full_text_and_the_rrf_hybrid_run_in_milvus(corpus):
    cols, flat, records, visual = corpus
    col = cols["FLAT"]
    ids, _ = lexical_search(col, "striped", 20)
    assert len(ids) == 20 and all("striped" in records[i - 1].description for i in ids)
    ids, _ = lexical_search(col, "striped", 5, levels=["document"])
    assert all(records[i - 1].level == "document" for i in ids)
    query = visual[0]
    dense, _ = flat.search(query[None, :], 20)
    text_ids, _ = lexical_search(col, "round", 20)
    fused, scores = hybrid_search(col, "round", query, "visual", 5, candidates=20)
    want: dict[int, float] = {}
    for ranking in (dense[0].tolist(), text_ids.tolist()):
        for rank, cid in enumerate(ranking):
            want[cid] = want.get(cid, 0.0) + 1.0 / (60 + rank + 1)
    np.testing.assert_allclose(scores, sorted(want.values(), reverse=True)[:5], atol=1e-6)
    assert fused[0] == records[0].id  # first in both lists


def test_ivf_takes_nprobe_and_visiting_every_cell_is_exact(tmp_path):
    uri = str(tmp_path / "ivf.db")
    visual, text = unit_rows(200, DIM, seed=31), unit_rows(200, 8, seed=32)
    records = records_for(40, 5, visual, text)
    config = MilvusConfig(uri=uri, collection="ivf", visual_dim=DIM, text_dim=8, index="IVF_FLAT", nlist=8, nprobe=1)
    assert config.search_params(nprobe=8) == {"metric_type": "COSINE", "params": {"nprobe": 8}}
    try:
        with MilvusCollection.open(config) as col:
            upsert_chunks(col, records)
            col.flush()
            assert col.client.describe_index(col.name, "visual")["params"] == {"nlist": 8}  # the knobs reach Milvus
            index = MilvusIndex(col, "visual")
            assert search_options(index, ef=64) == {}  # IVF has no candidate list; nprobe is its own option
            flat = _core.FlatIndex(DIM)
            flat.add(np.array([r.id for r in records], np.int64), visual)
            queries = unit_rows(5, DIM, seed=33)
            ids, scores = index.search(queries, 10, nprobe=8)
            want_ids, want_scores = flat.search(queries, 10)
            assert ids.tolist() == want_ids.tolist()
            np.testing.assert_allclose(scores, want_scores, atol=1e-5)
    finally:
        release_lite(uri)
