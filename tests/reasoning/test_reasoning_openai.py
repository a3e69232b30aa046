"""The OpenAI-compatible generator against a tiny server on 127.0.0.1, and the LanguageModel generator."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from kira.reasoning.lm_generator import LanguageModelGenerator
from kira.reasoning.openai_generator import GenerationError, OpenAICompatibleGenerator, chat_completions_url
from kira.reasoning.prompting import parse_reply
from kira.reasoning.types import EvidenceItem, EvidencePack

REPLY = (
    "Reasoning:\n"
    "1. [Evidence 1] and [Evidence 2] both describe pneumonia.\n"
    "2. [Evidence 9] would be needed for the heart, but it is not given.\n"
    "Answer: The right lower lobe shows consolidation consistent with pneumonia [Evidence 1, 2]. "
    "The heart is enlarged [Evidence 9]. The lungs are otherwise clear. [Evidence 2]"
)


class _Server:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.body: bytes = json.dumps({"choices": [{"message": {"role": "assistant", "content": REPLY}}]}).encode()
        # replies to serve first, one per request: (status, extra headers, body or None for self.body, delay s)
        self.script: list[tuple[int, dict[str, str], bytes | None, float]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "json": json.loads(self.rfile.read(length))}
                )
                status, extra, body, delay = outer.script.pop(0) if outer.script else (outer.status, {}, None, 0.0)
                body = outer.body if body is None else body
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    for k, v in extra.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture()
def server() -> Iterator[_Server]:
    with _Server() as s:
        yield s


def _pack() -> EvidencePack:
    return EvidencePack.from_items(
        "What does this X-ray show?",
        [
            EvidenceItem(0, 11, "xr1", "document", 0.9, ("visual",), "right lower lobe consolidation, pneumonia"),
            EvidenceItem(0, 12, "xr2", "region", 0.7, ("text",), "pneumonia; lungs otherwise clear"),
        ],
    )


def test_generate_parses_claims_and_drops_citations_outside_the_pack(server, monkeypatch) -> None:
    monkeypatch.setenv("KIRA_TEST_KEY", "sk-test")
    generator = OpenAICompatibleGenerator(server.url, "tiny-model", api_key_env="KIRA_TEST_KEY", timeout=5)
    answer = generator.generate("What does this X-ray show?", _pack())
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["json"]
    assert body["model"] == "tiny-model" and body["temperature"] == 0.0
    user = body["messages"][-1]["content"]
    assert "[Evidence 1] (doc=xr1, level=document" in user and "What does this X-ray show?" in user
    assert "[Evidence N]" in body["messages"][0]["content"]

    assert [c.citations for c in answer.claims] == [(1, 2), (), (2,)]
    assert answer.claims[1].invalid_citations == (9,)
    assert "[Evidence 9]" not in answer.text and answer.citations == (1, 2)
    assert answer.claims[2].text == "The lungs are otherwise clear. [Evidence 2]"
    assert answer.reasoning[0].startswith("[Evidence 1] and")
    assert "not in the pack: [Evidence 9]" in answer.reasoning[-1]
    assert answer.generator == "openai:tiny-model"


def test_no_key_no_authorization_header(server, monkeypatch) -> None:
    monkeypatch.delenv("KIRA_TEST_KEY", raising=False)
    OpenAICompatibleGenerator(server.url + "/v1/", "m", api_key_env="KIRA_TEST_KEY").generate("q", _pack())
    assert "Authorization" not in server.requests[0]["headers"]
    assert server.requests[0]["path"] == "/v1/chat/completions"


def test_http_errors_are_clear(server) -> None:
    server.status, server.body = 503, b'{"error": "model is loading"}'
    with pytest.raises(GenerationError, match="HTTP 503.*model is loading"):
        OpenAICompatibleGenerator(server.url, "m", timeout=5, retries=0).generate("q", _pack())
    server.status, server.body = 200, b"<html>not json</html>"
    with pytest.raises(GenerationError, match="not JSON"):
        OpenAICompatibleGenerator(server.url, "m", timeout=5).generate("q", _pack())
    server.body = b'{"choices": []}'
    with pytest.raises(GenerationError, match="choices"):
        OpenAICompatibleGenerator(server.url, "m", timeout=5).generate("q", _pack())


def test_unreachable_server_is_a_clear_error() -> None:
    with _Server() as s:
        url = s.url
    with pytest.raises(GenerationError, match="could not reach.*after 1 attempt"):
        OpenAICompatibleGenerator(url, "m", timeout=2, retries=0).generate("q", _pack())


def test_empty_pack_does_not_call_the_server(server) -> None:
    answer = OpenAICompatibleGenerator(server.url, "m").generate("q", EvidencePack("q"))
    assert answer.claims == () and server.requests == []


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="http"):
        OpenAICompatibleGenerator("127.0.0.1:8000", "m")
    with pytest.raises(ValueError, match="model"):
        OpenAICompatibleGenerator("http://x", "")
    assert chat_completions_url("http://h:1/v1/chat/completions") == "http://h:1/v1/chat/completions"


def test_reply_without_headings_is_all_answer() -> None:
    answer = parse_reply("A lake [Evidence 1]. A forest [Evidence 3-4].", _pack(), generator="x")
    assert answer.reasoning == ("Removed citations to evidence that is not in the pack: [Evidence 3], [Evidence 4].",)
    assert answer.text == "A lake [Evidence 1]. A forest."
    assert answer.claims[1].invalid_citations == (3, 4)


def test_language_model_generator_prompts_with_the_pack_and_parses_the_completion() -> None:
    class FakeLM:
        prompt = ""

        def complete(self, prompt: str, *, max_new_tokens: int = 128) -> str:
            FakeLM.prompt = prompt
            return " both items say pneumonia.\nAnswer: Pneumonia in the right lower lobe [Evidence 1]."

    answer = LanguageModelGenerator(FakeLM()).generate("q", _pack())
    assert FakeLM.prompt.endswith("Reasoning:") and "[Evidence 2] (doc=xr2" in FakeLM.prompt
    assert answer.reasoning == ("both items say pneumonia.",)
    assert answer.citations == (1,)


@pytest.fixture()
def waits(monkeypatch) -> list[float]:
    """The generator's backoff sleeps, recorded instead of slept."""
    from kira.reasoning import openai_generator

    recorded: list[float] = []
    monkeypatch.setattr(openai_generator, "_sleep", recorded.append)
    return recorded


def test_429_is_retried_after_the_servers_retry_after(server, waits) -> None:
    server.script = [(429, {"Retry-After": "7"}, b'{"error": "rate limited"}', 0.0)]
    answer = OpenAICompatibleGenerator(server.url, "m", timeout=5).generate("q", _pack())
    assert answer.citations == (1, 2) and len(server.requests) == 2
    assert waits == [7.0]


def test_5xx_backs_off_exponentially_then_succeeds(server, waits) -> None:
    server.script = [(503, {}, b"busy", 0.0), (502, {}, b"bad gateway", 0.0), (500, {}, b"oops", 0.0)]
    gen = OpenAICompatibleGenerator(server.url, "m", timeout=5, retries=3, backoff=0.4)
    assert gen.generate("q", _pack()).citations == (1, 2)
    assert len(server.requests) == 4 and len(waits) == 3
    for i, w in enumerate(waits):  # 0.4, 0.8, 1.6 s, each jittered to 50-100 %
        assert 0.5 * 0.4 * 2**i <= w <= 0.4 * 2**i


def test_retries_run_out_with_a_clear_error(server, waits) -> None:
    server.status, server.body = 429, b'{"error": "slow down"}'
    with pytest.raises(GenerationError, match=r"HTTP 429.*slow down.*gave up after 3 attempts"):
        OpenAICompatibleGenerator(server.url, "m", timeout=5, retries=2, backoff=0.1).generate("q", _pack())
    assert len(server.requests) == 3 and len(waits) == 2


def test_a_retry_after_beyond_max_wait_fails_at_once(server, waits) -> None:
    server.script = [(503, {"Retry-After": "3600"}, b"maintenance", 0.0)]
    with pytest.raises(GenerationError, match="retry after 3600 s, more than max_wait=60 s"):
        OpenAICompatibleGenerator(server.url, "m", timeout=5).generate("q", _pack())
    assert len(server.requests) == 1 and waits == []


def test_client_errors_are_not_retried(server, waits) -> None:
    server.status, server.body = 401, b'{"error": "bad key"}'
    with pytest.raises(GenerationError, match="HTTP 401.*bad key"):
        OpenAICompatibleGenerator(server.url, "m", timeout=5).generate("q", _pack())
    assert len(server.requests) == 1 and waits == []


def test_a_slow_server_times_out_and_is_retried(server, waits) -> None:
    server.script = [(200, {}, None, 1.0)]  # the first reply comes too late
    answer = OpenAICompatibleGenerator(server.url, "m", timeout=0.2, retries=1, backoff=0.0).generate("q", _pack())
    assert answer.citations == (1, 2) and len(server.requests) == 2 and waits == [0.0]
    server.script = [(200, {}, None, 1.0)]
    with pytest.raises(GenerationError, match=r"did not answer within 0.2 s.*after 1 attempt"):
        OpenAICompatibleGenerator(server.url, "m", timeout=0.2, retries=0).generate("q", _pack())


def test_total_timeout_bounds_all_attempts(server) -> None:
    server.status = 503
    start = time.monotonic()
    with pytest.raises(GenerationError, match="total_timeout=0.5 s"):
        OpenAICompatibleGenerator(server.url, "m", timeout=5, retries=50, backoff=0.2,
                                  total_timeout=0.5).generate("q", _pack())
    assert time.monotonic() - start < 3.0


def test_parse_retry_after_reads_seconds_and_http_dates() -> None:
    from datetime import datetime, timezone

    from kira.reasoning.openai_generator import parse_retry_after

    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert parse_retry_after("12", now=now) == 12.0
    assert parse_retry_after("Fri, 02 Jan 2026 03:04:35 GMT", now=now) == 30.0
    assert parse_retry_after("Fri, 02 Jan 2026 03:00:00 GMT", now=now) == 0.0  # in the past: at once
    assert parse_retry_after("soon", now=now) is None and parse_retry_after(None) is None


def test_bad_retry_settings_are_refused() -> None:
    for kw in ({"retries": -1}, {"retries": 1.5}, {"backoff": -1}, {"total_timeout": 0}):
        with pytest.raises(ValueError):
            OpenAICompatibleGenerator("http://x", "m", **kw)


def test_a_looping_reply_is_said_once_and_a_bare_reasoning_heading_is_not_the_answer():
    from kira.reasoning.prompting import parse_reply, short_prompt
    from kira.reasoning.types import EvidenceItem, EvidencePack

    pack = EvidencePack.from_items("a cat?", [EvidenceItem(0, 1, "d1", "document", 0.9, ("text",), "an orange cat")])
    loop = "Reasoning: An orange cat [Evidence 1]. An orange cat [Evidence 1]. An orange cat [Evidence 1]."
    answer = parse_reply(loop, pack, generator="lm")
    assert answer.text == "An orange cat [Evidence 1]." and len(answer.claims) == 1
    assert any("repeated" in step for step in answer.reasoning)
    assert short_prompt("a cat?", pack).endswith("Answer:") and "[Evidence 1] (doc=d1" in short_prompt("a cat?", pack)
