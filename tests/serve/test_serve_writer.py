"""`kira serve --workers 2`: a writer process killed with SIGKILL is noticed and started again (issue 34.3)."""

from __future__ import annotations

import base64
import io
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def _png(name: str) -> str:
    import skimage.data
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(getattr(skimage.data, name)()).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _poll(fn, what: str, timeout: float = 240.0):
    """fn() until it returns something truthy; fails naming `what` (a guard against hanging, not a timing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = fn()
        except httpx.TransportError:
            value = None
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"never: {what}")


def test_a_killed_writer_process_is_restarted_and_writes_resume(tmp_path):
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    kb_path = tmp_path / "kb"
    kb = KnowledgeBase.create(kb_path, models=load_default(image_encoder="pixel", threads=1))
    import skimage.data

    kb.add_image(skimage.data.coffee(), doc_id="coffee")
    kb.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "kira", "serve", str(kb_path), "--port", str(port), "--workers", "2",
                             "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60.0)
    try:
        _poll(lambda: proc.poll() is None and client.get("/ready").status_code == 200, "ready")
        first = client.get("/health").json()["writer_pid"]
        assert isinstance(first, int) and first != proc.pid
        os.kill(first, signal.SIGKILL)
        # noticed: /ready turns 503 while no writer answers, or a new writer already answers
        restarted = _poll(lambda: (pid := client.get("/health").json()["writer_pid"]) not in (None, first) and pid,
                          "a new writer process")
        assert restarted != first
        _poll(lambda: client.get("/ready").status_code == 200, "ready again")
        added = client.post("/documents?commit=true", json={"image_base64": _png("chelsea"), "doc_id": "chelsea"})
        assert added.status_code == 201, added.text
        _poll(lambda: client.get("/documents/chelsea").status_code == 200, "the new document visible")
        assert client.get("/documents/coffee").status_code == 200  # what was committed before is kept
    finally:
        client.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    text = (tmp_path / "serve.log").read_text()
    assert "died" in text and "starting a new one" in text, text
