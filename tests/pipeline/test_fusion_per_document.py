"""Fusion counts a document once per ranking (kira.retrieval.fusion), so a ranking that lists only parts
of images (the query crop's, fine-grained) cannot outvote the image the query is a copy of.

Real case (issue 31, uncaptioned photos, pixel encoder): a brighter copy of scikit-image's moon is
the moon's document chunk first on the image's ranking; the crop's ranking lists regions and patches
only. Fused chunk by chunk, every region of the text and clock photos collected a vote the moon's
document chunk could not, and the full variant lost the moon that dual_path put first.
"""

from __future__ import annotations

import numpy as np
import pytest
from skimage_photos import captioned_kb, skimage_rgb

from kira.config import RetrievalConfig
from kira.pipeline import Kira
from kira.query_state import Ranking, RetrievalPath
from kira.retrieval.fusion import fuse

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

# chunk id -> document chunk id: documents 10 and 20, each with parts
DOCUMENT_OF = {10: 10, 11: 10, 12: 10, 20: 20, 21: 20, 22: 20, 23: 20}


def _document_of(ids: np.ndarray) -> np.ndarray:
    return np.array([DOCUMENT_OF.get(int(i), -1) for i in ids], dtype=np.int64)


def _ranking(ids: list[int], weight: float, path: RetrievalPath = RetrievalPath.VISUAL) -> Ranking:
    return Ranking(path, np.array(ids, np.int64), np.linspace(0.9, 0.5, len(ids)).astype(np.float32), weight)


def test_a_parts_only_ranking_does_not_outvote_the_document_ranked_first():
    image = _ranking([10, 21, 22, 23, 11], 0.6)  # document 10 first, then document 20's parts
    crop = _ranking([21, 22, 23, 12], 0.3, RetrievalPath.FINE)  # parts only: document 20's lead, 10's after
    config = RetrievalConfig()
    chunkwise = fuse([image, crop], config)
    assert int(chunkwise.ids[0]) == 21  # fused chunk by chunk, a part of document 20 outvotes document 10
    fused = fuse([image, crop], config, _document_of)
    assert int(fused.ids[0]) == 10  # first on the heavier ranking, second on the lighter one
    assert float(fused.scores[0]) == 1.0 and np.all(np.diff(fused.scores) <= 0)
    assert sorted(fused.ids.tolist()) == sorted(chunkwise.ids.tolist())  # the same chunks, reordered
    assert fused.paths[10] == ["visual"] and fused.paths[21] == ["visual", "fine"]


def test_a_document_scores_once_per_ranking_and_its_chunks_share_it():
    config = RetrievalConfig()
    ranking = _ranking([20, 21, 22, 23, 10], 1.0)
    fused = fuse([ranking], config, _document_of)
    rrf = {d: 1.0 / (config.rrf_k + rank) for rank, d in enumerate([20, 10], start=1)}
    score = dict(zip(fused.ids.tolist(), fused.scores.tolist()))
    # document 10 is second among documents, not fifth among chunks
    assert score[10] == pytest.approx(rrf[10] / rrf[20], rel=1e-5)
    # document 20's parts follow its document chunk in proportion to their own chunk-level scores
    assert score[20] == 1.0 and score[21] == pytest.approx((config.rrf_k + 1) / (config.rrf_k + 2), rel=1e-5)


def test_a_chunk_of_no_known_document_is_a_document_of_its_own():
    fused = fuse([_ranking([99, 10, 11], 1.0)], RetrievalConfig(), _document_of)
    assert fused.ids.tolist()[:2] == [99, 10]
    assert fuse([], RetrievalConfig(), _document_of).ids.size == 0


def test_fusion_keeps_at_most_the_configured_candidates():
    config = RetrievalConfig(candidates=3)
    fused = fuse([_ranking([10, 11, 12, 20, 21, 22, 23], 1.0)], config, _document_of)
    assert len(fused.ids) == 3 and fused.ids.tolist()[0] == 10


def test_a_brighter_copy_of_the_moon_finds_the_moon_under_every_variant(tmp_path):
    from kira.models import load_default

    uncaptioned = dict.fromkeys(("moon", "text", "clock", "page", "grass", "gravel"))
    with captioned_kb(tmp_path / "kb", uncaptioned, models=load_default(image_encoder="pixel")) as kb:
        brighter = np.clip(skimage_rgb("moon").astype(np.float32) * 1.2 + 10, 0, 255).astype(np.uint8)
        kira = Kira(kb)
        for variant in ("dual_path", "full"):
            result = kira.ask(None, image=brighter, variant=variant, top_k=5, thumbnails=False)
            docs = list(dict.fromkeys(i.doc_id for i in result.evidence.items))
            assert docs[0] == "moon", (variant, docs)


def test_real_asks_fuse_as_the_numpy_version_did(tmp_path, monkeypatch):
    """Every fusion of real asks (captioned photos, image and text questions, each variant) equals the
    numpy per-document fusion the core's rrf_fuse(documents=...) replaced (benchmarks/peers/fusion_reference.py)."""
    from benchmarks.peers.fusion_reference import numpy_per_document
    from skimage_photos import CAPTIONS

    from kira.models import load_default
    from kira.retrieval import stages

    calls = []

    def recording(rankings, config, document_of=None):
        fused = fuse(rankings, config, document_of)
        kept = [r for r in rankings if len(r.ids) and r.weight > 0]
        ids, scores = numpy_per_document([r.ids for r in kept], [r.weight for r in kept], config.rrf_k, document_of,
                                         config.candidates)
        calls.append((len(kept), fused, ids, (scores / scores[0]).astype(np.float32)))
        return fused

    monkeypatch.setattr(stages, "fuse", recording)
    names = ("moon", "text", "clock", "page", "grass", "gravel", "camera", "coffee")
    with captioned_kb(tmp_path / "kb", {n: CAPTIONS.get(n) for n in names}, models=load_default(image_encoder="pixel")) as kb:
        kira = Kira(kb)
        crop = skimage_rgb("coffee")[100:300, 150:450]
        for variant in ("dual_path", "full"):
            kira.ask("What does the clock show?", variant=variant, top_k=5, thumbnails=False)
            kira.ask("What is in this picture?", image=crop, variant=variant, top_k=5, thumbnails=False)
    assert calls and max(n for n, *_ in calls) > 2
    for _, fused, ids, scores in calls:
        assert fused.ids.tolist() == ids.tolist()
        np.testing.assert_array_equal(fused.scores, scores)
