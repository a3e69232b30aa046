"""What a Ray ingest shares with the local one: the write path, the listing and reading of files, the actor pool."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from kira.knowledge_base.milvus.kb_writes import chunk_id, milvus_rows  # noqa: E402
from kira.ray_ingest.sources import actor_pool_size, list_sources, read_image  # noqa: E402

def test_the_actor_pool_never_takes_every_cpu():
    assert actor_pool_size({"CPU": 2.0}) == 1
    assert actor_pool_size({"CPU": 2.0}, cpus_per_actor=0.75) == 2
    assert actor_pool_size({"CPU": 16.0}, cpus_per_actor=2) == 7
    assert actor_pool_size({"CPU": 16.0}, requested=3) == 3
    assert actor_pool_size({"CPU": 2.0}, requested=4) == 1
    with pytest.raises(ValueError, match="no actor of 1 CPU fits"):
        actor_pool_size({"CPU": 1.0})
    with pytest.raises(ValueError, match="cpus_per_actor must be > 0"):
        actor_pool_size({"CPU": 4.0}, cpus_per_actor=0)


def test_chunk_ids_are_stable_per_image_ordinal():
    assert chunk_id(0, 0) == 1 and chunk_id(2, 5) == 2 * 1024 + 6
    with pytest.raises(ValueError, match="index in 0..1023"):
        chunk_id(0, 1024)


def test_the_write_path_a_ray_actor_takes_equals_the_knowledge_bases_own_ingest(tmp_path):
    """An actor's rows (`prepare_batch` + `milvus_rows`, as kira.ray_ingest.kb writes them) hold what the embedded
    knowledge base stores for the same images: chunk by chunk, the same level, box, description and vectors."""
    from skimage import data

    from kira.images import load_image
    from kira.knowledge_base.kb import KnowledgeBase
    from kira.knowledge_base.writing import prepare_batch
    from kira.models import load_default

    stack = load_default(prefer_cuda=False, threads=1)
    images = [load_image(data.coffee()[::4, ::4]), load_image(data.camera()[::4, ::4])]
    kb = KnowledgeBase.create(tmp_path / "kb", models=stack)
    try:
        for i, image in enumerate(images):
            kb.add_image(image, doc_id=f"d{i}")
        kb.commit()
        ids = np.sort(kb.store.chunk_ids(space="visual"))
        rows = kb.store.chunks(ids)
        want_visual = kb.index("visual").get_vectors(ids)
        items = [{"pixels": image, "doc_id": f"d{i}", "caption": None, "tags": (), "metadata": {}, "source": None,
                  "sequence": None, "view": None} for i, image in enumerate(images)]
        batch = prepare_batch(stack, items, config=kb.config, levels=kb.levels)
    finally:
        kb.close()
    records = milvus_rows(batch, [3, 7]).records
    assert [(r.doc_id, r.level, r.box, r.description) for r in records] == \
        [(rows[i].doc_id, rows[i].level, rows[i].box, rows[i].description) for i in ids]
    assert records[0].id == chunk_id(3, 0) and {r.doc_chunk for r in records if r.doc_id == "d1"} == {chunk_id(7, 0)}
    got = np.stack([r.visual / np.linalg.norm(r.visual) for r in records])
    np.testing.assert_allclose(got, want_visual, atol=1e-5)
    assert all(d.piece_texts for d in batch.documents)  # the text pieces travel with the batch (pieces_at_ingest)


def test_a_pyarrow_filesystem_uri_lists_and_reads_as_the_local_folder(tmp_path):
    from PIL import Image
    from skimage import data

    folder = tmp_path / "images"
    (folder / "a").mkdir(parents=True)
    (folder / "b").mkdir()
    Image.fromarray(data.coffee()[::8, ::8]).save(folder / "a" / "x.png")
    Image.fromarray(data.camera()[::8, ::8]).save(folder / "b" / "x.png")  # same stem: ids become relative paths
    Image.fromarray(data.astronaut()[::8, ::8]).save(folder / "y.jpg")
    (folder / "notes.txt").write_text("not an image")
    local = list_sources(folder)
    remote = list_sources(f"file://{folder}")
    # the local ingest's order (a folder's files, then its sub-folders'): job ordinals, so chunk ids, follow it
    assert [d for _, d in local] == [d for _, d in remote] == ["y", "a/x", "b/x"]
    from kira.knowledge_base.ingest import collect_paths

    assert [p for p, _ in local] == [str(p) for p in collect_paths(folder)]
    for (lp, _), (rp, _) in zip(local, remote):
        assert rp.startswith("file://")
        np.testing.assert_array_equal(read_image(lp), read_image(rp))
    assert list_sources(f"file://{folder}/y.jpg") == [(f"file://{folder}/y.jpg", "y")]
    with pytest.raises(ValueError, match="no such file or folder"):
        list_sources(f"file://{tmp_path}/absent")
    with pytest.raises(ValueError, match="no such file or folder"):
        list_sources(tmp_path / "absent")


def test_stop_ray_collects_rays_dropped_process_handles_without_a_warning():
    """Ray can drop the Popen of a child it has not reaped yet; stop_ray lets it go silently, and only there."""
    import subprocess
    import sys
    import warnings

    from kira.ray_ingest.runtime import stop_ray

    class FakeRay:
        def __init__(self) -> None:
            self.children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])]

        def shutdown(self) -> None:
            self.children = []  # the handle dropped while its process still runs, as Ray's node object does

    fake = FakeRay()
    child = fake.children[0]
    pid = child.pid
    del child
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stop_ray(fake)  # would raise ResourceWarning("subprocess ... is still running") under "error" otherwise
    import os

    os.waitpid(pid, 0)  # reap it here (the test's own child)
