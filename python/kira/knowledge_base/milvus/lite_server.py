"""Milvus Lite as its own process: one local data directory served on 127.0.0.1 to several processes.

A ``.db`` uri runs Milvus Lite inside the process that opens it, and only that process may use the
file. `serve_lite` starts ``python -m milvus_lite server`` on a free local port instead, so any number
of kira processes (a `kira serve`, `kira ingest`, a benchmark measuring kira's own memory) reach the
same knowledge base through its http uri, as they would a Milvus server.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path


def serve_lite(data_dir: str | Path, *, wait: float = 60.0, workers: int = 2) -> tuple[subprocess.Popen[bytes], str]:
    """Start Milvus Lite serving `data_dir` on a free 127.0.0.1 port; (the process, its http uri) once it accepts
    connections. The caller stops the process (``terminate``). RuntimeError where it does not start within `wait`
    seconds (the process is killed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data_dir),
                             "--host", "127.0.0.1", "--port", str(port), "--max-workers", str(int(workers))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + wait
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"the Milvus Lite server for {data_dir} did not start on port {port}") from None
            time.sleep(0.2)


__all__ = ["serve_lite"]
