"""Root pytest configuration shared by tests/ and benchmarks/.

BLAS thread pools are pinned to one thread before numpy is imported: on a small shared
machine a multithreaded OpenBLAS turns a 384x384 solve from 0.04 s into over a second,
and kira's own parallelism (the C++ core's thread pool) is what the tests exercise.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
