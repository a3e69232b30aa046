"""Issue 33.1: the batched, threaded ingest (texts encoded by length buckets in a second thread while the image
vectors are computed, thumbnails made as files are decoded) stores what encoding one image, one box and one text
at a time stores, to float rounding, on real images."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "coins")


@pytest.fixture(scope="module")
def stack():
    from kira.models import load_default

    return load_default(prefer_cuda=False, threads=1)


def _folder(path):
    """6 scikit-image photos (at most 160 px a side) and 2 scikit-learn digits, as PNG files."""
    from PIL import Image
    from skimage import data
    from sklearn.datasets import load_digits

    path.mkdir()
    for name in PHOTOS:
        pixels = np.asarray(getattr(data, name)())
        image = Image.fromarray(pixels[..., :3] if pixels.ndim == 3 else pixels)
        image.thumbnail((160, 160))
        image.save(path / f"{name}.png")
    digits = load_digits()
    for i in range(2):
        Image.fromarray(np.kron(digits.images[i] * (255 / 16), np.ones((6, 6))).astype(np.uint8)).save(
            path / f"digit_{i}.png")
    return path


def test_a_batched_ingest_stores_what_one_image_and_one_text_at_a_time_give(tmp_path, stack):
    from PIL import Image

    from kira.config import KiraConfig
    from kira.images import load_image
    from kira.knowledge_base import KnowledgeBase
    from kira.knowledge_base.chunker import LEVELS, describe, plan_image
    from kira.text.pieces import summary_pieces

    folder = _folder(tmp_path / "images")
    with KnowledgeBase.create(tmp_path / "kb", models=stack) as kb:
        summary = kb.ingest(folder, batch_size=3)  # 8 images: batches of 3, 3 and 2
        assert summary.batches == 3 and len(summary.added) == 8
        ids = kb.store.chunk_ids()
        rows = kb.store.chunks(ids)
        visual = kb.store.vectors("visual", ids, stack.image.dim)
        text = kb.store.vectors("text", ids, stack.text.dim)
        stored = {cid: (rows[int(cid)], visual[n], text[n]) for n, cid in enumerate(ids)}
        descriptions = [r.description for r, _, _ in stored.values()]
        pieces = kb.store.stored_piece_texts({p for d in descriptions for p in summary_pieces(d)}, stack.text.dim)
        thumbnails = {doc: kb.store.thumbnail(doc) for doc in summary.added}

    config = KiraConfig()
    checked = 0
    for path in sorted(folder.iterdir()):
        pixels = load_image(path)
        plan = plan_image(pixels, stack.regions, config.chunking, LEVELS)
        describe(plan, None, (), stack.captioner, caption_children=False)
        mine = [(r, v, t) for r, v, t in stored.values() if r.doc_id == path.stem]
        assert [(r.level, r.box) for r, _, _ in mine] == [(c.level, c.box) for c in plan.chunks]
        for (row, v, t), chunk in zip(mine, plan.chunks):
            assert row.description == chunk.description
            np.testing.assert_allclose(v, stack.image.encode_boxes(pixels, [chunk.box])[0], atol=1e-5)
            np.testing.assert_allclose(t, stack.text.encode([chunk.embed_text])[0], atol=1e-5)
            checked += 1
        with Image.open(io.BytesIO(thumbnails[path.stem])) as im:  # made in the reader thread, same pixels
            small = Image.fromarray(pixels)
            small.thumbnail((160, 160))
            assert np.array_equal(np.asarray(im), np.asarray(small))
    assert checked == len(stored) > 8 * 5
    assert len(pieces) >= 8  # the text pieces too (one at least per image): each as the text encoder gives it alone
    for piece, vector in pieces.items():
        np.testing.assert_allclose(vector, stack.text.encode([piece])[0], atol=1e-5)


def test_a_text_encoder_failure_in_the_text_thread_fails_the_batch_and_stores_nothing(tmp_path, stack):
    from kira.knowledge_base import KnowledgeBase
    from kira.models.stack import ModelStack

    class Refuses:
        dim = stack.text.dim

        def encode(self, texts):
            raise RuntimeError("text encoder out of memory")

    broken = ModelStack(image=stack.image, text=Refuses(), regions=stack.regions, captioner=stack.captioner)
    folder = _folder(tmp_path / "images")
    with KnowledgeBase.create(tmp_path / "kb", models=broken) as kb:
        summary = kb.ingest(folder, batch_size=4)
        assert summary.added == [] and len(summary.skipped) == 8
        assert all("text encoder out of memory" in reason for _, reason in summary.skipped)
        assert len(kb) == 0 and len(kb.store.chunk_ids()) == 0


def test_the_next_batch_is_forwarded_ahead_and_encode_batch_reuses_it(stack, monkeypatch):
    """prefetch_forward runs the CNN's pass over a batch (as ingest's reader thread does for the next one);
    encode_batch then runs no network for those images, and stores the same vectors as without it."""
    from skimage import data

    from kira.config import ChunkingConfig
    from kira.knowledge_base.batch_encode import encode_batch, prefetch_forward

    cnn = stack.image.cnn
    images = [np.ascontiguousarray(getattr(data, name)()) for name in ("coffee", "rocket")]
    items = [dict(doc_id=f"d{i}", pixels=px, caption=None, tags=()) for i, px in enumerate(images)]
    levels = ("document", "region", "patch")
    cnn._cache.clear()
    plain = encode_batch(stack, items, ChunkingConfig(), levels)
    cnn._cache.clear()
    assert prefetch_forward(stack.image, images)
    runs = []
    session_type = type(cnn._session)
    real_run = session_type.run

    def counted(session, *args, **kwargs):
        if session is cnn._session:
            runs.append(1)
        return real_run(session, *args, **kwargs)

    monkeypatch.setattr(session_type, "run", counted)
    ahead = encode_batch(stack, items, ChunkingConfig(), levels)
    assert runs == []  # every forward the batch made was answered by the pass run ahead
    np.testing.assert_allclose(ahead.visual, plain.visual, atol=1e-6)
    assert ahead.labels == plain.labels


def test_nothing_is_forwarded_ahead_when_the_cache_cannot_hold_two_batches(stack):
    from kira.knowledge_base.batch_encode import prefetch_forward

    cnn = stack.image.cnn
    too_many = [np.full((8, 8, 3), i, np.uint8) for i in range(cnn.config.cache_items // 2 + 1)]
    cnn._cache.clear()
    assert not prefetch_forward(stack.image, too_many)
    assert len(cnn._cache) == 0
    assert not prefetch_forward(stack.image, [])


def test_a_forward_pass_ahead_that_fails_leaves_the_ingest_to_encode_the_batch_itself(tmp_path, stack, monkeypatch):
    """The reader thread's CNN pass is an optimisation: when it raises, every image is still ingested."""
    import kira.knowledge_base.batch_encode as batch_encode
    from kira.knowledge_base import KnowledgeBase

    tries = []

    def broken(encoder, images):
        tries.append(len(images))
        raise RuntimeError("onnxruntime refused the batch")

    monkeypatch.setattr(batch_encode, "prefetch_forward", broken)
    folder = _folder(tmp_path / "images")
    with KnowledgeBase.create(tmp_path / "kb", models=stack) as kb:
        summary = kb.ingest(folder, batch_size=3)
        assert tries == [3, 3, 2]
        assert len(summary.added) == 8 and not summary.skipped
        assert len(kb) == 8
