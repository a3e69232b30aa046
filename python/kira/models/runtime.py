"""onnxruntime sessions: CUDA when it is really there, CPU otherwise, and say which."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnnxSession:
    """An onnxruntime InferenceSession and the execution provider it actually got."""

    session: Any  # onnxruntime.InferenceSession
    provider: str  # e.g. "CUDAExecutionProvider" or "CPUExecutionProvider"
    path: Path

    def run(self, feeds: dict[str, Any], outputs: list[str] | None = None) -> list[Any]:
        return self.session.run(outputs, feeds)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.session.get_inputs()]

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.session.get_outputs()]


def open_session(path: str | os.PathLike, *, prefer_cuda: bool = True, threads: int | None = None) -> OnnxSession:
    """Open an ONNX file, asking for CUDA first when onnxruntime offers it.

    The provider reported is the first of `session.get_providers()`, i.e. what the
    session really runs on, not what was asked for. Raises FileNotFoundError naming a
    missing file.
    """
    import onnxruntime as ort

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"ONNX model file not found: {path}")
    available = ort.get_available_providers()
    wanted = ["CPUExecutionProvider"]
    if prefer_cuda and "CUDAExecutionProvider" in available:
        wanted.insert(0, "CUDAExecutionProvider")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    if os.environ.get("KIRA_ORT_SPIN", "0") != "1":
        # idle intra-op threads sleep instead of spinning: kira's sessions run one small call at a
        # time between numpy work, where spinning threads only steal the cores that work needs
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(path), sess_options=options, providers=wanted)
    provider = session.get_providers()[0]
    if wanted[0] != provider:
        logger.warning("asked onnxruntime for %s for %s, got %s", wanted[0], path.name, provider)
    return OnnxSession(session=session, provider=provider, path=path)
