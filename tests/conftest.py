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
