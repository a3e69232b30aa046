"""`kb.adapt`: validated few-shot adaptation of a knowledge base of real digit scans, what it installs,
`kb.classify`, `kira info`, and the Milvus backend's refusal."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from pipeline_fakes import FakeStack

from kira.adapt import validation
from kira.adapt.fewshot import TRAINED
from kira.adapt.validation import AdaptationReport
from kira.knowledge_base import KnowledgeBase

CLASSES = ("0", "1", "7")


def _image(digit: np.ndarray) -> np.ndarray:
    """An 8x8 digit scan (0..16) as a 32x32 RGB uint8 image."""
    grey = np.kron(digit / 16.0, np.ones((4, 4))) * 255
    return np.repeat(grey[:, :, None], 3, axis=2).astype(np.uint8)


@pytest.fixture()
def digits_kb(tmp_path):
    from sklearn.datasets import load_digits

    d = load_digits()
    path = tmp_path / "kb"
    truth = {}
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        for c in CLASSES:
            for n, i in enumerate(np.flatnonzero(d.target == int(c))[:12]):
                kb.add_image(_image(d.images[i]), doc_id=f"{c}-{n}")
                truth[f"{c}-{n}"] = c
    return path, truth


def _labels(truth, shots):
    return {d: c for d, c in truth.items() if int(d.split("-")[1]) < shots}


def test_adapt_reports_installs_and_classifies(digits_kb, capsys):
    path, truth = digits_kb
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        report = kb.adapt(_labels(truth, 5))
        assert isinstance(report, AdaptationReport) and report.labelled == 15 and report.classes == 3
        assert report.measured["frozen"] > 0.5 and report.measured[report.chosen] >= report.measured["frozen"]
        assert kb.adaptation == report and "local" in report.measured  # the stored patch vectors were found
        assert (kb.adapter is not None) == (report.chosen in TRAINED)
        rest = [d for d in truth if int(d.split("-")[1]) >= 5]
        predicted = kb.classify(rest)
        assert np.mean([p == truth[d] for p, d in zip(predicted, rest)]) > 0.8
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as kb:
        assert kb.adaptation == report and kb.classify(rest[:3]) == predicted[:3]
    from kira.cli import main

    assert main(["info", str(path)]) == 0
    assert f"adapted:   {report.chosen} (3 classes, 15 labelled" in capsys.readouterr().out
    assert main(["info", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["adaptation"]["chosen"] == report.chosen


def test_a_chosen_head_becomes_the_adapter_and_frozen_removes_it(digits_kb, monkeypatch):
    path, truth = digits_kb
    real = validation.validate

    def choosing(method):
        def fake(*args, **kw):
            return AdaptationReport(method, **{k: v for k, v in real(*args, **kw).as_dict().items() if k != "chosen"})
        return fake

    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        raw_dim = kb.index("visual").dim
        monkeypatch.setattr(validation, "validate", choosing("protonet"))
        assert kb.adapt(_labels(truth, 4)).chosen == "protonet"
        assert type(kb.adapter).__name__ == "ProtoNetHead" and kb.index("visual").dim == kb.adapter.dim
        monkeypatch.setattr(validation, "validate", choosing("frozen"))
        assert kb.adapt(_labels(truth, 4)).chosen == "frozen"
        assert kb.adapter is None and kb.index("visual").dim == raw_dim
        assert kb.adaptation.chosen == "frozen"


def test_one_example_per_class_keeps_the_knowledge_base_frozen(digits_kb):
    path, truth = digits_kb
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        report = kb.adapt(_labels(truth, 1))
        assert report.chosen == "frozen" and report.protocol == "none" and kb.adapter is None


def test_bad_labels_and_states_are_refused_with_what_to_do(digits_kb):
    path, truth = digits_kb
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        with pytest.raises(ValueError, match="run kb.adapt"):
            kb.classify(["0-1"])
        assert kb.adaptation is None
        with pytest.raises(ValueError, match="not in"):
            kb.adapt({"0-1": "0", "nope": "1"})
        with pytest.raises(ValueError, match="non-empty mapping"):
            kb.adapt({})
        with pytest.raises(ValueError, match="at least two classes"):
            kb.adapt({"0-1": "0", "0-2": "0"})
        assert kb.adaptation is None and not (path / "fewshot").exists()
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as kb:
        with pytest.raises(ValueError, match="read-only"):
            kb.adapt(_labels(truth, 3))


def test_the_milvus_backend_refuses_adaptation_clearly(tmp_path):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from milvus_fixtures import release_lite

    kb = KnowledgeBase.create(tmp_path / "kb", models=FakeStack(), backend="milvus")
    try:
        with pytest.raises(ValueError, match="milvus backend.*kb.adapt on an embedded knowledge base"):
            kb.adapt({"a": "x", "b": "y"})
        with pytest.raises(ValueError, match="milvus backend.*kb.classify on an embedded"):
            kb.classify(["a"])
        with pytest.raises(ValueError, match="milvus backend.*set it on an embedded"):
            kb.set_adapter(None)
        assert kb.adapter is None and kb.adaptation is None
    finally:
        kb.close()
        release_lite(tmp_path / "kb" / "milvus.db")
    assert kb.adaptation is None


def test_the_service_answers_through_the_adapter_kb_adapt_installed(digits_kb, monkeypatch):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from PIL import Image

    from kira.serve import create_app

    path, truth = digits_kb
    real = validation.validate
    monkeypatch.setattr(validation, "validate", lambda *a, **kw: AdaptationReport(
        "projection", **{k: v for k, v in real(*a, **kw).as_dict().items() if k != "chosen"}))
    with KnowledgeBase.open(path, models=FakeStack()) as kb:
        kb.adapt(_labels(truth, 4))
        chunk = kb.store.document_chunk_ids(["7-9"])["7-9"]
        adapted = kb.adapter.apply(kb.store.vectors("visual", [chunk], kb.storage.spaces.dims["visual"]))[0]
        assert kb.index("visual").dim == len(adapted) != kb.storage.spaces.dims["visual"]
    from sklearn.datasets import load_digits

    d = load_digits()
    png = io.BytesIO()
    Image.fromarray(_image(d.images[np.flatnonzero(d.target == 7)[9]])).save(png, format="PNG")
    with TestClient(create_app(path, models=FakeStack(), read_only=True)) as client:
        for query in ({"image_base64": base64.b64encode(png.getvalue()).decode()}, {"vector": adapted.tolist()}):
            hit = client.post("/search", json={**query, "top_k": 1, "levels": ["document"], "variant": "visual_only"})
            assert hit.status_code == 200, hit.text
            assert hit.json()["results"][0]["doc_id"] == "7-9"  # the query went through the installed adapter
