"""Real uncaptioned photos with the default model stack: ingest stores no text piece that only says how
an image looks (the describer's brightness, colour, texture and salient-region parts) nor a region's own
pieces (its description and location), and answers do not change: against a knowledge base whose ingest
stored no pieces at all (the verifier then encodes every piece it meets), the same answers, grounding and
flags, for questions about content and about appearance."""

from __future__ import annotations

import numpy as np
import pytest

from kira.config import GroundingConfig, KiraConfig
from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.pieces import shown_piece
from kira.pipeline import Kira
from kira.reasoning.shown import appearance_parts
from kira.reasoning.verifier import about_looks
from kira.reasoning.verifier import summary_pieces

skimage_data = pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

PHOTOS = ("astronaut", "camera", "chelsea", "coffee", "moon", "brick")
QUESTIONS = ("a cup of coffee", "a cat", "a dark greyscale image", "a highly textured brick wall")


def _rgb(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    return np.ascontiguousarray(np.repeat(image[:, :, None], 3, 2) if image.ndim == 2 else image[:, :, :3])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from kira.models import load_default

    stack = load_default()
    encode, texts = stack.text.encode, []

    def recording(batch):
        texts.extend(batch)
        return encode(batch)

    stack.text.encode = recording  # type: ignore[method-assign]  # the same encoder, watched
    root = tmp_path_factory.mktemp("pieces-photos")
    bare = KiraConfig().replace(grounding=GroundingConfig(pieces_at_ingest=False))
    kbs = {}
    for name, config in (("stored", KiraConfig()), ("bare", bare)):
        kb = KnowledgeBase.create(root / name, config, models=stack)
        texts.clear()
        for n, photo in enumerate(PHOTOS):
            kb.add_image(_rgb(getattr(skimage_data, photo)()), doc_id=f"IMG_{1000 + n}")  # no caption, no name
        kb.commit()
        kbs[name] = (kb, list(texts))
    yield kbs, texts
    for kb, _ in kbs.values():
        kb.close()


def _looks(description: str) -> set[str]:
    parts = {p.strip(" ;.") for p in appearance_parts(description)}
    return {p for p in summary_pieces(description) if p.strip(" ;.") in parts and p != description.strip()}


def test_ingest_encodes_and_stores_no_piece_that_only_says_how_a_photo_looks(built):
    kbs, _ = built
    kb, encoded = kbs["stored"]
    rows = kb.store.conn.execute("SELECT doc_id, level, description FROM chunks WHERE level = 'document'").fetchall()
    looks = {p for _, _, d in rows for p in _looks(d)}
    assert any("salient region" in p for p in looks) and any("image (" in p for p in looks)
    stored = {t for (t,) in kb.store.conn.execute("SELECT text FROM text_pieces")}
    assert stored and not stored & looks and not set(encoded) & looks
    # the whole of a description that says how the photo looks besides its labels is left for ask time too: the
    # photo's text vector embeds its labels and its look in words (kira.knowledge_base.chunker.embedded_text)
    mixed = {d.strip() for _, _, d in rows if "labels:" in d}
    kept = {p for _, _, d in rows for p in summary_pieces(d)} - looks - mixed
    shown = {shown_piece(None, (), kb.provenances([d])[d].get("labels"), None, None) for d, _, _ in rows} - {""}
    assert shown and shown <= stored  # what each labelled photo shows (its labels), for the critic and the judge
    assert mixed and stored - shown == kept - shown  # everything else of a document's description is stored
    assert any(p.startswith("labels:") for p in stored) and not any("region at x" in p for p in stored)
    unlabelled = {d.strip() for _, _, d in rows if "labels:" not in d}  # known only by its look: its whole, embedded
    assert unlabelled <= stored and unlabelled <= set(encoded)


def test_answers_are_the_same_as_when_the_verifier_encodes_every_piece(built):
    kbs, encoded = built
    for question in QUESTIONS:
        encoded.clear()
        mine = Kira(kbs["stored"][0]).ask(question)
        cited = {n for claim in mine.answer.claims for n in claim.citations}
        looks = {p for item in mine.evidence.items if item.number in cited for p in _looks(item.summary)}
        if about_looks(question, mine.answer.claims):  # a cited photo's looks: encoded by the verifier, when an ask
            assert looks <= set(encoded)  # or a claim is about looks ("a dark greyscale image"), else left out
        else:
            assert not looks & set(encoded)
        theirs = Kira(kbs["bare"][0]).ask(question)
        assert mine.answer.text == theirs.answer.text
        assert mine.answer.grounding == pytest.approx(theirs.answer.grounding, abs=1e-5)
        flags = [[c.hallucination_risk for c in r.answer.claims] for r in (mine, theirs)]
        assert flags[0] == flags[1]
        for a, b in zip(mine.answer.claims, theirs.answer.claims):
            assert (a.s_sim, a.s_attn) == pytest.approx((b.s_sim, b.s_attn), abs=1e-5)


def test_appearance_parts_are_the_describers_measurements_not_caption_fields_or_location(built):
    kbs, _ = built
    rows = kbs["stored"][0].store.conn.execute("SELECT level, description FROM chunks WHERE level != 'patch'")
    for level, description in rows:
        parts = appearance_parts(description)
        assert parts and all(p in description for p in parts)
        assert not any(p.startswith("labels:") or " at x " in p for p in parts)
        assert any("image (" in p for p in parts) and any("salient region" in p for p in parts)
    caption = "A cup of espresso on a saucer; dark roast."
    described = f"{caption}; text: CAFE; A dark, high-contrast colour image (512x512, square); highly textured"
    assert appearance_parts(described, caption) == ["A dark, high-contrast colour image (512x512, square)",
                                                    "highly textured"]
    assert appearance_parts(caption, caption) == [] and appearance_parts("") == []
