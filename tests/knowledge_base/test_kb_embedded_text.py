"""What a chunk's text vector embeds (kira.knowledge_base.chunker.embedded_text): what the image shows, its look
only where nothing else is known, while the stored description keeps every measurement. Real photos."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")
from skimage import data  # noqa: E402

from kira.config import ChunkingConfig  # noqa: E402
from kira.knowledge_base.chunker import LEVELS, describe, embedded_text, plan_image  # noqa: E402


@pytest.fixture(scope="module")
def stack():
    from kira.models import load_default

    return load_default(prefer_cuda=False, threads=1)


@pytest.fixture(scope="module")
def pixel_stack():
    from kira.models import load_default

    return load_default(image_encoder="pixel", prefer_cuda=False, threads=1)


def _grey(photo: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.repeat(photo.mean(axis=2, keepdims=True), 3, axis=2).astype(np.uint8))


def _described(stack, photo, caption=None, tags=()):
    plan = plan_image(photo, stack.regions, ChunkingConfig(), LEVELS)
    describe(plan, caption, tags, stack.captioner, caption_children=False)
    return plan


def test_the_rules_of_the_embedded_text():
    looks = "A dark, high-contrast colour image (600x400, landscape) dominated by brown (54%); smooth; " \
            "1 salient region: a large one at the centre (33%)."
    assert embedded_text(("my cup", ""), ("labels: espresso",), (looks,)) == "my cup; labels: espresso"
    assert embedded_text(("", "text: OPEN"), ("",), (looks,)) == "text: OPEN"
    assert embedded_text(("",), ("labels: espresso",), (looks,)) == \
        "labels: espresso; a dark, high-contrast colour image dominated by brown; smooth"
    assert embedded_text(("",), ("",), (looks, "")) == looks  # nothing says what it shows: its look, as measured
    assert embedded_text((), (), ()) == ""


def test_a_captioned_photo_embeds_what_it_shows_and_stores_how_it_looks(stack):
    cat, grey_cat = data.chelsea(), _grey(data.chelsea())
    one = _described(stack, cat, "my cat on the sofa", ("pets",))
    two = _described(stack, grey_cat, "my cat on the sofa", ("pets",))
    labels = stack.captioner.label_text(cat)
    assert labels == stack.captioner.label_text(grey_cat)  # the classifier sees the same cat in both
    doc, grey_doc = one.chunks[0], two.chunks[0]
    assert "colour image" in doc.description and "greyscale image" in grey_doc.description and "%" in doc.description
    assert doc.embed_text == grey_doc.embed_text == f"my cat on the sofa; tags: pets; {labels}"
    vectors = stack.text.encode([doc.embed_text, grey_doc.embed_text, doc.description, grey_doc.description])
    np.testing.assert_array_equal(vectors[0], vectors[1])  # the same text vector: what they show is the same
    assert float(vectors[2] @ vectors[3]) < 0.999  # the whole descriptions differ in their look
    assert all(c.embed_text == "my cat on the sofa; tags: pets" for c in one.chunks[1:])  # the user's words


def test_a_question_of_what_a_photo_shows_meets_its_text_undiluted(stack):
    plan = _described(stack, data.coffee(), "a cup of coffee on a saucer with a spoon")
    doc = plan.chunks[0]
    q, embedded, whole = stack.text.encode(["a hot drink in a cup", doc.embed_text, doc.description])
    assert float(q @ embedded) > float(q @ whole) + 0.05


def test_an_uncaptioned_labelled_photo_embeds_its_labels_and_its_look_in_words(stack):
    plan = _described(stack, data.coffee())
    doc = plan.chunks[0]
    labels = stack.captioner.label_text(data.coffee())
    assert labels and doc.description.startswith(labels) and "salient region" in doc.description
    assert doc.embed_text.startswith(f"{labels}; a ") and "colour image dominated by" in doc.embed_text
    assert not any(ch.isdigit() for ch in doc.embed_text) and "salient" not in doc.embed_text
    assert {c.embed_text for c in plan.chunks} == {doc.embed_text}  # one text vector for the whole image


def test_an_image_nothing_says_anything_of_embeds_how_it_looks(pixel_stack):
    assert not hasattr(pixel_stack.captioner, "labels")  # the pixel stack has no classifier
    plan = _described(pixel_stack, data.camera())
    doc = plan.chunks[0]
    assert doc.embed_text == doc.description == pixel_stack.captioner.caption(data.camera())
    assert "greyscale image" in doc.embed_text and "(512x512, square)" in doc.embed_text
    assert len(plan.chunks) > 1 and all(c.embed_text == doc.embed_text for c in plan.chunks[1:])


def test_the_stored_pieces_leave_a_whole_description_out_only_when_it_is_not_embedded(stack, pixel_stack):
    from kira.knowledge_base.batch_encode import encode_batch
    from kira.knowledge_base.pieces import stored_pieces

    for models, photo, whole_stored in ((stack, data.coffee(), False), (pixel_stack, data.camera(), True)):
        items = [dict(pixels=np.ascontiguousarray(photo), doc_id="p", caption=None, tags=(), metadata={})]
        batch = encode_batch(models, items, ChunkingConfig(), ("document",))
        (pieces,) = stored_pieces(items, batch.plans, batch.texts)
        doc = batch.plans[0].chunks[0]
        assert (doc.description.strip() in pieces) is whole_stored
        if not whole_stored:  # what it shows is stored; the whole, with its look, is encoded when an ask cites it
            assert f"{stack.captioner.label_text(photo)};" in pieces
