"""A Llama decoder in numpy (float32) with a KV cache: enough for SmolLM2-135M on a CPU."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kira.models.lm.gguf_llama import GgufLlama


def _rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)) * w


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


class KVCache:
    """Preallocated keys/values per layer: (kv_heads, capacity, head_dim), filled up to `length`."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, capacity: int) -> None:
        self.k = np.zeros((layers, kv_heads, capacity, head_dim), np.float32)
        self.v = np.zeros_like(self.k)
        self.length = 0
        self.capacity = capacity


class NumpyLlama:
    """HF LlamaForCausalLM's forward pass, in numpy, batch 1.

    Thread safety: `forward` only reads the weights; give each thread its own KVCache.
    """

    def __init__(self, model: GgufLlama) -> None:
        c = model.config
        self.config = c
        w = model.weights
        self.embed = w["model.embed_tokens.weight"]
        self.lm_head_t = np.ascontiguousarray(w.get("lm_head.weight", self.embed).T)
        self.norm = w["model.norm.weight"]
        self.layers = []
        for i in range(c.layers):
            p = f"model.layers.{i}."
            qkv = np.concatenate([w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"],
                                  w[p + "self_attn.v_proj.weight"]], axis=0)
            gate_up = np.concatenate([w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]], axis=0)
            self.layers.append((
                w[p + "input_layernorm.weight"], np.ascontiguousarray(qkv.T),
                np.ascontiguousarray(w[p + "self_attn.o_proj.weight"].T),
                w[p + "post_attention_layernorm.weight"], np.ascontiguousarray(gate_up.T),
                np.ascontiguousarray(w[p + "mlp.down_proj.weight"].T),
            ))
        hd = c.head_dim
        self.inv_freq = 1.0 / (c.rope_base ** (np.arange(0, hd, 2, dtype=np.float64) / hd))

    def new_cache(self, capacity: int) -> KVCache:
        c = self.config
        return KVCache(c.layers, c.kv_heads, c.head_dim, min(capacity, c.context))

    def _rope(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        # x: (heads, t, head_dim); HF's rotate_half layout
        freqs = np.outer(positions, self.inv_freq)
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)
        half = x.shape[-1] // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rotated * sin

    def forward(self, ids: Sequence[int], cache: KVCache) -> np.ndarray:
        """Logits float32 (len(ids), vocab) for `ids` following what `cache` holds; extends the cache."""
        c = self.config
        t = len(ids)
        start = cache.length
        if start + t > cache.capacity:
            raise ValueError(f"sequence of {start + t} tokens exceeds the cache capacity {cache.capacity}")
        hd, nh, nkv = c.head_dim, c.heads, c.kv_heads
        group = nh // nkv
        positions = np.arange(start, start + t)
        x = self.embed[np.asarray(ids, dtype=np.int64)]
        mask = np.triu(np.full((t, start + t), -np.inf, np.float32), k=start + 1)
        scale = 1.0 / np.sqrt(hd)
        for li, (n1, qkv_t, o_t, n2, gu_t, down_t) in enumerate(self.layers):
            h = _rms(x, n1, c.rms_eps) @ qkv_t
            q = h[:, : nh * hd].reshape(t, nh, hd).transpose(1, 0, 2)
            k = h[:, nh * hd : (nh + nkv) * hd].reshape(t, nkv, hd).transpose(1, 0, 2)
            v = h[:, (nh + nkv) * hd :].reshape(t, nkv, hd).transpose(1, 0, 2)
            q, k = self._rope(q, positions), self._rope(k, positions)
            cache.k[li, :, start : start + t] = k
            cache.v[li, :, start : start + t] = v
            keys, values = cache.k[li, :, : start + t], cache.v[li, :, : start + t]
            qg = q.reshape(nkv, group, t, hd)  # grouped-query attention: heads share kv heads
            scores = np.einsum("kgtd,ksd->kgts", qg, keys) * scale
            scores = scores + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            attn = np.einsum("kgts,ksd->kgtd", scores, values).reshape(nh, t, hd).transpose(1, 0, 2).reshape(t, nh * hd)
            x = x + attn @ o_t
            gu = _rms(x, n2, c.rms_eps) @ gu_t
            x = x + (_silu(gu[:, : c.intermediate]) * gu[:, c.intermediate :]) @ down_t
        cache.length = start + t
        return _rms(x, self.norm, c.rms_eps) @ self.lm_head_t

    def greedy(self, ids: Sequence[int], max_new_tokens: int, stop: set[int]) -> list[int]:
        """Greedy continuation of `ids` (stop tokens excluded)."""
        cache = self.new_cache(len(ids) + max_new_tokens)
        logits = self.forward(ids, cache)[-1]
        out: list[int] = []
        for i in range(max_new_tokens):
            tok = int(np.argmax(logits))
            if tok in stop:
                break
            out.append(tok)
            if i == max_new_tokens - 1:
                break
            logits = self.forward([tok], cache)[-1]
        return out
