"""llama.cpp (`llama-cpp-python`) as kira's GGUF engine, and the GGUF file's own chat template.

llama.cpp runs the GGUF as it is stored (Q4_1 stays Q4_1) with its own tokenizer, for any
architecture it supports. `LlamaCppEngine` exposes what kira's LM code needs: tokenize, greedy
decoding and next-token logits, both reusing the KV cache of the longest prompt prefix they
share with the previous call (the critic's prompts for one question differ only after
"Passage:", so each passage costs only its own tokens).

llama.cpp is native code built for the machine that compiled it: a build that uses CPU features
the running host does not let a process execute (AMX tiles on a VM that advertises `amx_tile`,
say) dies with SIGILL, taking the whole process with it. So before a process first loads a GGUF
into llama.cpp, `probe_llama_cpp` loads it and evaluates a few tokens in a child process, once per
file and process; a child that dies leaves the parent free to fall back to kira's numpy engine.

`render_chat` renders a chat template (the Jinja2 text a GGUF carries in
`tokenizer.chat_template`) in a sandbox, as Hugging Face and llama.cpp do.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
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


PROBE_TIMEOUT_S = 120.0
"""How long the child process may take to load a GGUF and evaluate a few tokens."""

_PROBE_CODE = """
import sys
import llama_cpp
try:
    llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, n_threads_batch=1, verbose=False)
except (ValueError, RuntimeError):
    sys.exit(0)  # a file llama.cpp refuses is a load error, reported when the parent loads it, not a crash
ids = llm.tokenize(b"The quick brown fox jumps over the lazy dog", add_bos=True, special=False)[:8]
llm.eval(ids)       # prompt processing: the batched matrix kernels
llm.eval([ids[-1]])  # one decoding step: the vector kernels
"""
"""What the probe runs in the child: load the file, evaluate a prompt and one decoding step."""

_probed: dict[tuple[str, int, int], str | None] = {}
_probe_lock = threading.Lock()


class LlamaCppUnsafe(RuntimeError):
    """llama.cpp crashed or failed in the probe's child process on this host (see `probe_llama_cpp`)."""


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        what = " (an illegal instruction: the build uses CPU features this host does not enable)" \
            if name == "SIGILL" else ""
        return f"was killed by {name}{what}"
    return f"exited with status {returncode}"


def probe_llama_cpp(path: str | os.PathLike) -> str | None:
    """Load the GGUF at `path` in llama.cpp in a child process and evaluate a few tokens.

    Returns None when the child finished cleanly or llama.cpp refused the file with an exception
    (loading it here then raises that error safely), else why the child did not finish (for example "was killed by
    SIGILL (an illegal instruction: ...)"). Run once per file (path, size, mtime) and process; the
    answer is cached. Costs one Python start plus one model load (about a second for SmolLM2-135M).
    Thread safety: safe; concurrent callers for one file wait for one probe.
    """
    file = Path(path).resolve()
    st = file.stat()
    key = (str(file), st.st_size, st.st_mtime_ns)
    with _probe_lock:
        if key in _probed:
            return _probed[key]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        try:
            done = subprocess.run([sys.executable, "-c", _PROBE_CODE, str(file)], capture_output=True,
                                  timeout=PROBE_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            reason: str | None = f"did not finish within {PROBE_TIMEOUT_S:.0f} s"
        else:
            reason = None
            if done.returncode != 0:
                tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                reason = _describe_exit(done.returncode) + (f": {tail[0]}" if tail[0] else "")
        _probed[key] = reason
        return reason


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
    file's training context), probe (first run `probe_llama_cpp` on the file; default True).
    Raises ImportError naming the `llm` extra without llama-cpp-python, FileNotFoundError for
    a missing file, LlamaCppUnsafe when the probe's child crashed or failed (this process is
    left unharmed), ValueError when llama.cpp cannot load the file. Thread safety: calls are serialised by a lock (one context, one KV cache).
    """

    name = "llama.cpp"

    def __init__(self, path: str | os.PathLike, *, threads: int | None = None, context: int | None = None,
                 probe: bool = True) -> None:
        if not llama_cpp_available():
            raise ImportError(f"the llama.cpp engine needs llama-cpp-python: {LLM_HINT}")
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"GGUF model file not found: {self.path}")
        if probe and (reason := probe_llama_cpp(self.path)) is not None:
            raise LlamaCppUnsafe(
                f"llama.cpp {reason} while evaluating {self.path.name} in a probe process, so it is not loaded "
                "in this process; run the file on kira's numpy engine (engine='numpy', or 'auto' falls back to it), or rebuild llama-cpp-python "
                "for any x86-64: CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install --force-reinstall --no-cache-dir "
                "--no-deps 'llama-cpp-python>=0.3.36,<0.4'")
        import llama_cpp  # after the probe: importing loads the native library
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
