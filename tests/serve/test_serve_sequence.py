"""/ask answers a sequence subject member by member, and says where each claim's lead ends."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="needs the serve extra (pip install 'kira[serve]')")
data = pytest.importorskip("skimage.data", reason="needs scikit-image (pip install 'kira[demo]')")


def test_ask_returns_each_revision_in_order_with_its_lead(tmp_path):
    from fastapi.testclient import TestClient

    from kira.knowledge_base import KnowledgeBase
    from kira.serve import create_app

    with KnowledgeBase.create(tmp_path / "kb") as kb:
        kb.add_image(data.coffee(), doc_id="cup_monday", caption="a full cup of coffee on a saucer",
                     sequence=("breakfast-log", 0))
        kb.add_image(data.chelsea(), doc_id="cup_tuesday", caption="a tabby cat sitting where the cup was",
                     sequence=("breakfast-log", 1))
        kb.add_image(data.rocket(), doc_id="launch", caption="a rocket on its launch pad")  # the group: 2 of 3
    app = create_app(tmp_path / "kb", read_only=True)
    with TestClient(app) as client:
        body = client.post("/ask", json={"question": "what does the breakfast-log show?", "top_k": 5}).json()
    app.state.service.stop()
    leads = [c["lead"] for c in body["claims"] if c["lead"]]
    assert leads == ["cup_monday (breakfast-log, 1 of 2)", "cup_tuesday (breakfast-log, 2 of 2)"], body["answer"]
    assert body["answer"].index("coffee") < body["answer"].index("tabby cat")
    assert all(c["text"].startswith(c["lead"]) for c in body["claims"])
