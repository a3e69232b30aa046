"""Issue 33, faults: a Ray node killed mid-job. A head and a second node started with `ray start` on 127.0.0.1; a
worker on the second node kills its whole node (the raylet and its agents, then itself: SIGKILL) right after it
wrote its first batch to Milvus and before it reported it. The job finishes on the head with the chunk ids the
local ingest gives, no duplicate and no gap.

The job's driver runs in a process of its own (as `kira ingest` would), so no Ray state of this test process's
earlier jobs (another cluster, another hook) reaches it: test_ingest_ray_killed.py starts its Ray itself (`ray.init`,
token authentication on by default), and Ray keeps that mode in the process past `ray.shutdown`, while this cluster
runs without authentication (kira.ray_ingest.runtime; tests/ray_ingest/test_ingest_ray_twice.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from ray_kill_hook import RAY_DROPPED_HANDLES

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')
pytest.importorskip("ray.data", reason='needs pip install "kira[ray]"')

from milvus_fixtures import release_lite  # noqa: E402
from test_ingest_ray_cli import _corpus  # noqa: E402
from test_ingest_ray_cluster import _env, _free_port, _node, _stop, _wait_for_nodes  # noqa: E402
from test_ingest_ray_killed import assert_stores_what_the_local_ingest_stores  # noqa: E402

from ray_kill_hook import NODE_GROUP  # noqa: E402

TESTS = str(Path(__file__).resolve().parents[1])
DRIVER = """
import json, sys
import ray
from kira.knowledge_base import KnowledgeBase
from kira.models import load_default
from kira.ray_ingest.kb import ingest_ray_kb
from kira.ray_ingest.runtime import stop_ray
from ray_kill_hook import KILL_MARK, kill_the_node_after_its_first_write

address, path, folder, mark = sys.argv[1:5]
ray.init(address=address, log_to_driver=False, configure_logging=False,
         runtime_env={"worker_process_setup_hook": kill_the_node_after_its_first_write,
                      "env_vars": {KILL_MARK: mark, "PYTHONPATH": ":".join(sys.path[1:])}})
kb = KnowledgeBase.create(path, models=load_default(prefer_cuda=False, threads=1), backend="milvus")
try:
    summary = ingest_ray_kb(kb, folder, actors=3, batch_size=2)
finally:
    stop_ray(ray)
    kb.close()
print(json.dumps({"added": summary.added, "skipped": [path for path, _ in summary.skipped]}))
"""



@pytest.mark.filterwarnings(RAY_DROPPED_HANDLES)
@pytest.mark.slow  # starts a two-node Ray cluster, loses one node mid-job, ingests 20 images twice (about 60 s here)
def test_a_node_killed_mid_job_leaves_the_local_ingests_chunks_with_no_duplicate_and_no_gap(tmp_path):
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    folder = tmp_path / "images"
    names = _corpus(folder)
    mark = tmp_path / "node-killed"
    port = _free_port()
    address = f"127.0.0.1:{port}"
    ray_tmp = tempfile.mkdtemp(prefix="kira-ray-", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    # the head has room for the actors the lost node held (3 CPUs: Ray Data spreads the 3 actors over both nodes)
    nodes = [_node(["--head", "--port", str(port), "--include-dashboard=false", "--num-cpus", "3"], tmp_path, ray_tmp)]
    try:
        time.sleep(5)
        victim = _victim_node(address, tmp_path, ray_tmp)
        nodes.append(victim)
        _wait_for_nodes(address, 2)
        env = {**_env(), "PYTHONPATH": os.pathsep.join([TESTS, *sys.path])}
        done = subprocess.run([sys.executable, "-c", DRIVER, address, str(tmp_path / "ray"), str(folder), str(mark)],
                              capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert mark.read_text() == str(victim.pid)  # a worker on the second node wrote a batch and killed its node
        assert victim.wait(timeout=60) is not None  # the node is gone
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert sorted(summary["added"]) == sorted(names)
        assert [Path(p).name for p in summary["skipped"]] == ["zz_broken.png"]
    finally:
        for proc in reversed(nodes):
            _stop(proc)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    remote = KnowledgeBase.open(tmp_path / "ray", read_only=True)
    local = KnowledgeBase.create(tmp_path / "local", models=load_default(prefer_cuda=False, threads=1),
                                 backend="milvus")
    try:
        local.ingest(folder)
        assert_stores_what_the_local_ingest_stores(remote, local, names)
        ids = local.store.chunk_ids()
        assert remote.store.chunks(ids) == local.store.chunks(ids)  # levels, boxes, descriptions, parents
    finally:
        remote.close()
        local.close()
        release_lite(tmp_path / "ray" / "milvus.db")
        release_lite(tmp_path / "local" / "milvus.db")


def _victim_node(address: str, tmp_path, ray_tmp: str):
    """The second node, whose environment names the file holding its process group (`NODE_GROUP`, read by the kill
    hook): the `ray start --block` process leads a session, so its group is its pid."""
    group = tmp_path / "victim-group"
    os.environ[NODE_GROUP] = str(group)
    try:
        proc = _node(["--address", address], tmp_path, ray_tmp)
    finally:
        del os.environ[NODE_GROUP]
    group.write_text(str(proc.pid))
    return proc
