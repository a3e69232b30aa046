"""kira.text.shows: what an item shows as one text, the same at ingest and in an ask."""

from __future__ import annotations

from kira.text.shows import shown_as_text


def test_parts_join_in_order_and_metadata_keys_sort():
    text = shown_as_text("A cup of coffee.", ["hot", "drink"], ["espresso", "cup"], ["CAFE"], {"ward": 3, "bed": "b2"})
    assert text == "A cup of coffee. drink, hot. espresso, cup. CAFE. bed b2, ward 3"
    assert shown_as_text() == "" and shown_as_text("  ", [], [], [], {}) == ""
    assert shown_as_text(labels=["tabby"]) == "tabby"


def test_the_evidence_side_and_the_ingest_side_agree(tmp_path):
    """The piece ingest stores for a photo is the text the critic and the judge build from its evidence item."""
    import numpy as np
    from skimage import data

    from kira.grounding.evidence import build_items
    from kira.knowledge_base import KnowledgeBase
    from kira.knowledge_base.pieces import shown_piece
    from kira.reasoning.shown import shows_text

    with KnowledgeBase.create(tmp_path / "kb") as kb:
        kb.add_image(data.coffee(), doc_id="cup", caption="Coffee on a saucer.", tags=["drink", " hot "],
                     metadata={"room": "kitchen", "bed": 2})
        kb.commit()
        chunk = int(kb.document_chunk_ids(["cup"])["cup"])
        item = build_items(kb, [chunk], [1.0], {}, {}, thumbnails=False)[0]
        doc, prov = kb.documents(["cup"])["cup"], kb.provenances(["cup"])["cup"]
        stored = shown_piece(doc.caption, doc.tags, prov.get("labels"), prov.get("text_read"), doc.metadata)
        assert stored == shows_text(item) and "espresso" in stored and stored.endswith("bed 2, room kitchen")
        assert kb.piece_vectors([("cup", stored)], 384)  # stored as a piece
        assert np.isfinite(next(iter(kb.piece_vectors([("cup", stored)], 384).values()))).all()
