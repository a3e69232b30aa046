"""The critic helps, never hurts, on real uncaptioned photos (issue 31 item 4), with the default model stack.

* It judges what an item shows (labels, caption, tags, read text), not how it looks: the coffee
  photo, labelled "espresso", is kept for "a cup of coffee" with its regions.
* What the query image clearly shows (a copy, crop or mirror of a stored photo) is kept whatever
  the critic says.
* Over text questions, the full variant's top 3 holds the question's photo at least as often as
  dual_path's.
"""

from __future__ import annotations

import numpy as np
import pytest

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira
from kira.reasoning.critic import filter_by_probability

skimage_data = pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

PHOTOS = ("astronaut", "camera", "chelsea", "coffee", "coins", "moon", "page", "rocket", "brick", "hubble_deep_field")
QUESTIONS = {"a rocket": "rocket", "a cup of coffee": "coffee", "a cat": "chelsea", "coins": "coins",
             "the surface of the moon": "moon", "a hot drink": "coffee", "a kitten": "chelsea",
             "a space launch vehicle": "rocket", "galaxies in deep space": "hubble_deep_field",
             "a brick wall": "brick"}


def _rgb(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    return np.ascontiguousarray(np.repeat(image[:, :, None], 3, 2) if image.ndim == 2 else image[:, :, :3])


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    from kira.models import load_default

    base = KnowledgeBase.create(tmp_path_factory.mktemp("critic-photos") / "kb", models=load_default())
    for n, name in enumerate(PHOTOS):
        base.add_image(_rgb(getattr(skimage_data, name)()), doc_id=f"IMG_{1000 + n}")  # no caption, no name
    base.commit()
    yield base
    base.close()


def _doc(name: str) -> str:
    return f"IMG_{1000 + PHOTOS.index(name)}"


def _docs(result) -> list[str]:
    return list(dict.fromkeys(i.doc_id for i in (*result.evidence.items, *result.evidence.similar)))


def test_the_critic_judges_what_a_photo_shows_not_how_it_looks(kb):
    result = Kira(kb).ask("a cup of coffee", variant="grounded", top_k=5)
    assert _docs(result)[0] == _doc("coffee")
    assert not [i for i in result.evidence.dropped if i.doc_id == _doc("coffee")]  # nor its regions
    assert not result.card.critic["fallback"]  # something was judged relevant
    # issue 31: the "space shuttle" photo was dropped. Its labels (obelisk, drilling platform) say nothing of a
    # rocket, so "a rocket" finds it only by chance (MiniLM cosine 0.13, the other photos' 0.12-0.18); a question it
    # ranks first for shows the critic keeping it
    rocket = Kira(kb).ask("a space launch vehicle", variant="full", top_k=5)
    assert _doc("rocket") in _docs(rocket)[:3]
    assert not [i for i in rocket.evidence.dropped if i.doc_id == _doc("rocket")]


class RejectAll:
    """A critic that finds nothing relevant."""

    def filter(self, question, items, threshold=None, **_):
        return filter_by_probability(items, [0.0] * len(items), 0.1 if threshold is None else threshold)


def test_what_the_query_image_clearly_shows_is_never_dropped(kb):
    cat = _rgb(skimage_data.chelsea())
    for image in (np.ascontiguousarray(cat[:, ::-1]), np.ascontiguousarray(cat[30:-30, 40:-40])):
        result = Kira(kb, critic=RejectAll()).ask("is there anything unusual here?", image=image, variant="full")
        assert _docs(result)[0] == _doc("chelsea")
        assert not [i for i in result.evidence.dropped if i.doc_id == _doc("chelsea")]


def test_full_top3_is_never_below_dual_path(kb):
    kira = Kira(kb)

    def top3(variant: str) -> int:
        return sum(_doc(name) in _docs(kira.ask(q, variant=variant, top_k=5))[:3] for q, name in QUESTIONS.items())

    assert top3("full") >= top3("dual_path")
