"""`ServeConfig`: everything one `kira serve` process needs, passable to worker processes as JSON."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kira.images import MAX_PIXELS

CONFIG_ENV = "KIRA_SERVE_CONFIG"  # how `kira serve --workers N` hands the config to its worker processes
ROLES = ("all", "reader", "writer")


@dataclass(frozen=True)
class ServeConfig:
    """How the service runs. Every field has a safe default; see docs/serve.md."""

    kb_path: str  # the knowledge base directory
    read_only: bool = False  # refuse POST /documents, DELETE /documents/{id}, POST /commit with 403
    api_key_env: str | None = None  # name of the environment variable holding the bearer key; None: no auth
    max_upload_mb: float = 20.0  # request bodies above this are refused with 413 before they are read
    max_pixels: int = MAX_PIXELS  # decoded images above this many pixels are refused with 413
    query_max_side: int = 2048  # a query image (/ask, /search) is downscaled on decode to at most this many pixels
    # per side (JPEG: decoded at a reduced scale): its vectors are computed at 224 px and its finest crop stays
    # above that, while a 7999 x 7999 PNG no longer flows through the pipeline at full size (0.8 GB per /ask)
    threads: int = 1  # reader threads per process, each with its own read-only view of the knowledge base
    queue_size: int = 16  # requests waiting for a reader thread beyond `threads`; more get 503 + Retry-After
    queue_timeout_s: float = 30.0  # a request that waited longer than this for a thread gets 503 instead of running
    refresh_s: float = 1.0  # an idle reader picks up the writer's commits (and builds their views) this often
    cors_origins: tuple[str, ...] = ()  # origins allowed by CORS; empty: no CORS headers at all
    models: str | None = None  # directory of exported models (kira.models.load); None: the default stack
    model_threads: int | None = 1  # onnxruntime intra-op threads of the default stack, and the process's BLAS threads
    # when the service loads the models; 1: parallelism comes from workers (on 2 cores a single-sentence MiniLM
    # encode took 13 ms wall / 5.5 ms CPU with 1 thread vs 20 / 12 with all; the bridge's product 0.07 vs 12 ms)
    role: str = "all"  # 'all': readers + the writer (unless read_only); 'reader': writes go to writer_uds; 'writer'
    writer_uds: str | None = None  # unix socket of the writer process (role 'reader' with a writable service)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}; got {self.role!r}")
        if self.max_upload_mb <= 0:
            raise ValueError(f"max_upload_mb must be > 0; got {self.max_upload_mb}")
        if self.max_pixels < 1:
            raise ValueError(f"max_pixels must be >= 1; got {self.max_pixels}")
        if self.query_max_side < 224:
            raise ValueError(f"query_max_side must be >= 224 (the encoders' input size); got {self.query_max_side}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1; got {self.threads}")
        if self.model_threads is not None and self.model_threads < 1:
            raise ValueError(f"model_threads must be >= 1 or None (onnxruntime's default); got {self.model_threads}")
        if self.queue_size < 0:
            raise ValueError(f"queue_size must be >= 0; got {self.queue_size}")
        if self.role == "reader" and not self.read_only and not self.writer_uds:
            raise ValueError("a 'reader' process of a writable service needs writer_uds (the writer's socket)")
        from kira.knowledge_base.opening import is_knowledge_base, is_milvus_directory

        if not is_knowledge_base(self.kb_path):
            raise ValueError(f"{self.kb_path} is not a kira knowledge base (no kira.sqlite, no Milvus Lite file); "
                             "build one with `kira ingest`")
        if self.role != "all" and is_milvus_directory(self.kb_path):
            raise ValueError(f"{self.kb_path} is a Milvus Lite knowledge base, which one process opens at a time: "
                             "serve it with --workers 1, or move it to a Milvus server for several workers")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    def api_key(self) -> str | None:
        """The bearer key read from `api_key_env`; ValueError when that variable is unset or empty."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ValueError(f"--api-key-env {self.api_key_env}: that environment variable is unset or empty; "
                             f"export {self.api_key_env}=<a long random key> first")
        return key

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        data: dict[str, Any] = json.loads(text)
        data["cors_origins"] = tuple(data.get("cors_origins") or ())
        return cls(**data)

    def replace(self, **changes: Any) -> ServeConfig:
        return dataclasses.replace(self, **changes)
