"""A small real language model without torch: Llama GGUF files run in numpy (SmolLM2-135M)."""

from __future__ import annotations

from kira.models.lm.gguf_llama import GgufLlama, LlamaConfig, read_gguf_llama
from kira.models.lm.llama import NumpyLlama
from kira.models.lm.smollm import SmolLM, SmolLMCritic, smollm2_path

__all__ = ["GgufLlama", "LlamaConfig", "NumpyLlama", "SmolLM", "SmolLMCritic", "read_gguf_llama", "smollm2_path"]
