"""llama.cpp never takes the process down: a build that crashes on this CPU is caught in a probe
process, and SmolLM falls back to kira's numpy engine saying why.

The crash is real: the probe's child is made to die of SIGILL, as a llama.cpp build with AMX
kernels does on a host whose CPU advertises AMX while the OS does not let the process use it.
"""

from __future__ import annotations

import logging

import pytest

pytestmark = pytest.mark.models
pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")
pytest.importorskip("torch")

from test_models_onnx_lm import tiny_gguf  # noqa: E402,F401 - the shared tiny checkpoint fixture

from kira.models.lm import SmolLM  # noqa: E402
from kira.models.lm import llamacpp  # noqa: E402
from kira.models.lm.llamacpp import LlamaCppEngine, LlamaCppUnsafe, probe_llama_cpp  # noqa: E402

DIES_OF_SIGILL = "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n"


@pytest.fixture
def crashing_llama_cpp(monkeypatch):
    monkeypatch.setattr(llamacpp, "_PROBE_CODE", DIES_OF_SIGILL)
    monkeypatch.setattr(llamacpp, "_probed", {})


def test_a_crash_in_the_probe_is_reported_and_cached(crashing_llama_cpp, tiny_gguf, monkeypatch):  # noqa: F811
    path = tiny_gguf[0]
    reason = probe_llama_cpp(path)
    assert reason is not None and "SIGILL" in reason and "illegal instruction" in reason
    monkeypatch.setattr(llamacpp, "_PROBE_CODE", "raise SystemExit(0)")
    assert probe_llama_cpp(path) == reason  # once per file and process: not probed again
    with pytest.raises(LlamaCppUnsafe, match="SIGILL.*engine='numpy'.*GGML_NATIVE=OFF"):
        LlamaCppEngine(path, threads=1)


def test_smollm_falls_back_to_numpy_with_a_warning(crashing_llama_cpp, tiny_gguf, caplog):  # noqa: F811
    path = tiny_gguf[0]
    with caplog.at_level(logging.WARNING, logger="kira.models.lm.smollm"):
        lm = SmolLM(path, threads=1)  # engine="auto"
    assert lm.engine_name == "numpy"
    assert any("SIGILL" in r.getMessage() and "numpy engine" in r.getMessage() for r in caplog.records)
    assert lm.complete("ab", max_new_tokens=2) is not None  # the fallback answers
    with pytest.raises(LlamaCppUnsafe, match="SIGILL"):
        SmolLM(path, engine="llama.cpp", threads=1)  # forced: refused, never crashed


def test_a_status_exit_is_reported_with_its_last_line(tiny_gguf, monkeypatch):  # noqa: F811
    monkeypatch.setattr(llamacpp, "_PROBE_CODE", "import sys\nsys.exit('ggml: out of memory')\n")
    monkeypatch.setattr(llamacpp, "_probed", {})
    assert probe_llama_cpp(tiny_gguf[0]) == "exited with status 1: ggml: out of memory"


def test_a_file_llama_cpp_cannot_load_is_a_load_error_not_a_crash(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    assert probe_llama_cpp(bad) is None  # the child raised cleanly: loading here is safe
    with pytest.raises(ValueError, match="cannot load bad.gguf"):
        LlamaCppEngine(bad)
