"""The oldest Milvus server kira supports (issue 33.6): an older one is refused at open, naming the version."""

from __future__ import annotations

import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')

from kira.knowledge_base.milvus import schema as milvus_schema  # noqa: E402
from kira.knowledge_base.milvus.schema import MIN_SERVER, MIN_SERVER_WITHOUT_BM25, ServerTooOld, check_server  # noqa: E402


class FakeServer:
    """A pymilvus client whose server answers `version`; records whether it was closed."""

    version = "v2.3.5"
    closed = 0

    def __init__(self, uri: str = "", token: str = "", timeout: float = 0.0, **kwargs) -> None:
        self.uri = uri

    def get_server_version(self) -> str:
        return type(self).version

    def close(self) -> None:
        type(self).closed += 1


@pytest.fixture()
def fake(monkeypatch):
    import pymilvus

    FakeServer.closed = 0
    monkeypatch.setattr(pymilvus, "MilvusClient", FakeServer)
    return FakeServer


def test_a_2_3_server_is_refused_at_open_naming_the_version_needed(fake):
    from kira.knowledge_base import KnowledgeBase

    fake.version = "v2.3.5"
    with pytest.raises(ServerTooOld, match=r"is version v2.3.5; kira needs Milvus 2.5 or newer \(its BM25 function"):
        KnowledgeBase.open("kb", backend="milvus", uri="http://127.0.0.1:19530")
    with pytest.raises(ValueError, match="kira needs Milvus 2.5"):  # create too, before anything is written
        KnowledgeBase.create("kb", backend="milvus", uri="http://127.0.0.1:19530")
    assert fake.closed == 2


def test_versions_at_the_limits():
    assert MIN_SERVER == (2, 5, 0) and MIN_SERVER_WITHOUT_BM25 == (2, 4, 0)
    for version, minimum, ok in (("v2.5.0", MIN_SERVER, True), ("2.6.3", MIN_SERVER, True),
                                 ("v2.4.17", MIN_SERVER, False), ("v2.4.0", MIN_SERVER_WITHOUT_BM25, True),
                                 ("v2.3.5", MIN_SERVER_WITHOUT_BM25, False), ("milvus_lite-3.2.2", MIN_SERVER, True)):
        FakeServer.version = version
        if ok:
            assert check_server(FakeServer(), "http://h:19530", minimum) == version
        else:
            with pytest.raises(ServerTooOld, match=f"kira needs Milvus {minimum[0]}.{minimum[1]} or newer"):
                check_server(FakeServer(), "http://h:19530", minimum)


def test_an_unreadable_version_is_logged_and_let_through(caplog):
    FakeServer.version = "nightly"
    assert check_server(FakeServer(), "http://h:19530") == "nightly"
    assert "cannot read" in caplog.text


def test_a_collection_without_bm25_needs_only_2_4(fake, monkeypatch):
    monkeypatch.setattr(milvus_schema.MilvusCollection, "attach", classmethod(lambda cls, client, config, create: "ok"))
    fake.version = "v2.4.5"
    config = milvus_schema.MilvusConfig(uri="http://h:19530", collection="c", visual_dim=4, text_dim=4, bm25=False)
    assert milvus_schema.MilvusCollection.open(config) == "ok"
    with pytest.raises(ServerTooOld, match="2.5"):
        milvus_schema.MilvusCollection.open(milvus_schema.MilvusConfig(uri="http://h:19530", collection="c",
                                                                       visual_dim=4, text_dim=4))
