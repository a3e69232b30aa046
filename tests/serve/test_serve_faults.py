"""kira serve under the faults of issue 34: each test failed before its fix.

In-process (FastAPI's TestClient) over one knowledge base of skimage.data photographs built
with the pixel image encoder (fast, and not the default stack: the service must load it).
"""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest

pytest.importorskip("fastapi")

from test_serve import _photo, _png  # noqa: E402 - the service tests' real photos and PNG bytes

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "coins")


def _b64(pixels: np.ndarray) -> str:
    return base64.b64encode(_png(pixels)).decode()


@pytest.fixture(scope="module")
def pixel_kb(tmp_path_factory):
    """A knowledge base built with load_default(image_encoder='pixel')."""
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    path = tmp_path_factory.mktemp("faults") / "kb"
    kb = KnowledgeBase.create(path, models=load_default(image_encoder="pixel", threads=1))
    for name in PHOTOS:
        kb.add_image(_photo(name), doc_id=name, caption=f"the {name} photograph", metadata={"name": name})
    kb.close()
    return path


@pytest.fixture(scope="module")
def client(pixel_kb):
    """A writable in-process service over a copy of `pixel_kb`, models loaded as the service loads them."""
    import shutil

    from fastapi.testclient import TestClient

    from kira.serve import create_app

    served = pixel_kb.parent / "served"
    shutil.copytree(pixel_kb, served)
    with TestClient(create_app(served, model_threads=1)) as test_client:
        yield test_client


def _error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code, body
    assert body["message"] and body["fix"]
    return body


# ---- 1: the image encoder the knowledge base records ------------------------------------
def test_the_service_loads_the_image_encoder_the_knowledge_base_records(client):
    found = client.post("/search", json={"image_base64": _b64(_photo("coffee")), "top_k": 1})
    assert found.status_code == 200, found.text  # was 422 "queries must have 697 columns, got 1977"
    assert found.json()["results"][0]["doc_id"] == "coffee"
    added = client.post("/documents?commit=true", json={"image_base64": _b64(_photo("camera")), "doc_id": "camera"})
    assert added.status_code == 201, added.text


def test_another_image_encoder_is_refused_at_open_naming_the_one_to_load(pixel_kb):
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default
    from kira.serve import create_app

    fused = load_default(image_encoder="fused", threads=1)
    with pytest.raises(ValueError, match="image_encoder='pixel'"):
        KnowledgeBase.open(pixel_kb, models=fused, read_only=True)
    with pytest.raises(ValueError, match="image_encoder='pixel'"):
        KnowledgeBase.open(pixel_kb, models=fused)  # the writer lock is released on the refusal
    KnowledgeBase.open(pixel_kb, models=load_default(image_encoder="pixel", threads=1), read_only=True).close()
    from fastapi.testclient import TestClient

    with pytest.raises(ValueError, match="image_encoder='pixel'"):
        with TestClient(create_app(pixel_kb, models=fused, read_only=True)):
            pass


def test_an_encoder_the_default_stack_lacks_is_refused_with_the_fix(tmp_path, monkeypatch):
    from kira.serve import readers

    monkeypatch.setattr(readers, "recorded_models", lambda path: {"image": "someones-vit-l14/1024"})
    with pytest.raises(ValueError, match="someones-vit-l14.*--models DIR"):
        readers.load_models(None, 1, str(tmp_path))
    monkeypatch.setattr(readers, "recorded_models",
                        lambda path: {"image": "kira-pixel-cbir-v2/697", "text": "someones-e5-large/1024"})
    with pytest.raises(ValueError, match="text encoder someones-e5-large/1024.*--models DIR"):
        readers.load_models(None, 1, str(tmp_path))


# ---- 2: question length and the queue's 30 s promise --------------------------------------
def test_a_question_over_the_limit_is_refused_naming_it_in_the_library_and_the_service(client, pixel_kb):
    from kira.knowledge_base import KnowledgeBase
    from kira.knowledge_base.inputs import MAX_QUESTION_CHARS
    from kira.pipeline import Kira

    long = "what is on the table " * (MAX_QUESTION_CHARS // 10)
    for route, field in (("/ask", "question"), ("/search", "question"), ("/search", "text")):
        body = _error(client.post(route, json={field: long}), 422, "question_too_long")
        assert f"{MAX_QUESTION_CHARS:,}" in body["message"]
    kb = KnowledgeBase.open(pixel_kb, read_only=True)
    try:
        kira = Kira(kb)
        with pytest.raises(ValueError, match=f"over the limit of {MAX_QUESTION_CHARS:,}"):
            kira.ask(long)
        with pytest.raises(ValueError, match=f"over the limit of {MAX_QUESTION_CHARS:,}"):
            kira.retrieve(long)
        assert kira.retrieve("x" * MAX_QUESTION_CHARS, top_k=1).hits  # at the limit: answered
    finally:
        kb.close()


def test_a_request_queued_past_the_timeout_is_refused_then_not_after_the_long_one():
    import asyncio
    import threading

    from kira.serve.pool import Overloaded, ThreadPool

    release, started = threading.Event(), threading.Event()
    ran: list[str] = []

    def long_job(state: object) -> str:
        started.set()
        release.wait(60)  # holds the only thread until the test lets it go
        ran.append("long")
        return "long"

    async def scenario() -> None:
        pool = ThreadPool("t", 1, 4, open=object, queue_timeout_s=1.0)
        pool.start()
        try:
            first = asyncio.ensure_future(pool.submit(long_job))
            assert await asyncio.to_thread(started.wait, 60)
            with pytest.raises(Overloaded, match="waited"):
                # refused while the long job still runs (before: after it ended, however long that was)
                await asyncio.wait_for(pool.submit(lambda state: ran.append("small")), 30)
            assert not release.is_set() and ran == []
            release.set()
            assert await first == "long"
        finally:
            release.set()
            await asyncio.to_thread(pool.stop)
        assert ran == ["long"]  # the refused job never ran

    asyncio.run(scenario())


# ---- 6 and 16: ids with '/', the thumbnail route, question on /search, the schema -------------
def test_ids_with_a_slash_are_written_read_shown_and_removed(client):
    added = client.post("/documents?commit=true", json={"image_base64": _b64(_photo("moon")), "doc_id": "sky/moon"})
    assert added.status_code == 201, added.text
    got = client.get("/documents/sky/moon")
    assert got.status_code == 200, got.text  # was 404 "route not found"
    assert got.json()["doc_id"] == "sky/moon"
    thumb = client.get("/thumbnails/sky/moon")
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/png"
    from PIL import Image

    with Image.open(io.BytesIO(thumb.content)) as im:
        assert max(im.size) <= 512 and im.size[0] > 0
    assert client.delete("/documents/sky/moon?commit=true").status_code == 200
    _error(client.get("/documents/sky/moon"), 404, "unknown_document")
    _error(client.get("/thumbnails/sky/moon"), 404, "unknown_document")


def test_search_takes_question_like_ask_and_text_as_its_alias(client):
    by_question = client.post("/search", json={"question": "the coins photograph", "top_k": 3}).json()["results"]
    by_text = client.post("/search", json={"text": "the coins photograph", "top_k": 3}).json()["results"]
    assert [h["chunk_id"] for h in by_question] == [h["chunk_id"] for h in by_text]
    assert by_question
    _error(client.post("/search", json={"question": "a", "text": "b"}), 422, "two_questions")


def test_variant_is_an_enum_in_the_schema_and_card_text_is_served(client):
    from kira.pipeline import VARIANTS

    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model in ("AskRequest", "SearchRequest"):
        assert schemas[model]["properties"]["variant"]["enum"] == list(VARIANTS)
    assert "text" in schemas["AskRequest"]["properties"]["card"]["enum"]
    _error(client.post("/ask", json={"question": "a cat", "variant": "fast"}), 422, "unknown_variant")
    answer = client.post("/ask", json={"question": "the chelsea photograph", "card": "text", "top_k": 2})
    assert answer.status_code == 200, answer.text
    card = answer.json()["card"]
    assert isinstance(card, str) and "the chelsea photograph" in card and "<html" not in card.lower()


# ---- 7, 8, 11: metadata, nesting and ids at write ---------------------------------------------
def test_nan_and_infinity_are_refused_at_write_and_every_document_stays_readable(client):
    for literal in ("NaN", "Infinity", "-Infinity", "1e999"):
        raw = '{"image_base64": "%s", "doc_id": "bad", "metadata": {"x": %s}}' % (_b64(_photo("coins")), literal)
        body = _error(client.post("/documents", content=raw, headers={"content-type": "application/json"}),
                      422, "bad_json")
        assert "NaN" in body["message"] or "too large" in body["message"]
    form = client.post("/documents", files={"image": ("x.png", _png(_photo("coins")), "image/png")},
                       data={"doc_id": "bad", "metadata": '{"x": NaN}'})
    _error(form, 422, "bad_json")
    _error(client.get("/documents/bad"), 404, "unknown_document")


def test_deep_nesting_gets_422_with_the_limit_not_500(client):
    deep = "[" * 5000 + "]" * 5000
    raw = '{"question": "a cat", "levels": %s}' % deep
    body = _error(client.post("/ask", content=raw, headers={"content-type": "application/json"}), 422, "too_deep")
    assert "32" in body["message"]
    nested: object = "leaf"
    for _ in range(20):
        nested = {"k": nested}
    added = client.post("/documents", json={"image_base64": _b64(_photo("coins")), "doc_id": "deep",
                                            "metadata": {"a": nested}})
    assert "16" in _error(added, 422, "bad_metadata")["message"]
    form = client.post("/documents", files={"image": ("x.png", _png(_photo("coins")), "image/png")},
                       data={"doc_id": "deep", "metadata": '{"a": ' + "[" * 3000 + "]" * 3000 + "}"})
    _error(form, 422, "too_deep")


@pytest.mark.parametrize("doc_id", ["evil\u202egnp.exe", "line\nbreak", "zero\u200bwidth", "bell\x07"])
def test_ids_with_control_or_invisible_characters_are_refused(client, doc_id):
    body = _error(client.post("/documents", json={"image_base64": _b64(_photo("coins")), "doc_id": doc_id}),
                  422, "bad_doc_id")
    assert f"U+{ord(re.findall(r'[^a-z.]', doc_id)[0]):04X}" in body["message"]


def test_the_library_refuses_bad_ids_and_metadata_and_converts_numpy_numbers_visibly(tmp_path):
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    kb = KnowledgeBase.create(tmp_path / "kb", models=load_default(image_encoder="pixel", threads=1))
    try:
        coins = _photo("coins")
        with pytest.raises(ValueError, match="U\\+202E"):
            kb.add_image(coins, doc_id="a\u202eb")
        with pytest.raises(ValueError, match="nan"):
            kb.add_image(coins, doc_id="n", metadata={"depth": float("nan")})
        with pytest.raises(TypeError, match="set.*sorted list"):
            kb.add_image(coins, doc_id="s", metadata={"tags": {"a", "b"}})
        with pytest.raises(TypeError, match="ndarray.*tolist"):
            kb.add_image(coins, doc_id="s", metadata={"v": np.zeros(3)})
        assert len(kb) == 0  # nothing stored on a refusal
        kb.add_image(coins, doc_id="np", metadata={"p": np.float32(0.5), "n": np.int64(7), "ok": np.bool_(True)})
        kb.commit()
        stored = kb.documents(["np"])["np"].metadata
        assert stored == {"p": 0.5, "n": 7, "ok": True}
        assert [type(stored[k]) for k in ("p", "n", "ok")] == [float, int, bool]  # numbers, not "0.5"
        kb.add_image(coins, doc_id="folder/coins")  # '/' is allowed: folder ingest makes such ids
    finally:
        kb.close()


# ---- 10: a tiny file of a huge image ------------------------------------------------------
def test_a_query_image_is_downscaled_on_decode_and_over_the_pixel_limit_is_413(client):
    from kira.serve.errors import ApiError
    from kira.serve.images import decode_image

    big = np.repeat(np.repeat(_photo("coffee"), 8, axis=0), 8, axis=1)  # 3200 x 4800, a real photo enlarged
    pixels = decode_image(_png(big), "image", 64_000_000, max_side=2048)
    assert max(pixels.shape[:2]) == 2048 and pixels.shape[2] == 3
    assert decode_image(_png(big), "image", 64_000_000).shape == big.shape  # documents keep their size
    with pytest.raises(ApiError) as err:
        decode_image(_png(big), "image", 1_000_000)
    assert err.value.status == 413
    found = client.post("/search", json={"image_base64": base64.b64encode(_png(big)).decode(), "top_k": 1})
    assert found.status_code == 200 and found.json()["results"][0]["doc_id"] == "coffee"


BOMB_PROBE = """
import resource, sys
from kira.serve.images import decode_image
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
pixels = decode_image(data, "image", 64_000_000, max_side=2048)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(pixels.shape[0], pixels.shape[1], (after - before) // 1024)
"""


def test_a_62_kb_png_of_7999_squared_is_decoded_within_a_memory_budget(tmp_path):
    import subprocess
    import sys

    from PIL import Image

    bomb = tmp_path / "bomb.png"
    Image.new("RGB", (7999, 7999), (200, 180, 160)).save(bomb, optimize=True)
    assert bomb.stat().st_size < 1_000_000
    import kira.serve.images  # noqa: F401  (imports warm before measuring)

    out = subprocess.run([sys.executable, "-c", "import kira.serve.images, PIL.PngImagePlugin, numpy\n" + BOMB_PROBE,
                          str(bomb)], capture_output=True, text=True, check=True).stdout.split()
    h, w, grown_mb = (int(x) for x in out)
    assert (h, w) == (2048, 2048)
    # Pillow holds the decoded image at 4 bytes a pixel (256 MB); before, the RGB copy, the EXIF copy and the
    # full-size array came on top of it (about 700 MB)
    assert grown_mb < 400, grown_mb


# ---- 11: image messages, over HTTP ----------------------------------------------------------
def test_unreadable_uploads_get_messages_without_python_reprs(client):
    png = _png(_photo("coins"))
    for data in (b"not an image at all", png[: len(png) // 3]):
        body = _error(client.post("/search", files={"image": ("x.png", data, "image/png")}), 422, "bad_image")
        assert "object at 0x" not in body["message"] and "BytesIO" not in body["message"], body


# ---- 12: /docs and /redoc offline ---------------------------------------------------------------
def test_docs_and_redoc_load_every_asset_from_the_service_itself(client):
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200
        refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html.text)
        refs += re.findall(r"""url:\s*['"]([^'"]+)['"]""", html.text)  # swagger's openapi url
        refs += re.findall(r"""spec-url=["']([^"']+)["']""", html.text)
        assert refs, html.text
        for ref in set(refs):
            assert not re.match(r"(?i)(https?:)?//", ref), f"{page} loads {ref} from another host"
            fetched = client.get(ref)
            assert fetched.status_code == 200 and fetched.content, (page, ref)
    assert "SwaggerUIBundle" in client.get("/docs-assets/swagger-ui-bundle.js").text


def test_a_nan_stored_before_the_check_is_shown_as_a_string_not_a_422(client):
    added = client.post("/documents?commit=true", json={"image_base64": _b64(_photo("camera")), "doc_id": "legacy",
                                                        "metadata": {"depth": 1.0, "list": [2.0]}})
    assert added.status_code == 201, added.text
    svc = client.app.state.service

    def store_nan(writer) -> None:  # as kira stored NaN before it was refused at write
        writer.kb.store.conn.execute("UPDATE documents SET metadata = ? WHERE doc_id = 'legacy'",
                                     ('{"depth": NaN, "list": [Infinity, -Infinity, 2.0]}',))
        writer.kb.commit()

    client.portal.call(svc.writer.submit, store_nan)
    got = client.get("/documents/legacy")
    assert got.status_code == 200, got.text  # was 422: the response could not be encoded
    assert got.json()["metadata"] == {"depth": "NaN", "list": ["Infinity", "-Infinity", 2.0]}
