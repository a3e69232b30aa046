"""benchmarks/peers/gpu_check.py in its --tiny --cpu mode: the script runs and prints its table."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

pytestmark = pytest.mark.models
pytest.importorskip("torch", reason="torch is not installed: pip install 'kira[export]' (the CPU build: --index-url https://download.pytorch.org/whl/cpu)")

# found as a module (the repository root is on sys.path under pytest), so the test reads the same wherever it sits
SCRIPT = importlib.util.find_spec("benchmarks.peers.gpu_check").origin


def test_gpu_check_tiny_cpu_prints_a_markdown_table():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", "--cpu", "--seconds", "0.02", "--new-tokens", "4", "--batches", "1", "2",
         "--threads", "1"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("onnxruntime ") and "CPUExecutionProvider" in lines[0]
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| model | batch | engine | precision | throughput | vs torch eager |"
    rows = table[2:]
    assert len(rows) == 2 * 2 * 2 + 2  # 2 towers x 2 batches x (torch, onnxruntime) + the decoder pair
    assert sum("onnxruntime CPU" in r for r in rows) == 5
    for r in rows:
        rate = r.split("|")[5].strip().split()[0].replace(",", "")
        assert float(rate) > 0
