"""Quality invariants on real photographs nobody here made (scikit-image and scikit-learn sample images).

* An image query that is a copy of a stored image, or a crop, mirror or brightness change of
  one, returns that document first under every variant.
* Over a labelled real-image corpus (scikit-learn's digits), the full variant's precision@5
  for image queries is never below visual-only's.
* With the default (empty) profile, query expansion adds no concept text.
"""

from __future__ import annotations

import numpy as np
import pytest

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import VARIANTS, Kira

skimage_data = pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")
datasets = pytest.importorskip("sklearn.datasets", reason="needs scikit-learn (pip install 'kira[demo]')")

# skimage.data.cat is chelsea again; checkerboard and colorwheel are drawn, not photographed
PHOTOS = ("astronaut", "brick", "camera", "chelsea", "coffee", "coins", "grass", "gravel", "hubble_deep_field",
          "immunohistochemistry", "moon", "page", "retina", "rocket", "text")


def _rgb(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    return np.ascontiguousarray(image[:, :, :3])


def _corpus() -> dict[str, np.ndarray]:
    out = {name: _rgb(getattr(skimage_data, name)()) for name in PHOTOS}
    for file in ("china.jpg", "flower.jpg"):
        out[file.removesuffix(".jpg")] = _rgb(datasets.load_sample_image(file))
    return out


def _crop(image: np.ndarray, share: float = 0.85) -> np.ndarray:
    h, w = image.shape[:2]
    dh, dw = int(h * (1 - share) / 2), int(w * (1 - share) / 2)
    return np.ascontiguousarray(image[dh:h - dh, dw:w - dw])


AUGMENTATIONS = {
    "copy": lambda im: im.copy(),
    "crop": _crop,
    "mirror": lambda im: np.ascontiguousarray(im[:, ::-1]),
    "brighter": lambda im: np.clip(im.astype(np.float32) * 1.2 + 10, 0, 255).astype(np.uint8),
}


@pytest.fixture(scope="module")
def photos():
    return _corpus()


@pytest.fixture(scope="module")
def kb(photos, tmp_path_factory):
    base = KnowledgeBase.create(tmp_path_factory.mktemp("photos") / "kb")
    for name, image in photos.items():
        base.add_image(image, doc_id=name)  # no captions: what a user's uncaptioned folder gives
    base.commit()
    yield base
    base.close()


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_copy_crop_mirror_or_brighter_version_of_a_stored_photo_finds_it_first(kb, photos, variant):
    kira = Kira(kb)
    misses = []
    for name, image in photos.items():
        for how, change in AUGMENTATIONS.items():
            result = kira.ask(image=change(image), variant=variant, top_k=3)
            first = result.evidence.items[0].doc_id if result.evidence.items else None
            if first != name:
                misses.append(f"{how} {name} -> {first}")
    assert not misses, f"{variant}: {len(misses)} of {len(photos) * len(AUGMENTATIONS)} missed: {misses[:8]}"


def test_the_default_profile_adds_no_concept_text_to_a_question(kb):
    result = Kira(kb).ask("an orange cat indoors", variant="query_expansion")
    assert kb.profile.empty
    hypotheses = kb.models.captioner.hypotheses(None, "an orange cat indoors", 3)
    # what expansion adds is the captioner's own hypotheses about the question, never concept-bank text
    assert set(result.card.expansions) <= set(hypotheses)


def _digits_kb(tmp_path):
    digits = datasets.load_digits()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(digits.images))
    gallery, queries = order[:300], order[300:360]
    kb = KnowledgeBase.create(tmp_path / "digits", levels=("document",))
    big = lambda i: np.repeat(np.repeat((digits.images[i] * 15.9).astype(np.uint8), 8, 0), 8, 1)  # noqa: E731
    for i in gallery.tolist():
        kb.add_image(big(i), doc_id=f"d{i}", tags=[f"digit-{digits.target[i]}"])
    kb.commit()
    return kb, digits, queries, big


def test_the_full_variant_is_never_less_precise_than_visual_only_on_labelled_real_images(tmp_path):
    kb, digits, queries, big = _digits_kb(tmp_path)
    kira = Kira(kb)
    precision = {}
    for variant in ("visual_only", "full"):
        hits = []
        for i in queries.tolist():
            result = kira.ask(image=big(i), variant=variant, top_k=5)
            docs = list(dict.fromkeys(item.doc_id for item in result.evidence.items))[:5]
            hits.append(np.mean([digits.target[int(d[1:])] == digits.target[i] for d in docs]) if docs else 0.0)
        precision[variant] = float(np.mean(hits))
    kb.close()
    assert precision["visual_only"] > 0.3, precision  # well above chance (0.1): the encoder sees digits
    assert precision["full"] >= precision["visual_only"] - 1e-9, precision
