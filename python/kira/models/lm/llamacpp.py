"""llama.cpp (`llama-cpp-python`) as kira's GGUF engine, and the GGUF file's own chat template.

llama.cpp runs the GGUF as it is stored (Q4_1 stays Q4_1) with its own tokenizer, for any
architecture it supports. `LlamaCppEngine` exposes what kira's LM code needs: tokenize, greedy
decoding and next-token logits, both reusing the KV cache of the longest prompt prefix they
share with the previous call (the critic's prompts for one question differ only after
"Passage:", so each passage costs only its own tokens).

`render_chat` renders a chat template (the Jinja2 text a GGUF carries in
`tokenizer.chat_template`) in a sandbox, as Hugging Face and llama.cpp do.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

LLM_HINT = 'pip install "kira[llm]" (builds llama-cpp-python from source: a C++ compiler and CMake are needed)'

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML: used only for a GGUF that carries no chat template of its own."""


def llama_cpp_available() -> bool:
    """Whether `llama_cpp` (llama-cpp-python) can be imported (checked without importing it)."""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def default_threads() -> int:
    """Half the CPUs this process may run on, at least 1: llama-cpp-python's own default (one
    thread per physical core where cores have two hardware threads). More threads than free
    cores is far slower, not faster: llama.cpp's threads meet at a barrier after every op, so
    one descheduled thread stalls all (on the shared 2-core VM, 2 threads decoded at 1.9 tokens/s
    against 31 for 1 thread)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        cpus = os.cpu_count() or 1
    return max(1, cpus // 2)


def render_chat(template: str | None, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = True,
                bos_token: str = "", eos_token: str = "") -> str:
    """The prompt text of `messages` ([{"role", "content"}, ...]) under a Jinja2 chat template.

    template: the GGUF's `tokenizer.chat_template` (None: ChatML). Rendered in jinja2's immutable
    sandbox with `messages`, `add_generation_prompt`, `bos_token`, `eos_token` and
    `raise_exception`. Raises ImportError naming the extra without jinja2, ValueError when the
    template raises or does not parse.
    """
    try:
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as exc:
        raise ImportError('rendering a GGUF chat template needs jinja2: pip install "kira[lm]"') from exc

    def raise_exception(message: str) -> None:
        raise ValueError(f"the chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        compiled = env.from_string(template or CHATML_TEMPLATE)
        return compiled.render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                               bos_token=bos_token, eos_token=eos_token, raise_exception=raise_exception)
    except TemplateError as exc:
        raise ValueError(f"cannot render the chat template: {exc}") from exc


class LlamaCppEngine:
    """A GGUF model in llama.cpp: quantised weights kept as stored, greedy decoding, prefix KV reuse.

    Parameters: path (a GGUF file), threads (llama.cpp threads for decoding and prompt
    processing; default: `default_threads()`, half the CPUs), context (tokens; default: the
    file's training context). Raises ImportError naming the `llm` extra without
    llama-cpp-python, FileNotFoundError for a missing file, ValueError when llama.cpp cannot
    load it. Thread safety: calls are serialised by a lock (one context, one KV cache).
    """

    name = "llama.cpp"

    def __init__(self, path: str | os.PathLike, *, threads: int | None = None, context: int | None = None) -> None:
        try:
            import llama_cpp
        except ImportError as exc:
            raise ImportError(f"the llama.cpp engine needs llama-cpp-python: {LLM_HINT}") from exc
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"GGUF model file not found: {self.path}")
        self.threads = int(threads) if threads else default_threads()
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(self.path), n_ctx=int(context or 0), n_threads=self.threads,
                n_threads_batch=self.threads, logits_all=False, verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ValueError(f"llama.cpp cannot load {self.path.name}: {exc}") from exc
        self._lock = threading.Lock()
        self._pieces: dict[str, int] | None = None
        meta = self._llm.metadata
        self.chat_template: str | None = meta.get("tokenizer.chat_template")
        self.context = int(self._llm.n_ctx())
        self.vocab = int(self._llm.n_vocab())
        self.eos_id = int(self._llm.token_eos())
        self.bos_id = int(self._llm.token_bos())
        self.add_bos = meta.get("tokenizer.ggml.add_bos_token", "false").lower() == "true"

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, special tokens (<|im_start|>, ...) parsed, no BOS added."""
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids (invalid UTF-8 replaced)."""
        return self._llm.detokenize(list(ids)).decode("utf-8", "replace")

    def token_text(self, token_id: int) -> str:
        """The text of one token."""
        return self.decode([token_id])

    def vocab_id(self, piece: str) -> int | None:
        """The id of a vocabulary entry spelled `piece` as stored ("ĠYes", "▁Yes"), or None."""
        if self._pieces is None:
            model = self._llm._model
            self._pieces = {}
            for i in range(self.vocab):
                self._pieces.setdefault(model.token_get_text(i), i)
        return self._pieces.get(piece)

    def single_token(self, text: str) -> int | None:
        """The id of `text` when it is exactly one token, else None."""
        ids = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        return int(ids[0]) if len(ids) == 1 else None

    def _prefill(self, ids: Sequence[int]) -> None:
        """Decode `ids`, keeping the KV cache of the prefix they share with what is cached."""
        llm = self._llm
        cached = llm.input_ids[: llm.n_tokens]
        keep = 0
        for a, b in zip(cached, ids):
            if a != b:
                break
            keep += 1
        keep = min(keep, len(ids) - 1)  # decode at least one token, so its logits are fresh
        if keep > 0 and llm._ctx.kv_cache_seq_rm(-1, keep, -1):
            llm.n_tokens = keep
        else:
            llm.reset()
            keep = 0
        llm.eval(list(ids[keep:]))

    def _last_logits(self) -> np.ndarray:
        ptr = self._llm._ctx.get_logits_ith(-1)
        return np.ctypeslib.as_array(ptr, shape=(self.vocab,)).astype(np.float32, copy=True)

    def next_token_logits(self, ids: Sequence[int]) -> np.ndarray:
        """float32 (vocab,) logits of the token after `ids`."""
        if not ids:
            raise ValueError("next_token_logits needs at least one token")
        if len(ids) > self.context:
            raise ValueError(f"{len(ids)} tokens do not fit the {self.context}-token context; shorten the prompt")
        with self._lock:
            self._prefill(ids)
            return self._last_logits()

    def greedy(self, ids: Sequence[int], max_new_tokens: int, stop: set[int]) -> list[int]:
        """Greedy continuation of `ids`: at most max_new_tokens ids, ending before a stop id."""
        if not ids:
            raise ValueError("greedy needs at least one prompt token")
        if len(ids) + max_new_tokens > self.context:
            raise ValueError(f"{len(ids)} + {max_new_tokens} tokens do not fit the {self.context}-token context")
        out: list[int] = []
        with self._lock:
            self._prefill(ids)
            for _ in range(max_new_tokens):
                token = int(np.argmax(self._last_logits()))
                if token in stop:
                    break
                out.append(token)
                if len(out) < max_new_tokens:
                    self._llm.eval([token])
        return out
