"""A `Generator` over any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama, OpenAI).

Standard library only (urllib): POST ``{base_url}/v1/chat/completions`` with the
evidence pack in the prompt (kira.reasoning.prompting), then parse the reasoning,
claims and ``[Evidence N]`` citations out of the reply; citations to evidence not in
the pack are removed from the text and flagged on the claim.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from typing import Any

from kira.reasoning.prompting import build_messages, parse_reply
from kira.reasoning.template_generator import NO_EVIDENCE_TEXT
from kira.reasoning.types import Answer, EvidencePack

log = logging.getLogger(__name__)


class GenerationError(RuntimeError):
    """The generation server failed: unreachable, an HTTP error status, or a reply without a message."""


def chat_completions_url(base_url: str) -> str:
    """``.../v1/chat/completions`` for a server root or a ``.../v1`` base URL.

    Raises ValueError for a URL that is not http(s).
    """
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://; got {base_url!r}")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


class OpenAICompatibleGenerator:
    """Answers with a chat model behind an OpenAI-compatible HTTP API.

    Parameters
    ----------
    base_url: server root ("http://127.0.0.1:8000") or its "/v1" URL.
    model: the model name the server expects.
    api_key_env: environment variable holding the API key; when it is unset or empty
        no Authorization header is sent (local servers need none).
    timeout: seconds for the whole request.
    temperature, max_tokens: sampling settings sent with the request (0 = greedy).

    `generate` raises GenerationError (with the URL, the HTTP status and the start of
    the server's reply) when the request fails. Thread safety: stateless; safe to share.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> None:
        if not model:
            raise ValueError("model must name the server's model")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds; got {timeout}")
        self.url = chat_completions_url(base_url)
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.name = f"openai:{model}"

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode("utf-8", "replace")
            raise GenerationError(f"{self.url} answered HTTP {exc.code} {exc.reason}: {detail}") from exc
        except urllib.error.URLError as exc:
            raise GenerationError(f"could not reach {self.url}: {exc.reason} (is the server running?)") from exc
        except TimeoutError as exc:
            raise GenerationError(f"{self.url} did not answer within {self.timeout:g} s") from exc
        try:
            return json.loads(body)
        except json.JSONDecodeError as exc:
            raise GenerationError(f"{self.url} returned a body that is not JSON: {body[:200]!r}") from exc

    def complete(self, question: str, pack: EvidencePack) -> str:
        """The raw reply text of the model for (question, pack)."""
        payload = {
            "model": self.model,
            "messages": build_messages(question, pack),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        data = self._post(payload)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise GenerationError(f"{self.url} reply has no choices[0].message.content: {str(data)[:200]}") from exc
        if not isinstance(content, str):
            raise GenerationError(f"{self.url} reply content is {type(content).__name__}, not text")
        return content

    def generate(self, question: str, pack: EvidencePack) -> Answer:
        """Ask the server and parse its reply into an `Answer` (see the module docstring).

        With an empty pack the server is not called: the answer says no evidence was found.
        """
        question = (question or pack.question or "").strip()
        if not pack.items:
            return Answer(
                text=NO_EVIDENCE_TEXT,
                reasoning=("No evidence remained to reason over; the model was not asked.",),
                generator=self.name,
            )
        return parse_reply(self.complete(question, pack), pack, generator=self.name)
