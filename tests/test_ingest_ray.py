"""Ray Data ingestion into Milvus Lite equals a local encode: same chunk ids, same vectors to 1e-5."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from kira.knowledge_base.milvus.encode import ImageItem, chunk_id, encode_images  # noqa: E402
from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig  # noqa: E402
from kira.ray_ingest.sources import actor_pool_size, list_sources  # noqa: E402
from kira.ray_ingest.runtime import start_ray  # noqa: E402
from milvus_fixtures import release_lite  # noqa: E402

SKIMAGE = ("astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "moon", "page", "horse", "text",
           "immunohistochemistry", "retina", "hubble_deep_field", "motorcycle_left", "cat", "grass", "gravel",
           "brick", "colorwheel", "clock")


def _write_corpus(folder, n_digits: int) -> int:
    from PIL import Image
    from skimage import data
    from sklearn.datasets import load_digits

    folder.mkdir()
    count = 0
    for name in SKIMAGE:
        try:
            pixels = np.asarray(getattr(data, name)())
        except Exception:  # noqa: BLE001 - an image whose data file is not shipped
            continue
        if pixels.dtype == bool:
            pixels = pixels.astype(np.uint8) * 255
        if pixels.dtype != np.uint8:
            pixels = (255 * (pixels - pixels.min()) / max(float(np.ptp(pixels)), 1e-9)).astype(np.uint8)
        if pixels.ndim == 3 and pixels.shape[2] == 4:
            pixels = pixels[..., :3]
        image = Image.fromarray(pixels)
        image.thumbnail((160, 160))  # small: the test is about equality, not image size
        image.save(folder / f"{name}.png")
        count += 1
    digits = load_digits()
    for i in range(n_digits):
        up = np.kron(digits.images[i] * (255 / 16), np.ones((6, 6))).astype(np.uint8)  # 8x8 -> 48x48
        Image.fromarray(up).save(folder / f"digit_{i:03d}_{digits.target[i]}.png")
        count += 1
    (folder / "broken.png").write_bytes(b"\x89PNG not really")
    (folder / "sub").mkdir()
    (folder / "sub" / "empty.jpg").write_bytes(b"")
    return count


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


def test_the_shared_encode_equals_the_knowledge_bases_own_ingest(tmp_path):
    from skimage import data

    from kira.images import load_image
    from kira.knowledge_base.kb import KnowledgeBase
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
    finally:
        kb.close()
    records = encode_images(stack, [ImageItem(i, f"d{i}", image) for i, image in enumerate(images)])
    assert [(r.doc_id, r.level, r.box, r.description) for r in records] == \
        [(rows[i].doc_id, rows[i].level, rows[i].box, rows[i].description) for i in ids]
    got = np.stack([r.visual / np.linalg.norm(r.visual) for r in records])
    np.testing.assert_allclose(got, want_visual, atol=1e-5)


def test_the_actor_encodes_writes_and_reports_skipped_files_with_reasons(tmp_path):
    """EncodeAndWrite in this process (no Ray): what one actor does with one batch."""
    from PIL import Image
    from skimage import data

    from kira.ray_ingest.sources import EncodeAndWrite
    from kira.models import load_default

    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(data.coffee()[::4, ::4]).save(folder / "coffee.png")
    Image.fromarray(data.camera()[::4, ::4]).save(folder / "camera.png")
    (folder / "broken.png").write_bytes(b"not a png")
    stack = load_default(prefer_cuda=False, threads=1)
    uri = str(tmp_path / "kb.db")
    config = MilvusConfig(uri=uri, collection="kb", visual_dim=stack.image.dim, text_dim=stack.text.dim, index="FLAT")
    try:
        MilvusCollection.open(config).close()
        from dataclasses import asdict

        actor = EncodeAndWrite(asdict(config), {"threads": 1, "chunking": {}, "levels": ["document", "region", "patch"],
                                                "caption_children": False, "tags": None, "metadata": None})
        sources = list_sources(folder)
        assert [d for _, d in sources] == ["broken", "camera", "coffee"]
        out = actor({"path": np.array([p for p, _ in sources], dtype=object),
                     "doc_id": np.array([d for _, d in sources], dtype=object), "ordinal": np.arange(3) + 10})
        assert out["status"].tolist() == ["skipped", "added", "added"]
        assert "broken.png" in out["reason"][0] and out["reason"][1] == ""
        with MilvusCollection.open(config, create=False) as col:
            assert col.count() == int(out["chunks"].sum()) > 2
            assert col.count(f"doc_chunk == {chunk_id(11, 0)}") == out["chunks"][1]
        actor.collection.close()
    finally:
        release_lite(uri)


@pytest.fixture()
def ray_local():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    yield ray
    if ray.is_initialized():
        from kira.ray_ingest.runtime import stop_ray

        stop_ray(ray)


@pytest.mark.slow  # about a minute here: two encodes of ~100 images on one core
# Ray 2.60's own DataContext() warns about its own defaults (use_push_based_shuffle, use_polars), not kira's calls.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")
def test_a_ray_job_ingests_real_images_into_milvus_lite_as_a_local_encode_would(tmp_path, ray_local):
    from kira.knowledge_base.milvus.index import MilvusIndex
    from kira.ray_ingest.sources import ingest_ray
    from kira.images import load_image
    from kira.models import load_default

    folder = tmp_path / "images"
    n_good = _write_corpus(folder, n_digits=80)
    stack = load_default(prefer_cuda=False, threads=1)
    uri = str(tmp_path / "kb.db")
    config = MilvusConfig(uri=uri, collection="kb", visual_dim=stack.image.dim, text_dim=stack.text.dim,
                          index="FLAT", batch_size=256)
    try:
        start_ray(ray_local)
        summary = ingest_ray(config, folder, batch_size=16, metadata=lambda path: {"file": path.rsplit("/", 1)[-1]})
        assert summary.actors == 1 and len(summary.added) == n_good
        assert sorted(p.rsplit("/", 1)[-1] for p, _ in summary.skipped) == ["broken.png", "empty.jpg"]
        assert all(reason for _, reason in summary.skipped)

        sources = [(p, d) for p, d in list_sources(folder)]
        ordinal = {d: i for i, (_, d) in enumerate(sources)}
        good = [(p, d) for p, d in sources if d in set(summary.added)]
        local = encode_images(stack, [ImageItem(ordinal[d], d, load_image(p)) for p, d in good])
        with MilvusCollection.open(config, create=False) as col:
            assert col.count() == summary.chunks == len(local)
            want_ids = np.array([r.id for r in local], np.int64)
            for space in ("visual", "text"):
                got = MilvusIndex(col, space).get_vectors(want_ids)
                want = np.stack([getattr(r, space) / np.linalg.norm(getattr(r, space)) for r in local])
                np.testing.assert_allclose(got, want, atol=1e-5)
            row = col.client.get(col.name, ids=[int(local[1].id)], output_fields=["doc_id", "parent", "metadata"])[0]
            assert row["parent"] == local[1].parent and row["metadata"]["file"].startswith(row["doc_id"])

        # Ingesting documents again (another job, so other ordinals) replaces their chunks, never duplicates.
        subset = tmp_path / "again"
        subset.mkdir()
        for name in ("coffee.png", "digit_000_0.png"):
            (subset / name).write_bytes((folder / name).read_bytes())
        again = ingest_ray(config, subset, batch_size=32)
        assert sorted(again.added) == ["coffee", "digit_000_0"]
        with MilvusCollection.open(config, create=False) as col:
            assert col.count() == len(local)
            rows = col.client.query(col.name, filter='doc_id == "coffee"', output_fields=["id"])
            assert min(r["id"] for r in rows) > max(want_ids)  # the new job's id range
    finally:
        release_lite(uri)


def test_a_pyarrow_filesystem_uri_lists_and_reads_as_the_local_folder(tmp_path):
    from PIL import Image
    from skimage import data

    from kira.ray_ingest.sources import _read_image

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
        np.testing.assert_array_equal(_read_image(lp), _read_image(rp))
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
