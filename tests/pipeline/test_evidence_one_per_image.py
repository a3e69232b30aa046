"""An image's region repeating its caption is not a second piece of evidence (kira.grounding.evidence).

Captioned scikit-image photos: for "an eye fundus photo" the evidence listed the retina photo and
its own region with the same caption, and the fundus detail and its region likewise; the answer
cited "[Evidence 1, 5]" as two items agreeing, and top-5 held three images. A further chunk of an
image now joins the evidence only when it says something more (words read inside it, a caption of
its own) or a path that compares its own pixels with the query found it.
"""

from __future__ import annotations

import numpy as np
import pytest
from skimage_photos import CAPTIONS as PHOTO_CAPTIONS
from skimage_photos import captioned_kb, skimage_rgb

from kira.grounding.evidence import LOCATING_PATHS, adds_to
from kira.knowledge_base.rows import ChunkRow
from kira.pipeline import Kira

pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")

CAPTIONS = {name: PHOTO_CAPTIONS[name] for name in ("retina", "microaneurysms", "camera", "cell", "moon", "coins")}


def _row(level: str, description: str, box=None) -> ChunkRow:
    return ChunkRow(id=1, doc_id="page", level=level, parent_id=None, box=box, description=description)


def test_a_region_adds_only_what_its_document_does_not_say():
    document = _row("document", "a scanned page; text: STOP AHEAD; A bright, high-contrast greyscale image")
    same = _row("region", "a scanned page; region at x 0-316, y 109-191 of 384x191", (0, 109, 316, 191))
    words = _row("region", "a scanned page; text: STOP; region at x 0-80, y 0-40 of 384x191", (0, 0, 80, 40))
    own = _row("region", "a scanned page; region at x 0-80, y 0-40 of 384x191; a red sign", (0, 0, 80, 40))
    assert not adds_to(same, document)  # its caption and where it lies: nothing more
    assert adds_to(words, document) and adds_to(own, document)  # the words read inside it; its own caption
    assert adds_to(document, same)  # the document's text read and its look are not in the region's


@pytest.fixture(scope="module")
def kira(tmp_path_factory):
    base = captioned_kb(tmp_path_factory.mktemp("one_per_image") / "kb", CAPTIONS)
    yield Kira(base)
    base.close()


@pytest.mark.parametrize("variant", ["dual_path", "full"])
def test_no_image_is_listed_twice_for_the_same_words(kira, variant):
    result = kira.ask("an eye fundus photo", variant=variant, top_k=5, thumbnails=False)
    rows = kira.kb.chunks([i.chunk_id for i in result.evidence.items])
    first: dict[str, ChunkRow] = {}
    for item in result.evidence.items:
        row = rows[item.chunk_id]
        if item.doc_id in first:
            assert adds_to(row, first[item.doc_id]) or LOCATING_PATHS.intersection(item.paths), \
                [(i.doc_id, i.level, i.paths) for i in result.evidence.items]
        first.setdefault(item.doc_id, row)
    assert {"retina", "microaneurysms"} <= {i.doc_id for i in result.evidence.items}


def test_a_crop_keeps_the_region_it_matches(kira):
    """With a query image the region the crop matches says where: it stays beside its document."""
    crop = np.ascontiguousarray(skimage_rgb("retina")[300:1000, 200:1200])
    result = kira.ask(None, image=crop, variant="dual_path", top_k=5, thumbnails=False)
    mine = [i for i in result.evidence.items if i.doc_id == "retina"]
    assert len(mine) == 2 and all(LOCATING_PATHS.intersection(i.paths) for i in mine), \
        [(i.doc_id, i.level, i.paths) for i in result.evidence.items]
    assert result.evidence.items[0].doc_id == "retina"
