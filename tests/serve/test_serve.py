"""kira serve: real uvicorn servers in subprocesses on free loopback ports, real HTTP with httpx.

Two servers over two copies of one knowledge base built from skimage.data photographs:
- `writable`: ``--workers 2`` with a bearer key (two read-only workers, one writer process);
- `reader`: ``--read-only``, one reader thread and no queue, small upload and pixel limits,
  while this test process writes to its knowledge base.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

KEY = "test-key-0123456789"
KEY_ENV = "KIRA_TEST_SERVE_KEY"
PHOTOS = {  # skimage.data name -> (caption, tags, metadata)
    "astronaut": ("an astronaut in a white space suit with a flag", ["person", "space"], {"set": "people"}),
    "coffee": ("a cup of coffee on a saucer", ["drink"], {"set": "objects"}),
    "chelsea": ("a tabby cat lying down", ["animal"], {"set": "animals"}),
    "rocket": ("a rocket on the launch pad", ["space"], {"set": "objects"}),
    "coins": ("old coins on a table", ["money"], {"set": "objects"}),
    "hubble_deep_field": ("galaxies in deep space", ["space"], {"set": "sky"}),
}


def _photo(name: str) -> np.ndarray:
    import skimage.data

    return getattr(skimage.data, name)()


def _png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`kira serve` in a subprocess; `client` talks to it over loopback HTTP."""

    def __init__(self, kb: Path, log: Path, *args: str, key: str | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        if key:
            env[KEY_ENV] = key
        self.log = log
        self._log_file = open(log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kira", "serve", str(kb), "--port", str(self.port), "--log-level", "warning", *args],
            stdout=self._log_file, stderr=subprocess.STDOUT, env=env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=120.0)

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"kira serve exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if self.client.get("/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"kira serve was not ready within {timeout} s:\n{self.log.read_text()}")

    def stop(self) -> int:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._log_file.close()
        return code


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(root, writable KB copy, read-only-served KB copy) built with the default model stack."""
    from kira.knowledge_base import KnowledgeBase

    root = tmp_path_factory.mktemp("serve")
    kb = KnowledgeBase.create(root / "kb")
    for name, (caption, tags, metadata) in PHOTOS.items():
        kb.add_image(_photo(name), doc_id=name, caption=caption, tags=tags, metadata=metadata)
    kb.close()
    shutil.copytree(root / "kb", root / "kb_ro")
    return root, root / "kb", root / "kb_ro"


@pytest.fixture(scope="module")
def servers(built):
    root, kb, kb_ro = built
    writable = Server(kb, root / "writable.log", "--workers", "2", "--api-key-env", KEY_ENV, key=KEY)
    reader = Server(kb_ro, root / "reader.log", "--read-only", "--threads", "1", "--queue-size", "0",
                    "--max-upload-mb", "0.5", "--max-pixels", "300000")
    try:
        writable.wait_ready()
        reader.wait_ready()
        yield writable, reader
    finally:
        codes = (writable.stop(), reader.stop())
    # uvicorn re-raises SIGTERM after its graceful shutdown, so a clean stop exits 0 or -SIGTERM
    assert set(codes) <= {0, -signal.SIGTERM}, (root / "writable.log").read_text() + (root / "reader.log").read_text()


@pytest.fixture(scope="module")
def writable(servers):
    return servers[0]


@pytest.fixture(scope="module")
def reader(servers):
    return servers[1]


def _error(response: httpx.Response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["message"] and body["fix"], body
    assert "Traceback" not in response.text
    if code is not None:
        assert body["code"] == code, body
    return body


# ---- auth -------------------------------------------------------------------------------
def test_health_needs_no_key_and_every_other_route_does(writable):
    anonymous = httpx.Client(base_url=writable.url, timeout=60.0)
    wrong = httpx.Client(base_url=writable.url, timeout=60.0, headers={"Authorization": "Bearer not-the-key"})
    try:
        health = anonymous.get("/health")
        assert health.status_code == 200 and health.json()["generation"] >= 1
        assert health.json()["documents"] == len(PHOTOS)
        requests = [("GET", "/ready", None), ("GET", "/metrics", None), ("GET", "/openapi.json", None),
                    ("GET", "/documents/coffee", None), ("POST", "/search", {"text": "coffee"}),
                    ("POST", "/ask", {"question": "coffee"}), ("POST", "/commit", None),
                    ("DELETE", "/documents/coffee", None)]
        for method, path, body in requests:
            for client in (anonymous, wrong):
                response = client.request(method, path, json=body)
                _error(response, 401, "unauthorized")
                assert response.headers["www-authenticate"] == "Bearer"
        assert writable.client.get("/documents/coffee").status_code == 200  # nothing was deleted
        assert writable.client.get("/openapi.json").json()["paths"]["/ask"]["post"]
    finally:
        anonymous.close()
        wrong.close()


def test_without_a_key_every_route_is_open_on_loopback(reader):
    assert reader.client.get("/ready").status_code == 200
    assert reader.client.get("/metrics").status_code == 200
    assert "loopback only; no authentication" in reader.log.read_text()
    cross = reader.client.get("/health", headers={"Origin": "http://elsewhere.example"})
    assert "access-control-allow-origin" not in cross.headers  # no CORS unless asked


# ---- ask --------------------------------------------------------------------------------
def test_ask_text_returns_answer_claims_evidence_timings_and_card(writable):
    response = writable.client.post("/ask", json={"question": "a cup of coffee", "top_k": 3, "card": "json"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"] and body["evidence"] and len(body["evidence"]) <= 3
    assert body["evidence"][0]["doc_id"] == "coffee"
    numbers = {e["number"] for e in body["evidence"]}
    assert body["claims"] and all(set(c["citations"]) <= numbers for c in body["claims"])
    assert all(c["grounding"] is not None for c in body["claims"])  # 'full' runs the verifier
    assert {"encode", "critic", "verify", "total"} <= set(body["timings"])
    assert body["card"]["variant"] == "full" and body["card"]["question"] == "a cup of coffee"
    html = writable.client.post("/ask", json={"question": "a cup of coffee", "card": "html", "variant": "dual_path"})
    assert html.status_code == 200 and "<html" in html.json()["card"].lower()
    assert "critic" not in html.json()["timings"]  # dual_path runs no critic


def test_ask_reports_confidence_and_abstains_when_nothing_matches(reader):
    # not "coffee": a document's id holds it, so that question names the document and its relevance is not measured
    body = reader.client.post("/ask", json={"question": "a cup on a saucer", "top_k": 3, "variant": "dual_path"}).json()
    assert body["abstained"] is False and 0.5 < body["confidence"] <= 1 and body["generator"] == "template"
    assert body["evidence"][0]["match"] >= 0.5  # what the first item shows matches the question
    none = reader.client.post("/ask", json={"question": "a violin on a stage", "top_k": 3, "card": "json"}).json()
    assert none["abstained"] is True and none["answer"].startswith("Nothing in this knowledge base matches")
    assert all(e["match"] is None or e["match"] < 0.5 for e in none["evidence"]) and none["evidence"][0]["match"] is not None
    assert none["card"]["notice"]["kind"] == "nomatch" and none["card"]["answer"]["abstained"] is True
    bad = reader.client.post("/ask", json={"question": "a cup of coffee", "generator": "gpt"})
    assert bad.status_code == 422


def test_ask_with_the_bundled_language_model(reader, bundled_lm):
    body = reader.client.post("/ask", json={"question": "a cup of coffee", "top_k": 2, "variant": "dual_path",
                                            "generator": "lm"})
    assert body.status_code == 200, body.text
    assert body.json()["generator"].startswith("lm:") and body.json()["answer"]


def test_ask_with_an_uploaded_image_multipart_and_base64(reader):
    png = _png(_photo("chelsea"))  # 451 x 300: under the reader's pixel limit
    upload = reader.client.post("/ask", files={"image": ("../../etc/passwd", png, "image/png")},
                                data={"top_k": "2", "variant": "visual_only"})
    assert upload.status_code == 200, upload.text
    assert upload.json()["evidence"][0]["doc_id"] == "chelsea"
    encoded = reader.client.post("/ask", json={"image_base64": base64.b64encode(png).decode(), "top_k": 2,
                                               "variant": "visual_only", "question": ""})
    assert encoded.status_code == 200 and encoded.json()["evidence"][0]["doc_id"] == "chelsea"
    assert encoded.json()["question"] is None
    # the query image is chelsea itself: chelsea is the subject, and what other photos state is apart
    full = reader.client.post("/ask", files={"image": ("cat.png", png, "image/png")},
                              data={"question": "is there a dog?", "top_k": "4", "variant": "dual_path"}).json()
    assert {e["doc_id"] for e in full["evidence"]} == {"chelsea"}, full["answer"]
    # nothing recorded about chelsea says dog: the answer says so, then what chelsea shows
    assert full["answer"].startswith("Nothing recorded about chelsea matches 'dog'. A tabby cat lying down"), \
        full["answer"]
    similar = {e["number"] for e in full["similar"]}
    assert similar and all(e["doc_id"] != "chelsea" for e in full["similar"])
    assert full["similar_claims"] and all(set(c["citations"]) <= similar for c in full["similar_claims"])
    assert all(set(c["citations"]) <= {e["number"] for e in full["evidence"]} for c in full["claims"])


# ---- search -----------------------------------------------------------------------------
def test_search_by_text_image_and_raw_vector(built, reader):
    text = reader.client.post("/search", json={"text": "a rocket on the launch pad", "top_k": 5})
    assert text.status_code == 200, text.text
    hits = text.json()["results"]
    assert hits[0]["doc_id"] == "rocket" and any("text" in h["paths"] for h in hits if h["doc_id"] == "rocket")
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    server_ms = float(text.headers["server-timing"].partition("dur=")[2])  # the server's own time, for clients
    timings = text.json()["timings"]
    assert server_ms >= timings["total"] == pytest.approx(sum(v for k, v in timings.items() if k != "total"), abs=0.05)
    image = reader.client.post("/search", files={"image": ("x.png", _png(_photo("coins")), "image/png")},
                               data={"top_k": "3", "levels": "document"})
    assert image.status_code == 200, image.text
    assert image.json()["results"][0]["doc_id"] == "coins"
    assert {h["level"] for h in image.json()["results"]} == {"document"}

    from kira.knowledge_base import KnowledgeBase

    kb = KnowledgeBase.open(built[2], read_only=True)
    try:
        raw = np.asarray(kb.models.image.encode([_photo("astronaut")]), dtype=np.float32)
        vector = kb.visual_query(raw)[0]
        text_vector = np.asarray(kb.models.text.encode(["old coins on a table"]), dtype=np.float32)[0]
    finally:
        kb.close()
    by_vector = reader.client.post("/search", json={"vector": vector.tolist(), "top_k": 1})
    top = by_vector.json()["results"][0]
    assert top["doc_id"] == "astronaut" and top["level"] == "document" and top["score"] > 0.99
    in_text = reader.client.post("/search", json={"vector": text_vector.tolist(), "space": "text", "top_k": 1,
                                                  "variant": "dual_path"})  # the full variant adds feedback and hops
    assert in_text.json()["results"][0]["doc_id"] == "coins" and in_text.json()["results"][0]["paths"] == ["text"]


def test_search_metadata_filters_and_levels(reader):
    response = reader.client.post("/search", json={"text": "space", "top_k": 50, "filters": {"tags": ["space"]}})
    assert {h["doc_id"] for h in response.json()["results"]} == {"astronaut", "rocket", "hubble_deep_field"}
    response = reader.client.post("/search", json={"text": "a cup", "top_k": 50, "levels": ["region", "patch"],
                                                   "filters": {"metadata": {"set": "objects"}}})
    hits = response.json()["results"]
    assert hits and {h["doc_id"] for h in hits} <= {"coffee", "rocket", "coins"}
    assert {h["level"] for h in hits} <= {"region", "patch"} and all(h["box"] for h in hits)
    none = reader.client.post("/search", json={"text": "a cup", "filters": {"doc_ids": ["no-such-doc"]}})
    assert none.status_code == 200 and none.json()["results"] == []


def test_search_per_document_spends_top_k_on_distinct_images(reader):
    body = {"text": "a cup of coffee", "top_k": 6, "levels": ["document", "region", "patch"]}
    every = reader.client.post("/search", json=body).json()["results"]
    docs = [h["doc_id"] for h in every]
    assert len(set(docs)) < len(docs)  # without it an image and its own regions share the top k
    one = reader.client.post("/search", json={**body, "per_document": 1}).json()["results"]
    assert len(one) == 6 and len({h["doc_id"] for h in one}) == 6
    assert one[0]["doc_id"] == every[0]["doc_id"]
    _error(reader.client.post("/search", json={**body, "per_document": 0}), 422, None)


# ---- documents --------------------------------------------------------------------------
def test_get_document_lists_its_chunks(reader):
    body = reader.client.get("/documents/coffee").json()
    assert body["caption"] == PHOTOS["coffee"][0] and body["tags"] == ["drink"] and body["metadata"] == {"set": "objects"}
    assert (body["width"], body["height"]) == _photo("coffee").shape[1::-1]
    levels = [c["level"] for c in body["chunks"]]
    assert levels.count("document") == 1 and "patch" in levels
    assert all(c["box"] for c in body["chunks"] if c["level"] != "document")
    _error(reader.client.get("/documents/nope"), 404, "unknown_document")


def test_writes_go_to_the_one_writer_and_every_worker_sees_the_commit(built, writable):
    root, kb, _ = built
    before = set(os.listdir(kb))
    png = _png(_photo("camera"))
    added = writable.client.post("/documents", files={"image": ("../../evil.png", png, "image/png")},
                                 data={"doc_id": "camera", "caption": "a man with a camera", "tags": "person,camera",
                                       "metadata": json.dumps({"set": "people"}), "sequence": "shoot"})
    assert added.status_code == 201, added.text
    assert added.json() == {"doc_id": "camera", "committed": False, "generation": None}
    _error(writable.client.post("/documents", files={"image": ("a.png", png, "image/png")}, data={"doc_id": "camera"}),
           409, "duplicate_document")
    assert writable.client.get("/documents/camera").status_code == 404  # readers see commits only
    generation = writable.client.post("/commit").json()["generation"]
    pids = set()
    for _ in range(8):  # requests land on either worker; each must see the commit
        got = writable.client.get("/documents/camera")
        assert got.status_code == 200 and got.json()["tags"] == ["camera", "person"]
        health = writable.client.get("/health").json()
        assert health["generation"] >= generation
        pids.add(health["pid"])
    hit = writable.client.post("/search", json={"text": "a man with a camera", "top_k": 1}).json()["results"][0]
    assert hit["doc_id"] == "camera"
    encoded = writable.client.post("/documents?commit=true", json={"image_base64": base64.b64encode(png).decode(),
                                                                   "doc_id": "camera-2", "view": "shoot-views"})
    assert encoded.status_code == 201 and encoded.json()["committed"] and encoded.json()["generation"] > generation
    assert writable.client.delete("/documents/camera?commit=true").json()["committed"] is True
    assert writable.client.get("/documents/camera").status_code == 404
    _error(writable.client.delete("/documents/camera"), 404, "unknown_document")
    assert not any("evil" in name for name in set(os.listdir(kb)) - before)
    assert not list(root.rglob("*evil*"))


def test_read_only_server_refuses_writes_with_403(reader):
    png = _png(_photo("camera")[::2, ::2])
    for response in (reader.client.post("/documents", files={"image": ("a.png", png, "image/png")}),
                     reader.client.delete("/documents/coffee"), reader.client.post("/commit")):
        _error(response, 403, "read_only")
    assert reader.client.get("/documents/coffee").status_code == 200


def test_a_reader_sees_what_another_process_commits(built, models_free_writer):
    _, _, kb_ro = built
    reader, writer = models_free_writer
    assert reader.client.get("/documents/moon").status_code == 404
    writer.add_image(_photo("moon"), doc_id="moon", caption="the surface of the moon", tags=["space"])
    writer.commit()
    got = reader.client.get("/documents/moon")  # the request itself refreshes the reader
    assert got.status_code == 200 and got.json()["caption"] == "the surface of the moon"
    hit = reader.client.post("/search", json={"text": "the surface of the moon", "top_k": 1}).json()["results"][0]
    assert hit["doc_id"] == "moon"
    writer.remove("moon")
    writer.commit()
    deadline = time.monotonic() + 10  # an idle reader refreshes on its own too
    while reader.client.get("/health").json()["documents"] != len(PHOTOS) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert reader.client.get("/health").json()["documents"] == len(PHOTOS)


@pytest.fixture(scope="module")
def models_free_writer(built, reader):
    """This process as the writer of the read-only server's knowledge base."""
    from kira.knowledge_base import KnowledgeBase

    kb = KnowledgeBase.open(built[2])
    yield reader, kb
    kb.close()


# ---- bad requests -----------------------------------------------------------------------
def test_each_bad_request_gets_a_4xx_naming_the_fix_and_the_worker_stays_up(reader):
    c = reader.client
    pid = c.get("/health").json()["pid"]
    small = _png(_photo("coins")[:64, :64])
    cases = [
        (c.post("/ask", files={"image": ("x.png", b"\x89PNG not really", "image/png")}), 422, "bad_image"),
        (c.post("/ask", files={"image": ("x.png", small[: len(small) // 2], "image/png")}), 422, "bad_image"),
        (c.post("/ask", files={"image": ("big.png", _png(np.zeros((700, 500, 3), np.uint8)), "image/png")}),
         413, "image_too_large"),
        (c.post("/ask", files={"image": ("huge.bin", bytes(600_000), "image/png")}), 413, "upload_too_large"),
        (c.post("/ask", json={"image_base64": "A" * 800_000}), 413, "upload_too_large"),
        (c.post("/ask", json={"image_base64": "not base64!"}), 422, "bad_base64"),
        (c.post("/ask", json={"question": "coffee", "variant": "nonsense"}), 422, "unknown_variant"),
        (c.post("/ask", json={"question": "   "}), 422, "empty_query"),
        (c.post("/ask", json={}), 422, "empty_query"),
        (c.post("/ask", json={"question": "coffee", "top_k": 0}), 422, "invalid_request"),
        (c.post("/ask", json={"question": "coffee", "levels": ["pixel"]}), 422, "unknown_level"),
        (c.post("/ask", json={"question": "coffee", "colour": "red"}), 422, "invalid_request"),
        (c.post("/ask", content=b"{not json", headers={"content-type": "application/json"}), 422, "bad_json"),
        (c.post("/ask", content=b"question=x", headers={"content-type": "text/plain"}), 415, "unsupported_media_type"),
        (c.post("/search", json={"vector": [0.5, 0.5, 0.5]}), 422, "bad_vector"),
        (c.post("/search", content=b'{"vector": [NaN, 1.0, 2.0]}', headers={"content-type": "application/json"}),
         422, "bad_json"),  # JSON has no NaN (issue 34.7: refused at parse, wherever it is)
        (c.post("/search", json={"text": ""}), 422, "empty_query"),
        (c.get("/documents/no-such-document"), 404, "unknown_document"),
        (c.get("/no-such-route"), 404, None),
        (c.put("/ask"), 405, None),
    ]
    for response, status, code in cases:
        _error(response, status, code)
    after = c.get("/health").json()
    assert after["pid"] == pid and after["status"] == "ok"
    assert c.post("/ask", json={"question": "a cup of coffee", "variant": "dual_path"}).status_code == 200
    assert "Traceback" not in reader.log.read_text()


def test_over_capacity_requests_get_503_with_retry_after(reader):
    # the reader server admits 1 request at a time (--threads 1 --queue-size 0)
    responses: list[httpx.Response] = []
    barrier = threading.Barrier(6)

    def ask() -> None:
        with httpx.Client(base_url=reader.url, timeout=120.0) as client:
            barrier.wait()
            responses.append(client.post("/ask", json={"question": "galaxies in deep space", "card": "html"}))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {200, 503} and 200 in statuses and 503 in statuses, statuses
    refused = [r for r in responses if r.status_code == 503]
    assert all(int(r.headers["retry-after"]) >= 1 and r.json()["error"]["code"] == "overloaded" for r in refused)
    assert reader.client.get("/health").status_code == 200


def test_metrics_count_requests_per_route_and_time_each_stage(reader, writable):
    reader.client.post("/ask", json={"question": "a tabby cat", "variant": "full"})
    text = reader.client.get("/metrics").text
    assert 'kira_http_requests_total{method="POST",route="/ask",status="200"}' in text
    assert 'route="/documents/{doc_id}"' in text  # the template, not each raw path
    assert 'kira_http_requests_total{method="POST",route="/ask",status="503"}' in text
    for stage in ("encode", "critic", "generate", "verify"):
        assert f'kira_stage_duration_seconds_bucket{{le="+Inf",route="/ask",stage="{stage}"}}' in text
    assert 'kira_stage_duration_seconds_count{route="/search",stage="visual_search"}' in text
    # two workers: the scrape sums both processes (multiprocess mode)
    summed = writable.client.get("/metrics").text
    assert "kira_http_requests_total" in summed and 'route="/commit"' in summed


def test_shutdown_drains_the_request_in_flight(reader):
    result: list[httpx.Response] = []

    def ask() -> None:
        with httpx.Client(base_url=reader.url, timeout=120.0) as client:
            result.append(client.post("/ask", json={"question": "old coins on a table", "card": "html"}))

    t = threading.Thread(target=ask)
    t.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and t.is_alive():  # until the ask is in flight (this scrape is the other one)
        in_flight = [line for line in reader.client.get("/metrics").text.splitlines()
                     if line.startswith("kira_requests_in_flight ")]
        if in_flight and float(in_flight[0].split()[1]) >= 2:
            break
        time.sleep(0.01)
    reader.proc.send_signal(signal.SIGTERM)
    t.join()
    assert result and result[0].status_code == 200, result
    assert reader.proc.wait(timeout=60) in (0, -signal.SIGTERM)
    assert "Traceback" not in reader.log.read_text()


# ---- embedding and the command ----------------------------------------------------------
def test_create_app_embeds_in_process_and_refuses_bad_options(built, tmp_path):
    from fastapi.testclient import TestClient

    from kira.serve import create_app

    _, _, kb_ro = built
    with pytest.raises(ValueError, match="not a kira knowledge base"):
        create_app(tmp_path)
    with pytest.raises(ValueError, match="unknown option"):
        create_app(kb_ro, colour="red")
    with pytest.raises(ValueError, match="unset or empty"):
        create_app(kb_ro, api_key_env="KIRA_TEST_NO_SUCH_VARIABLE")
    with TestClient(create_app(kb_ro, read_only=True, cors_origins=["http://app.example"])) as client:
        assert client.get("/ready").json()["ready"] is True
        cors = client.get("/health", headers={"Origin": "http://app.example"})
        assert cors.headers["access-control-allow-origin"] == "http://app.example"
        hit = client.post("/search", json={"text": "a tabby cat lying down", "top_k": 1}).json()["results"][0]
        assert hit["doc_id"] == "chelsea"
    # mounted inside a user's app, whose lifespan does not run the sub-app's: it starts on first use
    from fastapi import FastAPI

    outer = FastAPI()
    outer.mount("/kira", create_app(kb_ro, read_only=True))
    with TestClient(outer) as client:
        assert client.get("/kira/ready").status_code == 503  # nothing opened yet
        hit = client.post("/kira/search", json={"text": "old coins on a table", "top_k": 1}).json()["results"][0]
        assert hit["doc_id"] == "coins"
        assert client.get("/kira/ready").json()["ready"] is True
        app = outer.routes[-1].app
    app.state.service.stop()


def test_serve_command_refuses_bad_options_with_the_fix(built, capsys):
    from kira.cli import main

    _, kb, _ = built
    assert main(["serve", str(kb.parent / "missing")]) == 2
    assert "not a kira knowledge base" in capsys.readouterr().err
    assert main(["serve", str(kb), "--api-key-env", "KIRA_TEST_NO_SUCH_VARIABLE"]) == 2
    assert "export KIRA_TEST_NO_SUCH_VARIABLE=" in capsys.readouterr().err
    assert main(["serve", str(kb), "--workers", "0"]) == 2

