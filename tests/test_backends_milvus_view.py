"""An embedded knowledge base exported to Milvus answers the pipeline's searches with the same ids."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig  # noqa: E402
from kira.knowledge_base.milvus.collection_view import MilvusKnowledgeView, export_knowledge_base  # noqa: E402
from kira.config import RetrievalConfig  # noqa: E402
from kira.pipeline.query import QueryVectors, lexical_rankings, text_rankings, visual_rankings  # noqa: E402
from milvus_fixtures import release_lite  # noqa: E402


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    from skimage import data

    from kira.knowledge_base.kb import KnowledgeBase
    from kira.models import load_default

    root = tmp_path_factory.mktemp("view")
    stack = load_default(prefer_cuda=False, threads=1)
    kb = KnowledgeBase.create(root / "kb", models=stack)
    images = {"coffee": (data.coffee(), "a cup of coffee on a saucer", {"site": "a"}),
              "chelsea": (data.chelsea(), "a tabby cat", {"site": "b"}),
              "astronaut": (data.astronaut(), "an astronaut portrait", {"site": "a"}),
              "rocket": (data.rocket(), "a rocket on the launch pad", {"site": "b"})}
    for i, (doc_id, (pixels, caption, meta)) in enumerate(images.items()):
        kb.add_image(pixels[::4, ::4], doc_id=doc_id, caption=caption, metadata=meta,
                     sequence=("trip", float(i)) if doc_id in ("coffee", "rocket") else None)
    kb.commit()
    uri = str(root / "kb.db")
    config = MilvusConfig(uri=uri, collection="kb", visual_dim=stack.image.dim, text_dim=stack.text.dim, index="FLAT")
    col = MilvusCollection.open(config)
    written = export_knowledge_base(kb, col)
    yield kb, MilvusKnowledgeView(col), stack, written
    col.close()
    kb.close()
    release_lite(uri)


def _query(stack, kb) -> QueryVectors:
    from skimage import data

    image = np.asarray(data.coffee()[::5, ::5])
    raw = np.asarray(stack.image.encode([image]), np.float32)
    text = np.asarray(stack.text.encode(["a cup of coffee"]), np.float32)[0]
    return QueryVectors(question="a cup of coffee", image_vector=kb.visual_query(raw)[0] / np.linalg.norm(raw),
                        text_vector=text / np.linalg.norm(text), text_query="a cup of coffee")


def _same(a, b):
    """Same scores, and the same ids up to the order of exact ties (a document's region and patch chunks
    share its text vector, and which of equal-scored chunks a capped search keeps is the engine's choice)."""
    assert [r.path for r in a] == [r.path for r in b]
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.scores, y.scores, atol=1e-5)
        ties_x: dict[float, set] = {}
        ties_y: dict[float, set] = {}
        for ids, scores, ties in ((x.ids, x.scores, ties_x), (y.ids, y.scores, ties_y)):
            for i, s in zip(ids.tolist(), scores.tolist()):
                ties.setdefault(round(s, 4), set()).add(i)
        unique = [s for s, members in ties_y.items() if len(members) == 1]
        assert all(ties_x.get(s) == ties_y[s] for s in unique)


def test_every_chunk_is_exported_with_its_document_fields(both):
    kb, view, _, written = both
    assert written == len(kb.store.chunk_ids()) == view.collection.count()
    assert len(view.index("visual")) == len(kb.index("visual"))
    assert view.group_members("temporal", "trip") == ["coffee", "rocket"]
    assert view.collection.count('metadata["site"] == "a" and level == "document"') == 2


def test_the_pipelines_visual_and_text_paths_give_the_same_ids_on_milvus(both):
    kb, view, stack, _ = both
    config = RetrievalConfig()
    q = _query(stack, kb)
    _same(visual_rankings(view, q, config, None), visual_rankings(kb, q, config, None))
    got, want = text_rankings(view, q, [], config, None), text_rankings(kb, q, [], config, None)
    _same(got, want)
    for g, w in zip(got, want):  # tied or not, the same documents in the same order
        assert kb.document_chunk_of(g.ids).tolist() == kb.document_chunk_of(w.ids).tolist()
    allow = kb.store.chunk_ids(levels=["document", "region"])
    _same(visual_rankings(view, q, config, allow), visual_rankings(kb, q, config, allow))


def test_milvus_bm25_is_the_lexical_path(both):
    kb, view, stack, _ = both
    rankings = lexical_rankings(view, _query(stack, kb), RetrievalConfig(), None)
    assert rankings and not rankings[0].cosine and (rankings[0].scores > 0).all()
    top = kb.store.chunks(rankings[0].ids[:1])
    assert next(iter(top.values())).doc_id == "coffee"
