"""Every kernel set (avx512, avx2, scalar) gives the same answers: each is forced in a
subprocess with KIRA_SIMD and compared with numpy, on dims that exercise the tails."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from kira import _core

SCRIPT = r"""
import sys
import numpy as np
from kira import _core
out = {"level": np.array(_core.simd_level())}
rng = np.random.default_rng(3)
for d in (1, 7, 37, 64, 100, 131):
    x = rng.standard_normal((300, d)).astype(np.float32)
    q = rng.standard_normal((9, d)).astype(np.float32)
    for dtype in ("f32", "f16", "i8"):
        index = _core.FlatIndex(d, dtype=dtype)
        index.add(np.arange(300), x)
        ids, scores = index.search(q, 300)  # every score, in order
        order = np.argsort(ids, axis=1)
        out[f"{dtype}-{d}"] = np.take_along_axis(scores, order, 1)
np.savez(sys.argv[1], **out)
"""

LEVELS = {"avx512": ["avx512", "avx2", "scalar"], "avx2": ["avx2", "scalar"], "scalar": ["scalar"]}
TOL = {"f32": 2e-6, "f16": 2e-3, "i8": 3e-2}  # against float64 numpy on unit vectors


@pytest.mark.parametrize("level", ["avx512", "avx2", "scalar"])
def test_kernel_set_matches_numpy(tmp_path, level):
    if level not in LEVELS[_core.simd_level()]:
        pytest.skip(f"this CPU has no {level}")
    out = tmp_path / "scores.npz"
    env = dict(os.environ, KIRA_SIMD=level)
    subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, check=True, timeout=120)
    got = np.load(out)
    assert str(got["level"]) == level
    rng = np.random.default_rng(3)
    for d in (1, 7, 37, 64, 100, 131):
        x = rng.standard_normal((300, d))
        q = rng.standard_normal((9, d))
        ref = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (x / np.linalg.norm(x, axis=1, keepdims=True)).T
        for dtype in ("f32", "f16", "i8"):
            err = np.abs(got[f"{dtype}-{d}"] - ref).max()
            assert err <= TOL[dtype], (level, dtype, d, err)
