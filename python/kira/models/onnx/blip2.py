"""BLIP-2 captioning through onnxruntime: vision + Q-Former graph, then a greedy decoder loop.

The loop is plain Python over two decoder graphs (prefill, then one token per step with
the KV cache fed back). On CUDA the cache stays on the device between steps (IO binding
with OrtValues); on CPU it is numpy. The result equals transformers'
`generate(do_sample=False, num_beams=1)` token for token.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from kira.images import ImageLike, load_image
from kira.models.manifest import Manifest, load_manifest
from kira.models.onnx._run import CUDA, run, run_chunked
from kira.models.onnx.tokenize import ManifestTokenizer
from kira.models.preprocess import preprocess_batch
from kira.models.runtime import OnnxSession, open_session

DOMAIN_PROMPT = "Question: what does this image show in detail? Answer:"
HYPOTHESIS_PROMPTS = (
    "Question: {q} Answer:",
    "Question: {q} Let's think step by step. Answer:",
    "Question: {q} Short answer:",
)


class OnnxBlip2Captioner:
    """BLIP-2 (OPT decoder) as a Captioner.

    max_new_tokens: default length cap of a caption. Thread safety: calls may run from
    several threads; each call has its own KV cache and IO bindings.
    """

    def __init__(self, source: Manifest | str | os.PathLike, *, prefer_cuda: bool = True,
                 max_new_tokens: int = 30, batch_size: int = 8, threads: int | None = None) -> None:
        self.manifest = source if isinstance(source, Manifest) else load_manifest(source)
        if self.manifest.kind != "blip2":
            raise ValueError(f"{self.manifest.root}: this is a {self.manifest.kind} export, not blip2")
        if self.manifest.preprocess is None:
            raise ValueError(f"{self.manifest.root}: BLIP-2 manifest has no preprocessing section")
        self.preprocess = self.manifest.preprocess
        open_ = lambda role: open_session(self.manifest.path(role), prefer_cuda=prefer_cuda, threads=threads)  # noqa: E731
        self.sessions: dict[str, OnnxSession] = {r: open_(r) for r in ("vision", "prefill", "step")}
        self.provider = self.sessions["vision"].provider
        self.providers = {f"captioner.{r}": s.provider for r, s in self.sessions.items()}
        self.tokenizer = ManifestTokenizer(self.manifest, pad_id=int(self.manifest.extra["pad_token_id"]))
        self.layers = int(self.manifest.dims["layers"])
        self.num_query_tokens = int(self.manifest.dims["num_query_tokens"])
        self.bos = int(self.manifest.extra["bos_token_id"])
        self.eos = set(int(e) for e in self.manifest.extra.get("eos_token_ids", []))
        self.max_positions = int(self.manifest.extra.get("max_positions", 2048))
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self._past_names = [f"past.{i}.{kv}" for i in range(self.layers) for kv in ("key", "value")]

    # -- the pieces -------------------------------------------------------------------------
    def query_embeds(self, images: Sequence[ImageLike]) -> np.ndarray:
        """float32 (n, num_query_tokens, lm_hidden): the projected Q-Former outputs."""
        images = list(images)

        def one(s: slice) -> np.ndarray:
            return run(self.sessions["vision"], {"pixel_values": preprocess_batch(images[s], self.preprocess)})[0]

        out, self.batch_size = run_chunked(one, len(images), self.batch_size)
        return out

    def prompt_ids(self, prompt: str | None) -> list[int]:
        """Token ids that follow the query embeddings: [bos] alone, or the tokenised prompt
        (the tokenizer adds the BOS itself, as BLIP-2's processor does)."""
        if not prompt:
            return [self.bos]
        return self.tokenizer.ids(prompt)

    def generate_ids(self, images: Sequence[ImageLike], prompt: str | None = None, *,
                     max_new_tokens: int | None = None) -> list[list[int]]:
        """Greedy new token ids per image (EOS and what follows dropped)."""
        limit = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        if limit < 1:
            raise ValueError("max_new_tokens must be at least 1")
        query = self.query_embeds(images)
        ids = self.prompt_ids(prompt)
        n = len(query)
        total = self.num_query_tokens + len(ids)
        limit = min(limit, self.max_positions - total)
        if limit < 1:
            raise ValueError(f"prompt of {len(ids)} tokens leaves no room under {self.max_positions} positions")
        feeds = {
            "query_embeds": query,
            "input_ids": np.tile(np.asarray(ids, dtype=np.int64), (n, 1)),
            "attention_mask": np.ones((n, total), dtype=np.int64),
        }
        if self.sessions["prefill"].provider == CUDA:
            return self._loop_cuda(feeds, n, total, limit)
        logits, *past = run(self.sessions["prefill"], feeds)
        out: list[list[int]] = [[] for _ in range(n)]
        done = np.zeros(n, dtype=bool)
        for step in range(limit):
            token = logits.argmax(axis=-1)
            for i in range(n):
                if not done[i]:
                    if int(token[i]) in self.eos:
                        done[i] = True
                    else:
                        out[i].append(int(token[i]))
            if done.all() or step == limit - 1:
                break
            total += 1
            step_feeds = {"input_ids": token.astype(np.int64)[:, None], "attention_mask": np.ones((n, total), np.int64)}
            step_feeds.update(zip(self._past_names, past))
            logits, *past = run(self.sessions["step"], step_feeds)
        return out

    def _loop_cuda(self, feeds: dict[str, np.ndarray], n: int, total: int, limit: int) -> list[list[int]]:
        """The same greedy loop with the KV cache kept on the GPU between steps."""
        present = [f"present.{i}.{kv}" for i in range(self.layers) for kv in ("key", "value")]
        prefill = self.sessions["prefill"].session
        step = self.sessions["step"].session
        binding = prefill.io_binding()
        for name, value in feeds.items():
            binding.bind_cpu_input(name, np.ascontiguousarray(value))
        binding.bind_output("logits")  # small: back to the host for argmax
        for name in present:
            binding.bind_output(name, "cuda")
        prefill.run_with_iobinding(binding)
        values: list[Any] = binding.get_outputs()
        logits, past = values[0].numpy(), values[1:]
        out: list[list[int]] = [[] for _ in range(n)]
        done = np.zeros(n, dtype=bool)
        for i_step in range(limit):
            token = logits.argmax(axis=-1)
            for i in range(n):
                if not done[i]:
                    if int(token[i]) in self.eos:
                        done[i] = True
                    else:
                        out[i].append(int(token[i]))
            if done.all() or i_step == limit - 1:
                break
            total += 1
            binding = step.io_binding()
            binding.bind_cpu_input("input_ids", token.astype(np.int64)[:, None])
            binding.bind_cpu_input("attention_mask", np.ones((n, total), np.int64))
            for name, value in zip(self._past_names, past):
                binding.bind_ortvalue_input(name, value)
            binding.bind_output("logits")
            for name in present:
                binding.bind_output(name, "cuda")
            step.run_with_iobinding(binding)
            values = binding.get_outputs()
            logits, past = values[0].numpy(), values[1:]
        return out

    # -- the Captioner seam -----------------------------------------------------------------
    def caption(self, image: np.ndarray, prompt: str | None = None) -> str:
        """A caption of one image; with a prompt, the prompt's continuation (e.g. a domain prompt)."""
        return self.tokenizer.decode(self.generate_ids([load_image(image)], prompt)[0]).strip()

    def captions(self, images: Sequence[ImageLike], prompt: str | None = None) -> list[str]:
        """Captions of a batch of images, one decoder loop for the whole batch."""
        return [self.tokenizer.decode(ids).strip() for ids in self.generate_ids(images, prompt)]

    def hypotheses(self, image: np.ndarray | None, question: str, n: int) -> list[str]:
        """Up to n distinct answers to `question` about `image` from a few chain-of-thought prompts.

        Without an image BLIP-2 has nothing to look at: returns [].
        """
        if image is None or n < 1:
            return []
        seen: list[str] = []
        for template in HYPOTHESIS_PROMPTS:
            text = self.caption(image, template.format(q=question.strip()))
            if text and text not in seen:
                seen.append(text)
            if len(seen) >= n:
                break
        return seen
