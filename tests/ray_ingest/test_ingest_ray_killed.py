"""Issue 33.4: a Ray ingest worker killed mid-job (SIGKILL, after it wrote a batch to Milvus and before it reported
it) is restarted by Ray and its batch retried: the knowledge base ends with every image's chunks once, under the
ids and with the vectors the local ingest gives them, with no duplicate and no gap."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from ray_kill_hook import RAY_DROPPED_HANDLES

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')
pytest.importorskip("ray.data", reason='needs pip install "kira[ray]"')

from milvus_fixtures import release_lite  # noqa: E402
from test_ingest_ray_cli import _corpus  # noqa: E402

from ray_kill_hook import KILL_MARK, die_after_the_first_write  # noqa: E402



@pytest.mark.filterwarnings(RAY_DROPPED_HANDLES)
@pytest.mark.slow  # about 50 s here: a local Ray, a 20-image job with one worker killed, one local ingest
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")
def test_a_worker_killed_mid_job_leaves_no_duplicate_and_no_gap(tmp_path, monkeypatch):
    import ray

    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default
    from kira.ray_ingest.kb import ingest_ray_kb
    from kira.ray_ingest.runtime import start_ray, stop_ray

    folder = tmp_path / "images"
    names = _corpus(folder)
    mark = tmp_path / "killed"
    monkeypatch.setenv(KILL_MARK, str(mark))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)  # the "token" this ray.init writes there is undone after the test
    stack = load_default(prefer_cuda=False, threads=1)
    # start_ray tries twice: on a loaded machine the raylet can miss Ray's fixed 30 s start wait
    start_ray(ray, runtime_env={"worker_process_setup_hook": die_after_the_first_write,
                                "env_vars": {KILL_MARK: str(mark), "PYTHONPATH": os.pathsep.join(  # tests/ (the hook), kira's
                                    [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}})
    remote = KnowledgeBase.create(tmp_path / "ray", models=stack, backend="milvus")
    local = KnowledgeBase.create(tmp_path / "local", models=stack, backend="milvus")
    try:
        summary = ingest_ray_kb(remote, folder, batch_size=4)
        assert mark.exists()  # a worker really died mid-job
        assert sorted(summary.added) == sorted(names)
        assert [Path(p).name for p, _ in summary.skipped] == ["zz_broken.png"]
        local.ingest(folder)
        assert_stores_what_the_local_ingest_stores(remote, local, names)
    finally:
        stop_ray(ray)
        remote.close()
        local.close()
        release_lite(tmp_path / "ray" / "milvus.db")
        release_lite(tmp_path / "local" / "milvus.db")


def assert_stores_what_the_local_ingest_stores(remote, local, names) -> None:
    """The Ray-written knowledge base holds the local ingest's chunk ids, each once (no duplicate, no gap), with its
    vectors, and the same documents, `names`."""
    ids = local.store.chunk_ids()
    got = remote.store.chunk_ids()
    assert len(set(got.tolist())) == len(got)  # no chunk twice
    np.testing.assert_array_equal(np.sort(got), np.sort(ids))  # and none missing: the local ingest's ids
    for space in ("visual", "text"):
        np.testing.assert_allclose(remote.index(space).get_vectors(ids), local.index(space).get_vectors(ids), atol=1e-5)
    assert sorted(remote.documents()) == sorted(local.documents()) == sorted(names)
