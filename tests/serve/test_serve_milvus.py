"""The service over a Milvus-backed knowledge base (Milvus Lite, one process): search, ask, add, commit."""

from __future__ import annotations

import io

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')
skimage_data = pytest.importorskip("skimage.data")

from fastapi.testclient import TestClient  # noqa: E402
from milvus_fixtures import release_lite  # noqa: E402
from PIL import Image  # noqa: E402

from kira.knowledge_base import KnowledgeBase  # noqa: E402
from kira.serve import create_app  # noqa: E402
from kira.serve.config import ServeConfig  # noqa: E402


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_milvus") / "kb"
    kb = KnowledgeBase.create(path, backend="milvus")
    kb.add_image(skimage_data.coffee(), doc_id="coffee", caption="a cup of coffee on a saucer")
    kb.add_image(skimage_data.rocket(), doc_id="rocket", caption="a rocket on the launch pad")
    kb.commit()
    kb.close()
    release_lite(path / "milvus.db")
    yield path
    release_lite(path / "milvus.db")


def _png(image) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, "PNG")
    return buf.getvalue()


def test_a_milvus_knowledge_base_is_served_searched_asked_and_written(kb_path):
    with TestClient(create_app(str(kb_path))) as client:
        assert client.get("/health").json()["documents"] == 2
        hits = client.post("/search", json={"text": "a cup of coffee", "top_k": 3}).json()["results"]
        assert hits[0]["doc_id"] == "coffee"
        answer = client.post("/ask", json={"question": "a rocket on the launch pad"}).json()
        assert answer["answer"] and answer["evidence"][0]["doc_id"] == "rocket"
        added = client.post("/documents", files={"image": ("a.png", _png(skimage_data.astronaut()), "image/png")},
                            data={"doc_id": "astronaut", "caption": "an astronaut in a space suit"})
        assert added.status_code == 201
        assert client.post("/commit").json()["generation"] == 2
        hits = client.post("/search", files={"image": ("q.png", _png(skimage_data.astronaut()), "image/png")},
                           data={"top_k": "3"}).json()["results"]
        assert hits[0]["doc_id"] == "astronaut"
        assert client.delete("/documents/coffee").status_code == 200
        assert client.post("/commit").status_code == 200
        assert client.get("/documents/coffee").status_code == 404


def test_several_workers_on_a_milvus_lite_file_are_refused_with_the_fix(kb_path):
    with pytest.raises(ValueError, match="--workers 1"):
        ServeConfig(kb_path=str(kb_path), role="reader", read_only=True)
