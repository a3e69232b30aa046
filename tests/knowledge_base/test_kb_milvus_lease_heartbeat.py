"""An idle writer keeps its Milvus writer lease: the heartbeat thread (kira.knowledge_base.milvus.lease_heartbeat).

The server is Milvus Lite run as its own process on 127.0.0.1 (kira.knowledge_base.milvus.lite_server), as
tests/knowledge_base/test_kb_milvus_writer_lease.py has it. The heartbeat's interval is `LEASE_RENEW_S`,
set here to a fifth of a second; the tests wait for what the thread does, never for a time.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
import time

import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from pipeline_fakes import FakeStack, photo  # noqa: E402

from kira.knowledge_base import KnowledgeBase  # noqa: E402
from kira.knowledge_base.milvus import lease as lease_module  # noqa: E402
from kira.knowledge_base.milvus.lease import LEASE_KEY, WriterLeaseLost, read_lease  # noqa: E402
from kira.knowledge_base.milvus.lease_heartbeat import LeaseHeartbeat  # noqa: E402
from milvus_fixtures import served_lite  # noqa: E402

WAIT_S = 60.0  # how long a test waits for the thread to do what it must (it does so within a few beats)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served_lite(tmp_path_factory.mktemp("heartbeat") / "data") as uri:
        yield uri


@pytest.fixture(autouse=True)
def fast_heartbeat(monkeypatch):
    monkeypatch.setattr(lease_module, "LEASE_RENEW_S", 0.2)  # a few beats a second: no ping storm on the server


def _until(done, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT_S:.0f} s: {what}")
        time.sleep(0.01)


def _heartbeats() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kira lease heartbeat")]


def test_an_idle_writer_renews_its_lease_until_it_is_closed(server):
    kb = KnowledgeBase.create("idle", models=FakeStack(), backend="milvus", uri=server)
    try:
        kb.add_image(photo(0), doc_id="a")
        kb.commit()
        first = read_lease(kb.storage.records)
        thread = kb.storage.lease.heartbeat.thread
        assert thread.daemon and thread.is_alive()  # never keeps the process alive
        _until(lambda: read_lease(kb.storage.records)["heartbeat"] > first["heartbeat"], "the heartbeat advances")
        renewed = read_lease(kb.storage.records)
        assert renewed["token"] == first["token"] and renewed["since"] == first["since"]  # the same lease, renewed
        kb.add_image(photo(1), doc_id="b")  # the writer writes between beats as before
    finally:
        kb.close()
    assert not thread.is_alive() and thread not in _heartbeats()  # stopped at close
    with KnowledgeBase.open("idle", models=FakeStack(), backend="milvus", uri=server, read_only=True) as reader:
        assert read_lease(reader.storage.records) is None  # released, not renewed after its release
        assert sorted(reader.documents()) == ["a", "b"]


def test_a_lease_taken_over_is_not_renewed_and_the_old_writer_is_refused(server):
    kb = KnowledgeBase.create("taken", models=FakeStack(), backend="milvus", uri=server)
    kb.add_image(photo(0), doc_id="a")
    kb.commit()
    thread = kb.storage.lease.heartbeat.thread
    now = time.time()
    theirs = {"host": "another-machine", "machine": "boot/pid:[1]", "pid": 4242, "token": "f" * 32,
              "since": now, "heartbeat": now}
    kb.storage.records.put({LEASE_KEY: json.dumps(theirs)})  # as another machine's writer taking it over writes it
    _until(lambda: not thread.is_alive(), "the heartbeat ends once its lease is lost")
    assert read_lease(kb.storage.records) == theirs  # the old writer's heartbeat did not write over it
    with pytest.raises(WriterLeaseLost, match="now held by pid 4242 on host 'another-machine'"):
        kb.add_image(photo(1), doc_id="b")
    kb.close()  # nothing pending: closes, and leaves the new writer's lease alone
    with KnowledgeBase.open("taken", models=FakeStack(), backend="milvus", uri=server, read_only=True) as reader:
        assert read_lease(reader.storage.records) == theirs
        assert sorted(reader.documents()) == ["a"]


def test_a_read_only_open_and_a_lite_file_start_no_heartbeat(server, tmp_path):
    KnowledgeBase.create("reader", models=FakeStack(), backend="milvus", uri=server).close()
    before = _heartbeats()
    with KnowledgeBase.open("reader", models=FakeStack(), backend="milvus", uri=server, read_only=True) as kb:
        assert kb.storage.lease is None and _heartbeats() == before
    with KnowledgeBase.create(tmp_path / "lite", models=FakeStack(), backend="milvus") as kb:
        assert kb.storage.lease.heartbeat is None  # a Lite file's lease is never judged by its heartbeat
        assert _heartbeats() == before


def test_beats_while_the_writer_writes_corrupt_nothing(server, monkeypatch, caplog):
    monkeypatch.setattr(lease_module, "LEASE_RENEW_S", 0.001)  # a beat in flight during most of the writes
    with caplog.at_level(logging.WARNING, logger="kira.knowledge_base.milvus"):
        with KnowledgeBase.create("busy", models=FakeStack(), backend="milvus", uri=server) as kb:
            for i in range(12):
                kb.add_image(photo(i), doc_id=f"d{i:02d}")
                if i % 4 == 3:
                    kb.commit()
            token = kb.storage.lease.token
            assert read_lease(kb.storage.records)["token"] == token
    assert "could not renew" not in caplog.text and "lost" not in caplog.text
    with KnowledgeBase.open("busy", models=FakeStack(), backend="milvus", uri=server, read_only=True) as reader:
        assert sorted(reader.documents()) == [f"d{i:02d}" for i in range(12)]
        rows = reader.storage.rows.query_all("id >= 0", ["id", "doc_id"])
        assert len({r["id"] for r in rows}) == len(rows) and {r["doc_id"] for r in rows} == set(reader.documents())
        assert read_lease(reader.storage.records) is None


def test_a_writer_dropped_without_close_stops_beating(server):
    kb = KnowledgeBase.create("dropped", models=FakeStack(), backend="milvus", uri=server)
    thread = kb.storage.lease.heartbeat.thread
    client = kb.storage.client
    del kb
    gc.collect()
    _until(lambda: not thread.is_alive(), "the heartbeat of a writer dropped unclosed ends")
    client.close()


def test_a_heartbeat_needs_a_positive_interval():
    with pytest.raises(ValueError, match="interval must be positive"):
        LeaseHeartbeat(object(), 0)


def test_a_lease_row_missing_between_an_upserts_delete_and_insert_is_read_again(monkeypatch):
    """CI once read the lease row as gone during a heartbeat's rewrite (Milvus upserts by delete then insert):
    the writer stopped with WriterLeaseLost, 'held by nobody'. A missing row is read again before it counts."""
    import json as _json

    monkeypatch.setattr(lease_module, "GONE_RECHECK_S", (0.0, 0.0, 0.0))
    value = _json.dumps({"token": "t", "host": "h", "pid": 1, "since": 0.0, "heartbeat": 0.0})

    class Flaky:
        name = "kb__kb"

        def __init__(self, answers):
            self.answers = list(answers)

        def get_one(self, key):
            assert key == LEASE_KEY
            return self.answers.pop(0) if self.answers else None

    assert lease_module.read_settled_lease(Flaky([None, value]))["token"] == "t"
    gone = Flaky([None, None, None, None, value])  # still missing after every recheck: gone
    assert lease_module.read_settled_lease(gone) is None and gone.answers == [value]
