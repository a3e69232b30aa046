"""Issue 33.4: a Ray ingest worker killed mid-job (SIGKILL, after it wrote a batch to Milvus and before it reported
it) is restarted by Ray and its batch retried: the knowledge base ends with every image's chunks once, under the
ids a local encode gives them, with no duplicate and no gap."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')
pytest.importorskip("ray.data", reason='needs pip install "kira[ray]"')

from milvus_fixtures import release_lite  # noqa: E402
from test_ingest_ray_cli import _corpus  # noqa: E402

KILL_MARK = "KIRA_TEST_KILL_MARK"  # the file the first worker to write creates just before it kills itself


def _die_after_the_first_write() -> None:
    """Ray's worker_process_setup_hook: in every worker, `replace_documents` kills its process (SIGKILL, no
    cleanup) right after the first batch any worker writes, once per job (the mark file says it happened)."""
    from kira.knowledge_base.milvus import writes as milvus_writes

    write = milvus_writes.replace_documents

    def write_then_die(collection, records):
        written = write(collection, records)
        mark = Path(os.environ[KILL_MARK])
        try:
            mark.touch(exist_ok=False)  # only the first write of the job dies
        except FileExistsError:
            return written
        os.kill(os.getpid(), signal.SIGKILL)
        return written

    milvus_writes.replace_documents = write_then_die


@pytest.mark.slow  # about 50 s here: a local Ray, a 20-image job with one worker killed, one local encode
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")
def test_a_worker_killed_mid_job_leaves_no_duplicate_and_no_gap(tmp_path, monkeypatch):
    import ray

    from kira.knowledge_base.milvus.encode import ImageItem, encode_images
    from kira.knowledge_base.milvus.index import MilvusIndex
    from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig
    from kira.ray_ingest.sources import ingest_ray, list_sources
    from kira.ray_ingest.runtime import stop_ray
    from kira.images import load_image
    from kira.models import load_default

    folder = tmp_path / "images"
    names = _corpus(folder)
    mark = tmp_path / "killed"
    monkeypatch.setenv(KILL_MARK, str(mark))  # workers inherit the driver's environment
    stack = load_default(prefer_cuda=False, threads=1)
    uri = str(tmp_path / "kb.db")
    config = MilvusConfig(uri=uri, collection="kb", visual_dim=stack.image.dim, text_dim=stack.text.dim,
                          index="FLAT", batch_size=256)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"worker_process_setup_hook": _die_after_the_first_write,
                          "env_vars": {KILL_MARK: str(mark), "PYTHONPATH": os.pathsep.join(  # the hook's module, kira's
                                  [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}})
    try:
        summary = ingest_ray(config, folder, batch_size=4)
        assert mark.exists()  # a worker really died mid-job
        assert sorted(summary.added) == sorted(names)
        assert [Path(p).name for p, _ in summary.skipped] == ["zz_broken.png"]

        sources = list_sources(folder)
        ordinal = {d: i for i, (_, d) in enumerate(sources)}
        local = encode_images(stack, [ImageItem(ordinal[d], d, load_image(p)) for p, d in sources if d in names])
        want = np.array(sorted(r.id for r in local), np.int64)
        with MilvusCollection.open(config, create=False) as col:
            rows = col.client.query(col.name, filter="id >= 0", output_fields=["id"])
            got = np.array(sorted(r["id"] for r in rows), np.int64)
            np.testing.assert_array_equal(got, want)  # every chunk once: no duplicate, no gap
            assert summary.chunks == len(want)
            np.testing.assert_allclose(MilvusIndex(col, "text").get_vectors(want),
                                       np.stack([r.text / np.linalg.norm(r.text) for r in
                                                 sorted(local, key=lambda r: r.id)]), atol=1e-5)
    finally:
        stop_ray(ray)
        release_lite(uri)
