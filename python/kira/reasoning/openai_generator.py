"""A `Generator` over any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama, OpenAI).

Standard library only (urllib): POST ``{base_url}/v1/chat/completions`` with the
evidence pack in the prompt (kira.reasoning.prompting), then parse the reasoning,
claims and ``[Evidence N]`` citations out of the reply; citations to evidence not in
the pack are removed from the text and flagged on the claim.

Transient failures are retried with exponential backoff (jittered): HTTP 408, 409, 429 and
5xx, refused or reset connections, and timeouts. A ``Retry-After`` header (seconds or an
HTTP date) sets the wait instead, unless it is longer than ``max_wait``, which fails at once.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from typing import Any

from kira.reasoning.prompting import build_messages, parse_reply
from kira.reasoning.template_generator import NO_EVIDENCE_TEXT
from kira.reasoning.types import Answer, EvidencePack

log = logging.getLogger(__name__)


class GenerationError(RuntimeError):
    """The generation server failed: unreachable, an HTTP error status, or a reply without a message."""


RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
"""HTTP statuses worth another try: timeouts, conflicts, rate limits and server errors."""

_sleep = time.sleep  # replaced by tests
_clock = time.monotonic


class _Transient(Exception):
    """One failed attempt that may succeed if repeated."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date; None if absent or unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


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
    timeout: seconds one attempt may wait for the connection or for each read.
    temperature, max_tokens: sampling settings sent with the request (0 = greedy).
    retries: further attempts after a transient failure (429, 5xx, 408, 409, connection
        refused or reset, timeout); 0 disables retrying.
    backoff: first wait in seconds; doubles per retry, jittered to 50-100 % of its value.
    max_wait: the longest single wait; a Retry-After asking for more fails at once.
    total_timeout: seconds for all attempts and waits together (None: no overall limit).

    `generate` raises GenerationError (with the URL, the HTTP status and the start of
    the server's reply, and how many attempts were made) when the request fails.
    Thread safety: stateless apart from the jitter's random source; safe to share.
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
        retries: int = 3,
        backoff: float = 0.5,
        max_wait: float = 60.0,
        total_timeout: float | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must name the server's model")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds; got {timeout}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0; got {retries!r}")
        if backoff < 0 or max_wait < 0:
            raise ValueError(f"backoff and max_wait must be >= 0 seconds; got {backoff}, {max_wait}")
        if total_timeout is not None and total_timeout <= 0:
            raise ValueError(f"total_timeout must be > 0 seconds or None; got {total_timeout}")
        self.retries = retries
        self.backoff = float(backoff)
        self.max_wait = float(max_wait)
        self.total_timeout = None if total_timeout is None else float(total_timeout)
        self._random = random.Random()
        self.url = chat_completions_url(base_url)
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.name = f"openai:{model}"

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST `payload` with retries (see the class docstring); the decoded JSON reply."""
        start = _clock()
        attempt = 0
        while True:
            attempt += 1
            remaining = None if self.total_timeout is None else self.total_timeout - (_clock() - start)
            try:
                return self._attempt(payload, self.timeout if remaining is None else max(0.001, min(self.timeout, remaining)))
            except _Transient as exc:
                if attempt > self.retries:
                    raise GenerationError(f"{exc} (gave up after {attempt} attempt{'s' if attempt > 1 else ''})") from None
                wait = exc.retry_after
                if wait is None:
                    wait = min(self.max_wait, self.backoff * 2 ** (attempt - 1)) * (0.5 + 0.5 * self._random.random())
                elif wait > self.max_wait:
                    raise GenerationError(f"{exc}; the server asks to retry after {wait:g} s, more than "
                                          f"max_wait={self.max_wait:g} s") from None
                remaining = None if self.total_timeout is None else self.total_timeout - (_clock() - start)
                if remaining is not None and wait >= remaining:
                    raise GenerationError(f"{exc}; no time left to retry within total_timeout="
                                          f"{self.total_timeout:g} s (after {attempt} attempts)") from None
                log.warning("%s; retrying in %.2f s (attempt %d of %d)", exc, wait, attempt + 1, self.retries + 1)
                _sleep(wait)

    def _attempt(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One POST. Raises _Transient for what a retry may fix, GenerationError for the rest."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                detail = exc.read()[:500].decode("utf-8", "replace")
                message = f"{self.url} answered HTTP {exc.code} {exc.reason}: {detail}"
                if exc.code in RETRY_STATUSES:
                    raise _Transient(message, parse_retry_after(exc.headers.get("Retry-After"))) from None
            raise GenerationError(message) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _Transient(f"{self.url} did not answer within {timeout:g} s") from None
            raise _Transient(f"could not reach {self.url}: {exc.reason} (is the server running?)") from None
        except (TimeoutError, ConnectionError) as exc:
            what = f"did not answer within {timeout:g} s" if isinstance(exc, TimeoutError) else f"dropped the connection ({exc})"
            raise _Transient(f"{self.url} {what}") from None
        try:
            reply: dict[str, Any] = json.loads(body)
            return reply
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
