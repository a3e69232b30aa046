"""`kira ingest KB SOURCE --engine ray` on real images equals the local ingest of a Milvus-backed knowledge base."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')
pytest.importorskip("ray.data", reason='needs pip install "kira[ray]"')
pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

from milvus_fixtures import release_lite  # noqa: E402

SKIMAGE = ("astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "moon", "page", "text", "retina",
           "hubble_deep_field", "brick", "grass", "gravel")


def _kira(*args):
    return subprocess.run([sys.executable, "-m", "kira", *map(str, args)], capture_output=True, text=True, timeout=400)


def _corpus(folder) -> list[str]:
    """14 scikit-image photos and 6 scikit-learn digits (20 images), two captions beside them, one broken file."""
    from PIL import Image
    from skimage import data
    from sklearn.datasets import load_digits

    folder.mkdir()
    for name in SKIMAGE:
        pixels = np.asarray(getattr(data, name)())
        image = Image.fromarray(pixels[..., :3] if pixels.ndim == 3 else pixels)
        image.thumbnail((128, 128))  # small: the test is about equality, not image size
        image.save(folder / f"{name}.png")
    digits = load_digits()
    for i in range(6):
        Image.fromarray(np.kron(digits.images[i] * (255 / 16), np.ones((6, 6))).astype(np.uint8)).save(
            folder / f"digit_{i}.png")
    (folder / "coffee.txt").write_text("a cup of coffee on a saucer")
    (folder / "rocket.txt").write_text("a rocket on the launch pad")
    (folder / "zz_broken.png").write_bytes(b"\x89PNG not really")  # last: a Ray job leaves no id gap before it
    return [*SKIMAGE, *(f"digit_{i}" for i in range(6))]


@pytest.mark.slow  # about 40 s here: two ingests of 20 images (one a Ray job) in subprocesses
def test_kira_ingest_with_the_ray_engine_stores_what_the_local_ingest_stores(tmp_path):
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    folder = tmp_path / "images"
    names = _corpus(folder)
    local, remote = tmp_path / "local", tmp_path / "ray"
    done = _kira("ingest", local, folder, "--backend", "milvus", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    done = _kira("ingest", remote, folder, "--engine", "ray", "--quiet", "--batch-size", "8")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "added 20 image(s)" in done.stdout and "skipped 1" in done.stdout
    assert "zz_broken.png" in done.stdout  # the skipped file, with its reason, as the local ingest reports it
    again = _kira("ingest", remote, folder, "--engine", "ray", "--quiet")  # re-run: unchanged files counted, exit 0
    assert again.returncode == 0, again.stderr[-3000:]
    assert "added 0 image(s)" in again.stdout and "20 already in the knowledge base unchanged" in again.stdout
    assert "is already in the knowledge base" not in again.stdout + again.stderr

    kbs = {"local": KnowledgeBase.open(local, read_only=True), "ray": KnowledgeBase.open(remote, read_only=True)}
    try:
        a, b = kbs["local"], kbs["ray"]
        ids = a.store.chunk_ids()
        assert len(ids) > 20 * 5 and np.array_equal(ids, b.store.chunk_ids())
        for space in ("visual", "text"):
            np.testing.assert_allclose(a.index(space).get_vectors(ids), b.index(space).get_vectors(ids), atol=1e-5)
        assert a.store.chunks(ids) == b.store.chunks(ids)
        docs_a, docs_b = a.documents(), b.documents()
        assert sorted(docs_a) == sorted(names) and docs_a == docs_b
        assert docs_b["coffee"].caption == "a cup of coffee on a saucer"  # the sidecar was read
        answers = [[(i.doc_id, i.level, round(float(i.score), 5)) for i in Kira(kb).ask(
            "a cup of coffee on a saucer", variant="dual_path").evidence.items] for kb in (a, b)]
        assert answers[0] == answers[1] and answers[0][0][0] == "coffee"
    finally:
        for kb in kbs.values():
            kb.close()
        release_lite(local / "milvus.db")
        release_lite(remote / "milvus.db")


def test_the_ray_engine_refuses_an_embedded_knowledge_base_with_the_fix(tmp_path):
    from PIL import Image

    from kira.knowledge_base import KnowledgeBase

    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(np.full((32, 32, 3), 200, np.uint8)).save(folder / "grey.png")
    KnowledgeBase.create(tmp_path / "kb").close()
    done = _kira("ingest", tmp_path / "kb", folder, "--engine", "ray")
    assert done.returncode == 2
    assert "embedded knowledge base" in done.stderr and "--engine ray" in done.stderr
    done = _kira("ingest", tmp_path / "new", folder, "--engine", "ray", "--backend", "embedded")
    assert done.returncode == 2 and "Milvus-backed" in done.stderr and not (tmp_path / "new").exists()


def _tags_of(path) -> list[str]:
    return ["big"] if "coffee" in str(path) else ["small"]


def _metadata_of(path) -> dict:
    return {"file": str(path).rsplit("/", 1)[-1]}


def test_the_ray_actor_writes_with_the_knowledge_bases_path_and_skips_with_reasons(tmp_path):
    """The actor in this process (no Ray): captions, tags and metadata as the local ingest takes them, images over
    max_pixels and broken files skipped with the reason, rows equal to `KnowledgeBase.add_image`'s."""
    from dataclasses import asdict

    from PIL import Image
    from skimage import data

    from kira.ray_ingest.kb import KbEncodeAndWrite
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(data.coffee()[::4, ::4]).save(folder / "coffee.png")
    Image.fromarray(data.camera()[::2, ::2]).save(folder / "camera.png")  # 256 x 256: over max_pixels below
    (folder / "coffee.txt").write_text("a cup of coffee")
    (folder / "broken.png").write_bytes(b"not a png")
    stack = load_default(prefer_cuda=False, threads=1)
    kb = KnowledgeBase.create(tmp_path / "kb", models=stack, backend="milvus")
    try:
        storage = kb.external_writers()
        actor = KbEncodeAndWrite(asdict(storage.collection.config), {
            "threads": 1, "config": kb.config.to_dict(), "levels": list(kb.levels),
            "caption_children": False, "captions": None, "root": str(folder), "image_encoder": None,
            "tags": _tags_of, "metadata": _metadata_of, "max_pixels": 200 * 200})
        paths = [str(folder / n) for n in ("broken.png", "camera.png", "coffee.png")]
        out = actor({"path": np.array(paths, dtype=object), "doc_id": np.array(["broken", "camera", "coffee"], dtype=object),
                     "ordinal": np.array([0, 1, 2])})
        assert out["status"].tolist() == ["skipped", "skipped", "added"]
        assert "pixels" in out["reason"][1] and out["reason"][0] and out["chunks"][2] > 1
        actor.client.close()
        storage.note_external_writes()
        kb.commit()
        doc = kb.documents(["coffee"])["coffee"]
        assert doc.caption == "a cup of coffee" and doc.tags == ("big",) and doc.metadata == {"file": "coffee.png"}
        twin = KnowledgeBase.create(tmp_path / "twin", models=stack, backend="milvus")
        twin.add_image(np.asarray(Image.open(folder / "coffee.png").convert("RGB")), doc_id="coffee",
                       caption="a cup of coffee", tags=["big"], metadata={"file": "coffee.png"})
        twin.commit()
        ids = kb.store.chunk_ids()
        shift = ids - twin.store.chunk_ids()  # the twin's image took ordinal 0, the actor's ordinal 2
        assert len(set(shift.tolist())) == 1
        np.testing.assert_allclose(kb.index("visual").get_vectors(ids),
                                   twin.index("visual").get_vectors(twin.store.chunk_ids()), atol=1e-5)
        mine, theirs = kb.store.chunks(ids), twin.store.chunks(twin.store.chunk_ids())
        assert [mine[i].description for i in ids] == [theirs[i].description for i in twin.store.chunk_ids()]
        twin.close()
    finally:
        kb.close()
        release_lite(tmp_path / "kb" / "milvus.db")
        release_lite(tmp_path / "twin" / "milvus.db")
