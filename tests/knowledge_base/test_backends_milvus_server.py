"""The server path: Milvus Lite run as a local gRPC server on 127.0.0.1, kira talking to it by http uri."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from kira import _core  # noqa: E402
from kira.knowledge_base.milvus.index import MilvusIndex  # noqa: E402
from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig  # noqa: E402
from kira.knowledge_base.milvus.writes import delete_documents, upsert_chunks  # noqa: E402
from kira.retrieval.search import search  # noqa: E402
from milvus_fixtures import records_for, unit_rows  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def server(tmp_path):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(tmp_path / "data"),
                             "--host", "127.0.0.1", "--port", str(port), "--max-workers", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"milvus_lite server did not start on port {port}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_kira_talks_to_a_milvus_server_by_uri_with_the_same_code(server):
    config = MilvusConfig(uri=server, collection="kb", visual_dim=16, text_dim=8, index="FLAT")
    visual, text = unit_rows(40, 16, seed=21), unit_rows(40, 8, seed=22)
    records = records_for(8, 5, visual, text)
    with MilvusCollection.open(config) as col:
        assert upsert_chunks(col, records) == 40
    # A second client (another kira process would do the same) sees the writes and searches them.
    with MilvusCollection.open(config, create=False) as col:
        index = MilvusIndex(col, "visual")
        flat = _core.FlatIndex(16)
        flat.add(np.array([r.id for r in records], np.int64), visual)
        queries = unit_rows(3, 16, seed=23)
        for (a, sa), (b, sb) in zip(search(index, queries, 5, None), search(flat, queries, 5, None)):
            assert a.tolist() == b.tolist()
            np.testing.assert_allclose(sa, sb, atol=1e-5)
        assert delete_documents(col, ["doc3"]) == 5 and len(index) == 35
    with pytest.raises(ValueError, match="dim 16, config says 32"):
        MilvusCollection.open(MilvusConfig(uri=server, collection="kb", visual_dim=32, text_dim=8))


def test_a_knowledge_base_on_a_milvus_server_is_shared_by_processes_through_the_uri_alone(server, tmp_path):
    """One process writes a knowledge base to the server; this process opens it by name and uri (no local file),
    sees the same documents and answers, and a commit made here reaches the other process's next open."""
    from PIL import Image
    from skimage import data

    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    for name in ("coffee", "rocket", "chelsea"):
        Image.fromarray(np.asarray(getattr(data, name)())[::4, ::4]).save(tmp_path / f"{name}.png")
    (tmp_path / "coffee.txt").write_text("a cup of coffee on a saucer")
    writer = subprocess.run([sys.executable, "-m", "kira", "ingest", "shared", str(tmp_path), "--uri", server,
                             "--quiet"], capture_output=True, text=True, timeout=300)
    assert writer.returncode == 0, writer.stderr[-2000:]
    assert not (tmp_path / "shared").exists()
    kb = KnowledgeBase.open("shared", uri=server)
    try:
        assert sorted(kb.documents()) == ["chelsea", "coffee", "rocket"]
        answer = Kira(kb).ask("a cup of coffee on a saucer", variant="dual_path")
        assert answer.evidence.items[0].doc_id == "coffee"
        kb.remove("rocket")
        generation = kb.commit()
    finally:
        kb.close()
    reader = subprocess.run([sys.executable, "-c", (
        "import sys; from kira.knowledge_base import KnowledgeBase\n"
        "kb = KnowledgeBase.open('shared', uri=sys.argv[1], read_only=True)\n"
        "print(sorted(kb.documents()), kb.store.generation()); kb.close()"), server],
        capture_output=True, text=True, timeout=300)
    assert reader.returncode == 0, reader.stderr[-2000:]
    docs, seen = reader.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    assert docs == "['chelsea', 'coffee']" and int(seen) >= generation  # close() commits once more
    asked = subprocess.run([sys.executable, "-m", "kira", "ask", "shared", "a cup of coffee", "--uri", server,
                            "--variant", "dual_path", "--card", "json"], capture_output=True, text=True, timeout=300)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert '"doc_id": "coffee"' in asked.stdout
    info = subprocess.run([sys.executable, "-m", "kira", "info", "shared", "--uri", server, "--json"],
                          capture_output=True, text=True, timeout=300)
    assert info.returncode == 0 and json.loads(info.stdout)["documents"] == 2, info.stderr[-2000:]
