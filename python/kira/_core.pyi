# Type stub for the compiled module kira._core. tests/test_core_stub.py checks that every
# name here exists in the module and vice versa.
from __future__ import annotations

import numpy as np
import numpy.typing as npt

class CosineIndex:
    """Base class of FlatIndex and HNSWIndex; not constructible."""

# ---- indexes (cpp/bindings/bind_indexes.cpp) -------------------------------------------

# ---- retrieval (cpp/bindings/bind_retrieval.cpp) ---------------------------------------
