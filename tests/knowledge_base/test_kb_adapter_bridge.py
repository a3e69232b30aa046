"""Knowledge base: the domain adapter (stored, re-projects the visual index, reloaded) and the fitted bridge."""

from __future__ import annotations

import numpy as np
from pipeline_fakes import FakeStack, flat

from kira.adapt import ProjectionHead
from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira

COLOURS = {"red": (1, 0, 0), "green": (0, 1, 0), "blue": (0, 0, 1), "yellow": (1, 1, 0)}


def test_set_adapter_reprojects_and_survives_reopen(tmp_path):
    path = tmp_path / "kb"
    rng = np.random.default_rng(0)
    head = ProjectionHead(weight=rng.normal(size=(48, 16)).astype(np.float32), bias=np.zeros(16, np.float32))
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        for name, c in COLOURS.items():
            kb.add_image(flat(c), doc_id=name, caption=f"{name} card")
        n = len(kb.index("visual"))
        kb.set_adapter(head)
        assert kb.index("visual").dim == 16 and len(kb.index("visual")) == n
        assert Kira(kb).ask(image=flat(COLOURS["blue"]), variant="visual_only").evidence.items[0].doc_id == "blue"
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as kb:
        assert kb.storage.repair.clean and kb.index("visual").dim == 16
        assert type(kb.adapter).__name__ == "ProjectionHead" and kb.stats()["adapter"].endswith("ProjectionHead")
        np.testing.assert_allclose(kb.adapter.weight, head.weight)
        result = Kira(kb).ask(image=flat(COLOURS["green"]), variant="full")
        assert result.evidence.items[0].doc_id == "green" and result.card.config["adapter"] == "ProjectionHead"
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        kb.set_adapter(None)
        assert kb.index("visual").dim == 48 and kb.adapter is None


def test_bridge_is_fitted_saved_and_refitted_when_the_kb_grows(tmp_path):
    stack = FakeStack(image_text=None)  # like the default stack: no text tower in image space
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=stack) as kb:
        kb.add_image(flat(COLOURS["red"]), doc_id="red", caption="red card")
        kb.commit()
        assert kb.bridge() is None  # fewer than two captioned images
        kb.add_image(flat(COLOURS["blue"]), doc_id="blue", caption="blue card")
        kb.commit()
        assert kb.bridge() is not None and (path / "bridge.npz").is_file()
        assert kb.store.get_meta("bridge_fitted_on") == "2"
        result = Kira(kb).ask("blue card", variant="visual_only")
        # the question's bridged visual ranking weighs only as far as the bridge ranks held-out captioned images:
        # one pair to learn from each time, it ranks the other no better than chance, and path A stays silent
        assert kb.bridge().skill == 0.0
        assert not any(r["path"] == "visual" for r in result.trace["rankings"])
        kb.add_image(flat(COLOURS["green"]), doc_id="green", caption="green card")
        kb.commit()
        kb.bridge()
        assert kb.store.get_meta("bridge_fitted_on") == "3"


def test_bridge_is_refitted_only_once_the_captioned_documents_changed_by_the_share(tmp_path, monkeypatch):
    from kira.knowledge_base import adaptation as kb_module
    from kira.models.bridge import TextToImageBridge

    fits: list[int] = []
    fit = TextToImageBridge.fit
    monkeypatch.setattr(TextToImageBridge, "fit", lambda self, t, v: fits.append(len(t)) or fit(self, t, v))
    rng = np.random.default_rng(0)
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(image_text=None)) as kb:
        for i in range(40):
            kb.add_image(flat(tuple(rng.uniform(0, 1, 3))), doc_id=f"d{i}", caption=f"card {i}")
        kb.commit()
        assert fits == [40]
        share = kb_module.BRIDGE_REFIT_SHARE  # 5%: two more documents of 40 are within it, three are not
        for i, expect in ((40, [40]), (41, [40]), (42, [40, 43])):
            kb.add_image(flat(tuple(rng.uniform(0, 1, 3))), doc_id=f"d{i}", caption=f"card {i}")
            kb.commit()
            assert fits == expect, (i, share)
        assert kb.store.get_meta("bridge_fitted_on") == "43"
        assert kb.bridge() is not None and fits == [40, 43]  # read back, not refitted


def test_a_reader_picks_up_an_adapter_the_writer_sets_or_removes(tmp_path):
    rng = np.random.default_rng(1)
    head = ProjectionHead(weight=rng.normal(size=(48, 16)).astype(np.float32), bias=np.zeros(16, np.float32))
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as writer:
        for name, c in COLOURS.items():
            writer.add_image(flat(c), doc_id=name, caption=f"{name} card")
        writer.commit()
        reader = KnowledgeBase.open(tmp_path / "kb", models=FakeStack(), read_only=True)
        try:
            assert reader.adapter is None and reader.index("visual").dim == 48
            writer.set_adapter(head)
            assert reader.refresh()
            assert reader.adapter is not None and reader.index("visual").dim == 16
            assert Kira(reader).ask(image=flat(COLOURS["green"]), variant="full").evidence.items[0].doc_id == "green"
            writer.add_image(flat((0.5, 0.5, 0.5)), doc_id="grey")
            writer.commit()
            assert reader.refresh() and reader.index("visual").dim == 16  # later rows arrive through the adapter
            assert len(reader.index("visual")) == len(reader.store.chunk_ids(space="visual"))
            writer.set_adapter(None)
            assert reader.refresh() and reader.adapter is None and reader.index("visual").dim == 48
        finally:
            reader.close()
