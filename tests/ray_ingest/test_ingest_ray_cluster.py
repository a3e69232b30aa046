"""A real Ray cluster (issue 33.4): a head and a second node started with `ray start` on 127.0.0.1, then
`kira ingest KB SOURCE --engine ray --ray-address 127.0.0.1:PORT` spreads the job over both nodes and stores
what the local ingest stores."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')
pytest.importorskip("ray.data", reason='needs pip install "kira[ray]"')

from milvus_fixtures import release_lite  # noqa: E402
from test_ingest_ray_cli import _corpus  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cli() -> str:
    found = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    if found is None:
        pytest.skip("the ray command is not installed")
    return found


def _env() -> dict[str, str]:
    """Ray's token authentication off: a cluster on 127.0.0.1 that only this test reaches (Ray 2.60 turns it on
    for `ray start --head` and the second node then needs the head's token file)."""
    return {**os.environ, "RAY_AUTH_MODE": "disabled"}


def _node(args: list[str], tmp, ray_tmp: str) -> subprocess.Popen:
    """`ray start ... --block`: the node lives as long as this process; terminating it stops the node. Its files
    (and the ``ray_current_cluster`` address file) go to `ray_tmp`, not /tmp/ray, where a plain ``ray.init()`` of
    another process on this machine would find this cluster."""
    with open(tmp / "ray.log", "ab") as log:
        return subprocess.Popen([_ray_cli(), "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "2",
                                 "--disable-usage-stats", "--temp-dir", ray_tmp, *args], stdout=log, stderr=subprocess.STDOUT, env=_env(),
                                start_new_session=True)  # its own process group: stopped whole at the end


def _stop(proc: subprocess.Popen) -> None:
    """Stop a node this test started: SIGINT (`ray start --block` then stops its processes), then its process
    group for anything left."""
    import signal

    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _wait_for_nodes(address: str, n: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = subprocess.run([sys.executable, "-c", (
            "import ray; ray.init(address=%r, log_to_driver=False, configure_logging=False); "
            "print(sum(1 for x in ray.nodes() if x['Alive'])); ray.shutdown()") % address],
            capture_output=True, text=True, timeout=120, env=_env())
        if probe.returncode == 0 and probe.stdout.strip().splitlines()[-1:] == [str(n)]:
            return
        time.sleep(2)
    raise AssertionError(f"the Ray cluster at {address} did not reach {n} nodes")


@pytest.mark.slow  # starts a two-node Ray cluster and ingests 20 images twice (minutes on 2 cores)
def test_a_two_node_ray_cluster_on_localhost_ingests_what_the_local_ingest_stores(tmp_path):
    from kira.knowledge_base import KnowledgeBase

    folder = tmp_path / "images"
    names = _corpus(folder)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    import tempfile

    ray_tmp = tempfile.mkdtemp(prefix="kira-ray-", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    nodes = [_node(["--head", "--port", str(port), "--include-dashboard=false"], tmp_path, ray_tmp)]
    try:
        time.sleep(5)
        nodes.append(_node(["--address", address], tmp_path, ray_tmp))
        _wait_for_nodes(address, 2)
        remote, local = tmp_path / "ray", tmp_path / "local"
        done = subprocess.run([sys.executable, "-m", "kira", "-v", "ingest", str(remote), str(folder), "--engine", "ray",
                               "--ray-address", address, "--actors", "3", "--batch-size", "2", "--quiet"],
                              capture_output=True, text=True, timeout=900, env=_env())
        assert done.returncode == 0, done.stderr[-3000:]
        said = [line for line in done.stderr.splitlines() if "ray ingest:" in line]
        # 3 actors of 1 CPU on two nodes of 2 CPUs (one CPU kept for Ray Data's tasks): both nodes encode
        assert said and "with 3 actor(s) on 2 node(s)" in said[-1], said
        done = subprocess.run([sys.executable, "-m", "kira", "ingest", str(local), str(folder), "--backend", "milvus",
                               "--quiet"], capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        for proc in reversed(nodes):
            _stop(proc)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    a, b = KnowledgeBase.open(local, read_only=True), KnowledgeBase.open(remote, read_only=True)
    try:
        ids = a.store.chunk_ids()
        assert len(ids) > 20 * 5 and np.array_equal(ids, b.store.chunk_ids())
        for space in ("visual", "text"):
            np.testing.assert_allclose(a.index(space).get_vectors(ids), b.index(space).get_vectors(ids), atol=1e-5)
        assert a.store.chunks(ids) == b.store.chunks(ids)
        assert sorted(b.documents()) == sorted(names) and a.documents() == b.documents()
        pieces = [f"piece:{d}" for d in names]  # text pieces: written by the actors as by the local ingest
        stored_a, stored_b = a.storage.records.get(pieces), b.storage.records.get(pieces)
        assert sorted(stored_a) == sorted(stored_b) and len(stored_a) >= len(names) - 2
        for key in stored_a:
            ja, jb = json.loads(stored_a[key]), json.loads(stored_b[key])
            assert ja["texts"] == jb["texts"]
            va = np.frombuffer(base64.b64decode(ja["vectors"]), "<f4")
            np.testing.assert_allclose(va, np.frombuffer(base64.b64decode(jb["vectors"]), "<f4"), atol=1e-5)
    finally:
        a.close()
        b.close()
        release_lite(local / "milvus.db")
        release_lite(remote / "milvus.db")
