"""Kira with the OpenAI-compatible generator against a tiny chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira


class _Handler(BaseHTTPRequestHandler):
    prompts: list[str] = []

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = "\n".join(m["content"] for m in body["messages"])
        _Handler.prompts.append(prompt)
        reply = ("Reasoning: evidence 1 shows a blue sky.\nAnswer: The image shows a blue sky [Evidence 1]. "
                 "It is also a red dragon [Evidence 9].")
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_kira_answers_through_an_http_generator_and_never_cites_outside_the_pack(tmp_path, server):
    from kira.reasoning import OpenAICompatibleGenerator

    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(flat((0, 0, 1)), doc_id="sky", caption="blue sky")
        kb.add_image(flat((1, 0, 0)), doc_id="wall", caption="red wall")
        result = Kira(kb, generator=OpenAICompatibleGenerator(server, "tiny")).ask("what is blue?", top_k=3)
    assert _Handler.prompts and "[Evidence 1]" in _Handler.prompts[-1] and "blue sky" in _Handler.prompts[-1]
    assert "blue sky" in result.answer.text.lower()
    assert set(result.answer.citations) <= set(result.evidence.numbers)
    bad = [c for c in result.answer.claims if 9 in c.invalid_citations]
    assert bad and bad[0].hallucination_risk  # the verifier flags the claim citing a number not in the pack
    assert result.card.config["generator"]
