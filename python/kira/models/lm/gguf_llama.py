"""A Llama-architecture GGUF file (llama.cpp's format) -> float32 numpy weights + a tokenizer.

Reads with the `gguf` package (llama.cpp's own Python reader, `pip install 'kira[lm]'`),
dequantises every tensor (Q4_1, Q8_0, ... -> float32), and undoes llama.cpp's
permutation of the query/key rows so the weights are laid out as Hugging Face's
LlamaForCausalLM has them (rotary embedding by halves). No pickle, no torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

LM_EXTRA_HINT = "install the lm extra: pip install 'kira[lm]' (it adds llama.cpp's gguf reader)"


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a Llama decoder, read from the GGUF metadata."""

    layers: int  # llama.block_count
    hidden: int  # llama.embedding_length
    intermediate: int  # llama.feed_forward_length
    heads: int  # llama.attention.head_count
    kv_heads: int  # llama.attention.head_count_kv
    vocab: int
    context: int  # llama.context_length
    rope_base: float  # llama.rope.freq_base
    rms_eps: float  # llama.attention.layer_norm_rms_epsilon

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass
class GgufLlama:
    """Everything in a Llama GGUF: config, float32 weights (HF names), tokenizer, special ids."""

    config: LlamaConfig
    weights: dict[str, np.ndarray]  # HF parameter name -> float32 array ((out, in) for linear layers)
    tokenizer: Any  # tokenizers.Tokenizer
    bos_id: int
    eos_id: int
    chat_template: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def _gguf() -> Any:
    try:
        import gguf
    except ImportError as exc:
        raise ImportError(f"reading GGUF files needs the gguf package; {LM_EXTRA_HINT}") from exc
    return gguf


def _field(reader: Any, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def unpermute_rope(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's convert-time permutation of q/k rows (interleaved -> halves rotary layout)."""
    out_dim = w.shape[0]
    return w.reshape(n_head, out_dim // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _tokenizer(reader: Any) -> Any:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    model = _field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(f"only byte-level BPE (gpt2-style) GGUF tokenizers are supported, not {model!r}")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False,
                               byte_fallback=False))
    # SmolLM's pre-tokenizer ("smollm" in llama.cpp): single digits, then GPT-2's byte-level split
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    tok.add_special_tokens(specials)
    return tok


def read_gguf_llama(path: str | os.PathLike) -> GgufLlama:
    """Read a Llama-architecture GGUF file. Raises FileNotFoundError naming a missing file,
    ValueError for another architecture, ImportError without the gguf package."""
    gguf = _gguf()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF model file not found: {path}")
    reader = gguf.GGUFReader(str(path))
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"{path.name}: only the llama architecture is supported, not {arch!r}")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    cfg = LlamaConfig(
        layers=int(_field(reader, "llama.block_count")),
        hidden=int(_field(reader, "llama.embedding_length")),
        intermediate=int(_field(reader, "llama.feed_forward_length")),
        heads=int(_field(reader, "llama.attention.head_count")),
        kv_heads=int(_field(reader, "llama.attention.head_count_kv", _field(reader, "llama.attention.head_count"))),
        vocab=int(_field(reader, "llama.vocab_size", len(tokens))),
        context=int(_field(reader, "llama.context_length", 2048)),
        rope_base=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
    )
    weights: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))  # ggml lists dims innermost first
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).reshape(shape)
        name = t.name
        if name == "token_embd.weight":
            hf = "model.embed_tokens.weight"
        elif name == "output_norm.weight":
            hf = "model.norm.weight"
        elif name == "output.weight":
            hf = "lm_head.weight"
        elif name.startswith("blk."):
            _, layer, part, _ = name.split(".")
            hf = f"model.layers.{layer}.{_NAMES[part]}.weight"
            if part == "attn_q":
                data = unpermute_rope(data, cfg.heads)
            elif part == "attn_k":
                data = unpermute_rope(data, cfg.kv_heads)
        else:
            continue  # rope frequency tables and the like: recomputed from the config
        weights[hf] = np.ascontiguousarray(data)
    return GgufLlama(
        config=cfg,
        weights=weights,
        tokenizer=_tokenizer(reader),
        bos_id=int(_field(reader, "tokenizer.ggml.bos_token_id", 1)),
        eos_id=int(_field(reader, "tokenizer.ggml.eos_token_id", 2)),
        chat_template=_field(reader, "tokenizer.chat_template"),
        metadata={"name": _field(reader, "general.name"), "file_type": _field(reader, "general.file_type")},
    )
