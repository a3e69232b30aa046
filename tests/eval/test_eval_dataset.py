"""DomainVQA-R builder: determinism, sizes, question/document consistency, visual separability."""

from __future__ import annotations

import numpy as np
import pytest

from kira.eval import DOMAINS, build_domainvqa


@pytest.fixture(scope="session")
def small():
    return build_domainvqa(seed=0, small=True)


def test_same_seed_same_pixels_and_text(small):
    again = build_domainvqa(seed=0, small=True, domains=["xray", "circuits"])
    for name in ("xray", "circuits"):
        for a, b in zip(small[name].documents, again[name].documents):
            assert a.doc_id == b.doc_id and a.caption == b.caption
            assert np.array_equal(a.image, b.image)
        for a, b in zip(small[name].questions, again[name].questions):
            assert a.text == b.text and a.answer == b.answer and a.relevant_doc_ids == b.relevant_doc_ids


def test_other_seed_other_images(small):
    other = build_domainvqa(seed=1, small=True, domains=["histopathology"])["histopathology"]
    same = sum(np.array_equal(a.image, b.image) for a, b in zip(small["histopathology"].documents, other.documents))
    assert same == 0


def test_small_sizes_and_shapes(small):
    assert tuple(small) == DOMAINS
    for ds in small.values():
        assert len(ds.documents) == 24 and len(ds.questions) == 12
        assert {q.kind for q in ds.questions} == {"retrieval", "visual", "multihop"}
        assert len({d.doc_id for d in ds.documents}) == 24
        for d in ds.documents:
            assert d.image.dtype == np.uint8 and d.image.shape == (224, 224, 3)
            assert d.label in ds.labels
        assert len(ds.concept_bank) >= 10


def test_questions_point_at_real_documents_and_groups(small):
    for ds in small.values():
        ids = {d.doc_id for d in ds.documents}
        groups = {frozenset(g) for g in (*ds.temporal_groups, *ds.multiview_groups)}
        for q in ds.questions:
            assert q.relevant_doc_ids and set(q.relevant_doc_ids) <= ids
            if q.kind == "multihop":
                assert len(q.relevant_doc_ids) == 2
                assert any(set(q.relevant_doc_ids) <= g for g in groups), q.qid
            else:
                assert all(ds.document(d).label == q.label for d in q.relevant_doc_ids)
            if q.kind == "visual":
                assert q.query_image is not None
                # held out: the query image is not one of the knowledge base's images
                assert not any(np.array_equal(q.query_image, d.image) for d in ds.documents)
            else:
                assert q.query_image is None


def test_captions_name_the_label_only_sometimes(small):
    for ds in small.values():
        named = [d.label.lower() in d.caption.lower() for d in ds.documents]
        assert 0 < sum(named) < len(named), ds.name


def test_default_size():
    from kira.eval.dataset import BuildSize

    assert BuildSize.default(small=False) == BuildSize(200, 100)
    ds = build_domainvqa(seed=0, domains=["circuits"])["circuits"]  # the fastest generator
    assert len(ds.documents) >= 200 and len(ds.questions) >= 100
    assert ds.summary()["per_kind"] == {"retrieval": 40, "visual": 35, "multihop": 25}


def test_unknown_domain():
    with pytest.raises(ValueError, match="unknown DomainVQA-R domains"):
        build_domainvqa(domains=["ultrasound"])


def test_labels_visually_separable_by_default_encoder(small):
    from kira.models import load_default

    from kira.eval.dataset import BuildSize
    from kira.eval.domainvqa import xray

    encoder = load_default().image
    # x-ray needs more patients than the small build has (6 patients, 5 conditions) so that
    # every condition has images from more than one patient
    sets = {**small, "xray": xray.build(0, BuildSize(60, 10))}
    for ds in sets.values():
        x = encoder.encode([d.image for d in ds.documents])
        labels = np.array([d.label for d in ds.documents])
        groups = np.array([d.group for d in ds.documents])
        sims = x @ x.T
        sims[groups[:, None] == groups[None, :]] = -np.inf  # never match an image of the same patient/tile/slide
        accuracy = float(np.mean(labels[np.argmax(sims, axis=1)] == labels))
        chance = max(np.mean(labels == lab) for lab in ds.labels)
        assert accuracy > chance + 0.1, (ds.name, accuracy, chance)
