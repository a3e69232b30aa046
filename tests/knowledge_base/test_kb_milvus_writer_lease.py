"""One writer at a time on a Milvus knowledge base, on any machine: the writer lease (kira.knowledge_base.milvus.lease).

The server is Milvus Lite run as its own process on 127.0.0.1 (kira.knowledge_base.milvus.lite_server), so
several processes reach one knowledge base through its uri as they would a Milvus server. "Another machine"
is a lease row naming another host, written as that machine's kira writes it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from pipeline_fakes import FakeStack, photo  # noqa: E402

from kira.knowledge_base import KnowledgeBase  # noqa: E402
from kira.knowledge_base.milvus.lease import (LEASE_KEY, LEASE_TIMEOUT_S, WriterLeaseHeld,  # noqa: E402
                                              WriterLeaseLost, read_lease, this_machine)
from milvus_fixtures import served_lite  # noqa: E402

TESTS = str(Path(__file__).resolve().parents[1])

WRITER = """
import sys
sys.path.insert(0, sys.argv[3])
from pipeline_fakes import FakeStack, photo
from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.milvus.lease import WriterLeaseHeld
try:
    kb = KnowledgeBase.open(sys.argv[1], models=FakeStack(), backend="milvus", uri=sys.argv[2])
except WriterLeaseHeld as exc:
    print("refused", exc, flush=True)
    sys.exit(0)
print("open", flush=True)
for line in sys.stdin:
    word = line.split()
    if word[0] == "add":
        kb.add_image(photo(int(word[2])), doc_id=word[1])
        kb.commit()
    elif word[0] == "close":
        kb.close()
    print("done", flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served_lite(tmp_path_factory.mktemp("lease") / "data") as uri:
        yield uri


def _writer(name: str, uri: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, name, uri, TESTS], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def _say(proc: subprocess.Popen, line: str) -> str:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def _plant(kb: KnowledgeBase, **fields) -> None:
    """Write the lease row as another writer's kira would (host, machine, pid, token, since, heartbeat)."""
    now = time.time()
    held = {"host": "another-machine", "machine": "boot/pid:[1]", "pid": 4242, "token": "f" * 32, "since": now - 60,
            "heartbeat": now, **fields}
    kb.storage.records.put({LEASE_KEY: json.dumps(held)})


def _documents(name: str, uri: str) -> list[str]:
    with KnowledgeBase.open(name, models=FakeStack(), backend="milvus", uri=uri, read_only=True) as kb:
        return sorted(kb.documents())


def test_a_second_writer_in_another_process_is_refused_naming_the_holder(server):
    with KnowledgeBase.create("two_procs", models=FakeStack(), backend="milvus", uri=server) as kb:
        kb.add_image(photo(0), doc_id="a")
    holder = _writer("two_procs", server)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(WriterLeaseHeld, match=rf"open for writing by pid {holder.pid} on host "
                                                  rf"'{socket.gethostname()}' since .* UTC") as refused:
            KnowledgeBase.open("two_procs", models=FakeStack(), backend="milvus", uri=server)
        assert isinstance(refused.value, ValueError)  # as the embedded backend's second writer is refused
        assert "read_only=True" in str(refused.value) and f"{LEASE_TIMEOUT_S:.0f} s" in str(refused.value)
        assert _say(holder, "add b 1") == "done"  # the holder writes and commits while refused openers read
        assert _documents("two_procs", server) == ["a", "b"]  # read-only opens are never refused
        assert _say(holder, "close") == "done"
        with KnowledgeBase.open("two_procs", models=FakeStack(), backend="milvus", uri=server) as kb:
            assert read_lease(kb.storage.records)["pid"] == os.getpid()
            second = _writer("two_procs", server)  # now this process holds it: the other process is refused
            said = second.stdout.readline()
            assert said.startswith("refused") and f"pid {os.getpid()}" in said
            second.communicate(timeout=60)
            with pytest.raises(WriterLeaseHeld, match=f"pid {os.getpid()}"):
                KnowledgeBase.open("two_procs", models=FakeStack(), backend="milvus", uri=server)
            kb.add_image(photo(2), doc_id="c")
        with KnowledgeBase.open("two_procs", models=FakeStack(), backend="milvus", uri=server,
                                read_only=True) as kb:
            assert read_lease(kb.storage.records) is None  # released at close
            assert sorted(kb.documents()) == ["a", "b", "c"]
    finally:
        holder.kill()
        holder.communicate()


def test_a_writer_on_another_machine_is_refused_until_its_heartbeat_is_stale(server, caplog):
    with KnowledgeBase.create("other_host", models=FakeStack(), backend="milvus", uri=server) as kb:
        kb.add_image(photo(0), doc_id="a")
        kb.commit()
        _plant(kb)  # as if this writer had lost it to one on another machine: its close must not remove that row
    with pytest.raises(WriterLeaseHeld, match=r"by pid 4242 on host 'another-machine' since .* UTC "
                                              r"\(last heard from [01] s ago\)"):
        KnowledgeBase.open("other_host", models=FakeStack(), backend="milvus", uri=server)
    with KnowledgeBase.open("other_host", models=FakeStack(), backend="milvus", uri=server, read_only=True) as kb:
        assert read_lease(kb.storage.records)["host"] == "another-machine"  # a reader neither takes nor clears it
        _plant(kb, heartbeat=time.time() - LEASE_TIMEOUT_S - 5)  # that machine's writer stopped answering
    with caplog.at_level(logging.WARNING, logger="kira.knowledge_base.milvus.lease"):
        with KnowledgeBase.open("other_host", models=FakeStack(), backend="milvus", uri=server) as kb:
            assert read_lease(kb.storage.records)["host"] == socket.gethostname()
            kb.add_image(photo(1), doc_id="b")
    assert "taking over the writer lease of pid 4242 on host 'another-machine'" in caplog.text
    assert "not heard from in" in caplog.text
    assert _documents("other_host", server) == ["a", "b"]


def test_a_lease_left_by_a_dead_process_on_this_machine_is_taken_at_once(server, caplog):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with KnowledgeBase.create("dead_pid", models=FakeStack(), backend="milvus", uri=server) as kb:
        kb.add_image(photo(0), doc_id="a")
        kb.commit()
        _plant(kb, host=socket.gethostname(), machine=this_machine(), pid=int(gone.stdout))
    with caplog.at_level(logging.WARNING, logger="kira.knowledge_base.milvus.lease"):
        with KnowledgeBase.open("dead_pid", models=FakeStack(), backend="milvus", uri=server) as kb:
            assert len(kb) == 1
    assert "its process on this machine is gone" in caplog.text


def test_a_writer_whose_lease_was_taken_over_refuses_to_write_and_commit(server):
    kb = KnowledgeBase.create("lost", models=FakeStack(), backend="milvus", uri=server)
    kb.add_image(photo(0), doc_id="a")
    kb.commit()
    kb.add_image(photo(1), doc_id="b")  # written, not yet committed
    mine = read_lease(kb.storage.records)
    kb.storage.records.put({LEASE_KEY: json.dumps({**mine, "heartbeat": time.time() - LEASE_TIMEOUT_S - 5})})
    taker = _writer("lost", server)  # this writer looks dead (suspended, say): another process takes over
    try:
        assert taker.stdout.readline().strip() == "open"
        assert _say(taker, "add c 2") == "done"
        with pytest.raises(WriterLeaseLost, match=rf"lost its writer lease .* now held by pid {taker.pid}"):
            kb.commit()
        with pytest.raises(WriterLeaseLost):
            kb.add_image(photo(3), doc_id="d")  # refused before anything is written
        assert isinstance(WriterLeaseLost("x"), ConnectionError)  # an ingest stops instead of retrying per image
        assert _say(taker, "close") == "done"
    finally:
        taker.kill()
        taker.communicate()
    with pytest.raises(WriterLeaseLost):
        kb.close()  # close commits, which the lost writer refuses; the client is closed all the same
    with KnowledgeBase.open("lost", models=FakeStack(), backend="milvus", uri=server, read_only=True) as after:
        documents = sorted(after.documents())
        rows = after.storage.rows.query_all("id >= 0", ["id", "doc_id"])
    assert {"a", "c"} <= set(documents) and "d" not in documents  # everything committed is kept
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["doc_id"] for r in rows} == set(documents)  # no chunk without its document


def test_a_reopen_in_the_same_process_is_a_second_writer_until_the_first_is_closed(server):
    first = KnowledgeBase.create("same_proc", models=FakeStack(), backend="milvus", uri=server)
    try:
        with pytest.raises(WriterLeaseHeld, match=f"pid {os.getpid()}"):
            KnowledgeBase.open("same_proc", models=FakeStack(), backend="milvus", uri=server)
    finally:
        first.close()
    KnowledgeBase.open("same_proc", models=FakeStack(), backend="milvus", uri=server).close()


def test_a_lite_file_takes_over_the_lease_a_crashed_writer_left(tmp_path, caplog):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack(), backend="milvus") as kb:
        kb.add_image(photo(0), doc_id="a")
        kb.commit()
        _plant(kb)  # what a writer killed on another machine leaves in the file
    with caplog.at_level(logging.WARNING, logger="kira.knowledge_base.milvus.lease"):
        with KnowledgeBase.open(path, models=FakeStack(), backend="milvus") as kb:
            assert read_lease(kb.storage.records)["pid"] == os.getpid()
    assert "a Milvus Lite file is open in one process at a time" in caplog.text
