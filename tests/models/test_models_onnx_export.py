"""Export tiny random-weight checkpoints to ONNX and check onnxruntime against torch.

Every checkpoint is built here (save_pretrained into a temp dir); nothing is fetched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.models

torch = pytest.importorskip("torch", reason="torch is not installed: pip install 'kira[export]' (the CPU build: --index-url https://download.pytorch.org/whl/cpu)")
transformers = pytest.importorskip("transformers")

from kira.models.exporters import export  # noqa: E402
from kira.models.manifest import ManifestError, load_manifest  # noqa: E402
from kira.models.onnx import (  # noqa: E402
    OnnxBlip2Captioner,
    OnnxClipImageEncoder,
    OnnxClipTextEncoder,
    OnnxCrossEncoder,
    OnnxDinoRegionProposer,
    OnnxSentenceEncoder,
)


def _pil(name: str):
    """transformers 5's PIL-backend image processor, or the (PIL-based) slow one of transformers 4."""
    return getattr(transformers, f"{name}Pil", None) or getattr(transformers, name)


WORDS = "a an the cat dog x-ray chest lung nodule circuit resistor field river cell stain tumour red blue".split()
IMG = 32  # tiny towers see 32 x 32 pixels


def _word_tokenizer(specials: list[str], template_single: str, template_pair: str | None, **named: str):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(specials + WORDS)}
    unk = named.get("unk_token", specials[0])
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special_ids = [(s, vocab[s]) for s in specials]
    tok.post_processor = processors.TemplateProcessing(single=template_single, pair=template_pair,
                                                       special_tokens=special_ids)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **named), vocab


def _images(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = [(40, 56), (64, 48), (32, 32), (50, 50), (37, 71)]
    return [rng.integers(0, 256, size=(*shapes[i % len(shapes)], 3), dtype=np.uint8) for i in range(n)]


# -- tiny checkpoints (session scope: built and exported once) ---------------------------------

@pytest.fixture(scope="session")
def clip_ckpt(tmp_path_factory) -> Path:
    from transformers import CLIPConfig, CLIPModel

    d = tmp_path_factory.mktemp("clip")
    tok, vocab = _word_tokenizer(["<|startoftext|>", "<|endoftext|>", "<unk>"],
                                 "<|startoftext|> $A <|endoftext|>", None,
                                 bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                                 pad_token="<|endoftext|>", unk_token="<unk>")
    tok.save_pretrained(d)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=16,
                         bos_token_id=vocab["<|startoftext|>"], eos_token_id=vocab["<|endoftext|>"], pad_token_id=1),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=IMG, patch_size=8),
        projection_dim=24,
    )
    torch.manual_seed(0)
    CLIPModel(cfg).eval().save_pretrained(d)
    clip_processor = _pil("CLIPImageProcessor")(size={"shortest_edge": IMG}, crop_size={"height": IMG, "width": IMG})
    clip_processor.save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def clip_export(clip_ckpt, tmp_path_factory) -> Path:
    return export("clip", clip_ckpt, tmp_path_factory.mktemp("clip_onnx"))


@pytest.fixture(scope="session")
def dino_ckpt(tmp_path_factory) -> Path:
    from transformers import ViTConfig, ViTModel

    d = tmp_path_factory.mktemp("dino")
    cfg = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    image_size=IMG, patch_size=8)
    torch.manual_seed(1)
    ViTModel(cfg, add_pooling_layer=False).eval().save_pretrained(d)
    _pil("ViTImageProcessor")(size={"height": IMG, "width": IMG}, image_mean=[0.485, 0.456, 0.406],
                         image_std=[0.229, 0.224, 0.225]).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def dino_export(dino_ckpt, tmp_path_factory) -> Path:
    return export("dino", dino_ckpt, tmp_path_factory.mktemp("dino_onnx"))


@pytest.fixture(scope="session")
def blip2_ckpt(tmp_path_factory) -> Path:
    from transformers import Blip2Config, Blip2ForConditionalGeneration

    d = tmp_path_factory.mktemp("blip2")
    tok, vocab = _word_tokenizer(["<unk>", "<pad>", "</s>"], "</s> $A", None,
                                 bos_token="</s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
    tok.save_pretrained(d)
    image_token = len(vocab)  # one past the words, as BLIP-2 appends its <image> token
    cfg = Blip2Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=IMG, patch_size=8),
        qformer_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                            encoder_hidden_size=32, vocab_size=64),
        text_config=dict(model_type="opt", vocab_size=len(vocab) + 1, hidden_size=32, num_hidden_layers=2,
                         ffn_dim=64, num_attention_heads=2, max_position_embeddings=64, word_embed_proj_dim=32,
                         bos_token_id=2, eos_token_id=2, pad_token_id=1),
        num_query_tokens=4,
        image_token_index=image_token,
    )
    torch.manual_seed(9)  # a seed whose greedy output is non-empty for one test image and EOS for the other
    Blip2ForConditionalGeneration(cfg).eval().save_pretrained(d)
    _pil("BlipImageProcessor")(size={"height": IMG, "width": IMG}).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def blip2_export(blip2_ckpt, tmp_path_factory) -> Path:
    return export("blip2", blip2_ckpt, tmp_path_factory.mktemp("blip2_onnx"))


def _bert_tokenizer(d: Path) -> dict[str, int]:
    tok, vocab = _word_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]"], "[CLS] $A [SEP]",
                                 "[CLS] $A [SEP] $B:1 [SEP]:1", pad_token="[PAD]", unk_token="[UNK]",
                                 cls_token="[CLS]", sep_token="[SEP]")
    tok.save_pretrained(d)
    return vocab


def _bert_config(vocab: dict[str, int], **kw):
    from transformers import BertConfig

    return BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=32, **kw)


@pytest.fixture(scope="session")
def cross_ckpt(tmp_path_factory) -> Path:
    from transformers import BertForSequenceClassification

    d = tmp_path_factory.mktemp("cross")
    vocab = _bert_tokenizer(d)
    torch.manual_seed(3)
    BertForSequenceClassification(_bert_config(vocab, num_labels=1)).eval().save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def sentence_ckpt(tmp_path_factory) -> Path:
    from transformers import BertModel

    d = tmp_path_factory.mktemp("sentence")
    vocab = _bert_tokenizer(d)
    torch.manual_seed(4)
    BertModel(_bert_config(vocab), add_pooling_layer=False).eval().save_pretrained(d)
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    return d


TEXTS = ["a chest x-ray", "the red cell stain", "a resistor circuit", "river field", "cat"]


# -- CLIP ----------------------------------------------------------------------------------

def test_clip_image_tower_matches_torch(clip_ckpt, clip_export):
    from transformers import CLIPModel

    images = _images(5)
    enc = OnnxClipImageEncoder(clip_export, prefer_cuda=False, batch_size=2)  # 3 chunks
    got = enc.encode(images)
    assert got.shape == (5, 24) and got.dtype == np.float32 and enc.dim == 24
    assert enc.provider == "CPUExecutionProvider"
    proc = _pil("CLIPImageProcessor").from_pretrained(clip_ckpt)
    pixels = proc(images=images, return_tensors="np")["pixel_values"]
    model = CLIPModel.from_pretrained(clip_ckpt).eval()
    with torch.no_grad():
        ref = model(pixel_values=torch.from_numpy(pixels), input_ids=torch.tensor([[0, 1]])).image_embeds.numpy()
    np.testing.assert_allclose(got, ref, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_clip_text_tower_matches_torch(clip_ckpt, clip_export):
    from transformers import AutoTokenizer, CLIPModel

    enc = OnnxClipTextEncoder(clip_export, prefer_cuda=False)
    got = enc.encode(TEXTS)
    tok = AutoTokenizer.from_pretrained(clip_ckpt)
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    model = CLIPModel.from_pretrained(clip_ckpt).eval()
    with torch.no_grad():
        ref = model(**batch, pixel_values=torch.zeros(1, 3, IMG, IMG)).text_embeds.numpy()
    np.testing.assert_allclose(got, ref, atol=1e-4)
    assert enc.dim == 24
    with pytest.raises(ValueError, match="list of strings"):
        enc.encode("a single string")
    # longer than the 16 positions of the tiny text tower: truncated, EOS kept, as HF truncates
    long_text = " ".join(["cat dog"] * 20)
    batch = tok([long_text], truncation=True, max_length=16, return_tensors="pt")
    assert batch["input_ids"][0, -1].item() == tok.eos_token_id
    with torch.no_grad():
        ref_long = model(**batch, pixel_values=torch.zeros(1, 3, IMG, IMG)).text_embeds.numpy()
    np.testing.assert_allclose(enc.encode([long_text]), ref_long, atol=1e-4)


# -- DINO ----------------------------------------------------------------------------------

def test_dino_cls_attention_matches_torch(dino_ckpt, dino_export):
    from transformers import ViTModel

    images = _images(3, seed=1)
    prop = OnnxDinoRegionProposer(dino_export, prefer_cuda=False)
    assert prop.grid == (IMG // 8, IMG // 8)
    got = prop.attention(images)
    vit_processor = _pil("ViTImageProcessor").from_pretrained(dino_ckpt)
    pixels = vit_processor(images=images, return_tensors="np")["pixel_values"]
    model = ViTModel.from_pretrained(dino_ckpt, attn_implementation="eager", add_pooling_layer=False).eval()
    with torch.no_grad():
        out = model(pixel_values=torch.from_numpy(pixels), output_attentions=True)
    ref = out.attentions[-1][:, :, 0, 1:].mean(1).reshape(3, IMG // 8, IMG // 8).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)
    one = prop.propose(images[0])
    assert one.shape == (4, 4) and one.dtype == np.float32
    np.testing.assert_allclose(one, ref[0], atol=1e-5)
    cls = prop.encode(images)
    ref_cls = out.last_hidden_state[:, 0].numpy()
    ref_cls /= np.linalg.norm(ref_cls, axis=1, keepdims=True)
    np.testing.assert_allclose(cls, ref_cls, atol=1e-4)


# -- BLIP-2 --------------------------------------------------------------------------------

def _hf_greedy(blip2_ckpt: Path, images, prompt_ids: list[int], max_new: int) -> list[list[int]]:
    from transformers import Blip2ForConditionalGeneration

    model = Blip2ForConditionalGeneration.from_pretrained(blip2_ckpt).eval()
    blip_processor = _pil("BlipImageProcessor").from_pretrained(blip2_ckpt)
    pixels = blip_processor(images=images, return_tensors="pt")["pixel_values"]
    ids = [model.config.image_token_index] * model.config.num_query_tokens + prompt_ids
    input_ids = torch.tensor([ids] * len(images))
    with torch.no_grad():
        out = model.generate(pixel_values=pixels, input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                             do_sample=False, num_beams=1, max_new_tokens=max_new)
    rows = []
    for row in out[:, len(ids):].tolist():
        new = []
        for t in row:
            if t == 2:  # EOS; generate pads with pad_token_id after it
                break
            new.append(t)
        rows.append(new)
    return rows


def test_blip2_greedy_tokens_equal_generate(blip2_ckpt, blip2_export):
    cap = OnnxBlip2Captioner(blip2_export, prefer_cuda=False)
    images = _images(2, seed=2)
    got = cap.generate_ids(images, None, max_new_tokens=6)
    assert got == _hf_greedy(blip2_ckpt, images, [2], 6)
    assert len(got[0]) == 6 and got[1] == []  # one row runs to the limit, one stops at EOS at once
    prompt = "the chest x-ray"
    got_p = cap.generate_ids(images, prompt, max_new_tokens=5)
    assert cap.prompt_ids(prompt)[0] == 2  # the tokenizer's BOS, as the BLIP-2 processor adds it
    assert got_p == _hf_greedy(blip2_ckpt, images, cap.prompt_ids(prompt), 5)
    text = cap.caption(images[0])
    assert isinstance(text, str)
    assert cap.hypotheses(None, "what is it?", 3) == []
    assert len(cap.hypotheses(images[0], "what is it?", 2)) <= 2
    assert set(cap.providers) == {"captioner.vision", "captioner.prefill", "captioner.step"}


# -- text models -----------------------------------------------------------------------------

def test_cross_encoder_matches_torch(cross_ckpt, tmp_path_factory):
    from transformers import AutoTokenizer, BertForSequenceClassification

    ce = OnnxCrossEncoder(export("cross-encoder", cross_ckpt, tmp_path_factory.mktemp("ce_onnx")),
                          prefer_cuda=False, batch_size=2)
    query = "chest x-ray nodule"
    got = ce.logits(query, TEXTS)
    tok = AutoTokenizer.from_pretrained(cross_ckpt)
    batch = tok([query] * len(TEXTS), TEXTS, padding=True, return_tensors="pt")
    model = BertForSequenceClassification.from_pretrained(cross_ckpt).eval()
    with torch.no_grad():
        ref = model(**batch).logits.numpy()
    np.testing.assert_allclose(got, ref, atol=1e-4)
    long_text = " ".join(["river field"] * 30)  # past the 32 positions: truncated, [SEP] kept
    batch = tok([query], [long_text], truncation=True, max_length=32, return_tensors="pt")
    with torch.no_grad():
        np.testing.assert_allclose(ce.logits(query, [long_text]), model(**batch).logits.numpy(), atol=1e-4)
    scores = ce.score(query, TEXTS)
    np.testing.assert_allclose(scores, 1 / (1 + np.exp(-ref[:, 0])), atol=1e-5)
    assert ce.score(query, []).shape == (0,)


def test_sentence_encoder_matches_torch(sentence_ckpt, tmp_path_factory):
    from transformers import AutoTokenizer, BertModel

    se = OnnxSentenceEncoder(export("sentence", sentence_ckpt, tmp_path_factory.mktemp("se_onnx")),
                             prefer_cuda=False)
    got = se.encode(TEXTS)
    tok = AutoTokenizer.from_pretrained(sentence_ckpt)
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    model = BertModel.from_pretrained(sentence_ckpt, add_pooling_layer=False).eval()
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    ref = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=1e-4)
    assert se.dim == 32


# -- fp16, manifests, errors --------------------------------------------------------------------

def test_fp16_exports_run_close_to_fp32(clip_ckpt, clip_export, dino_ckpt, dino_export, tmp_path_factory):
    images = _images(3, seed=5)
    c16 = OnnxClipImageEncoder(export("clip", clip_ckpt, tmp_path_factory.mktemp("clip16"), dtype="fp16"),
                               prefer_cuda=False)
    assert c16.manifest.dtype == "fp16"
    a, b = c16.encode(images), OnnxClipImageEncoder(clip_export, prefer_cuda=False).encode(images)
    assert np.min(np.sum(a * b, axis=1)) > 0.999  # cosine of fp16 vs fp32 features
    t16 = OnnxClipTextEncoder(c16.manifest, prefer_cuda=False).encode(TEXTS)
    t32 = OnnxClipTextEncoder(clip_export, prefer_cuda=False).encode(TEXTS)
    assert np.min(np.sum(t16 * t32, axis=1)) > 0.999
    d16 = OnnxDinoRegionProposer(export("dino", dino_ckpt, tmp_path_factory.mktemp("dino16"), dtype="fp16"),
                                 prefer_cuda=False)
    np.testing.assert_allclose(d16.attention(images), OnnxDinoRegionProposer(dino_export, prefer_cuda=False)
                               .attention(images), atol=2e-3)


def test_manifest_records_preprocessing_and_checksums(clip_export, tmp_path):
    import shutil

    m = load_manifest(clip_export)
    assert m.kind == "clip" and m.opset == 17 and m.dims["embed"] == 24
    assert m.preprocess is not None and m.preprocess.interpolation == "bicubic"
    assert m.preprocess.size == (IMG, IMG) and m.preprocess.crop == (IMG, IMG)
    assert set(m.files) >= {"vision", "text", "tokenizer"}
    assert all(len(f.sha256) == 64 for f in m.files.values())
    copy = tmp_path / "copy"
    shutil.copytree(Path(clip_export).parent, copy)
    assert load_manifest(copy).files == m.files
    with open(copy / "text.onnx", "r+b") as f:  # flip one byte
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ManifestError, match="checksum"):
        load_manifest(copy)
    (copy / "text.onnx").unlink()
    with pytest.raises(FileNotFoundError, match="text.onnx"):
        load_manifest(copy)
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        load_manifest(tmp_path / "nothing-here")


def test_export_refuses_bad_input_and_fetches_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="no network"):
        export("clip", "openai/clip-vit-large-patch14", tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="not found"):
        export("dino", tmp_path / "missing" / "dir", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        export("dino", tmp_path / "empty", tmp_path / "out")
    with pytest.raises(ValueError, match="unknown model kind"):
        export("resnet", tmp_path, tmp_path / "out")
    with pytest.raises(ValueError, match="dtype"):
        export("clip", tmp_path, tmp_path / "out", dtype="int4")


def test_query_path_does_not_import_torch(clip_export, dino_export):
    code = (
        "import sys, numpy as np\n"
        "from kira.models.onnx import OnnxClipImageEncoder, OnnxClipTextEncoder, OnnxDinoRegionProposer\n"
        f"img = OnnxClipImageEncoder({str(clip_export)!r}, prefer_cuda=False)\n"
        "v = img.encode([np.zeros((40, 40, 3), np.uint8)])\n"
        f"t = OnnxClipTextEncoder({str(clip_export)!r}, prefer_cuda=False).encode(['a cat'])\n"
        f"r = OnnxDinoRegionProposer({str(dino_export)!r}, prefer_cuda=False).propose(np.zeros((40, 40, 3), np.uint8))\n"
        "assert v.shape == (1, 24) and t.shape == (1, 24) and r.shape == (4, 4)\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'torch was imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# -- the CLI hook and load() ----------------------------------------------------------------------

def test_models_cli_export_and_inspect(dino_ckpt, tmp_path, capsys):
    import argparse

    from kira.models.cli import add_models_subcommands

    parser = argparse.ArgumentParser(prog="kira")
    add_models_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["models", "export", "dino", str(dino_ckpt), str(tmp_path / "dino"), "--dtype", "fp16"])
    assert args.func(args) == 0
    manifest = Path(capsys.readouterr().out.strip())
    assert manifest == tmp_path / "dino" / "kira-model.json" and load_manifest(manifest).dtype == "fp16"
    args = parser.parse_args(["models", "inspect", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "dino" in out and "checksums ok" in out and "grid_h=4" in out
    args = parser.parse_args(["models", "export", "clip", str(tmp_path / "nope"), str(tmp_path / "x")])
    assert args.func(args) == 1
    assert "not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["models", "export", "resnet", "a", "b"])


def test_load_builds_a_stack_from_exports(clip_export, dino_export, blip2_export, tmp_path):
    import shutil

    stack_mod = pytest.importorskip("kira.models.stack")
    from kira.models.loading import load

    root = tmp_path / "models"
    for name, manifest in (("clip", clip_export), ("dino", dino_export), ("blip2", blip2_export)):
        shutil.copytree(Path(manifest).parent, root / name)
    stack = load(root, prefer_cuda=False)
    assert isinstance(stack, stack_mod.ModelStack)
    assert isinstance(stack.image, OnnxClipImageEncoder) and isinstance(stack.image_text, OnnxClipTextEncoder)
    assert isinstance(stack.regions, OnnxDinoRegionProposer) and isinstance(stack.captioner, OnnxBlip2Captioner)
    assert stack.providers["image"] == "CPUExecutionProvider" and stack.providers["regions"] == "CPUExecutionProvider"
    notes = " ".join(stack.notes)
    assert "reranker" in notes and "sentence" in notes and "CLIP" not in notes
    default = stack_mod.load_default()
    assert type(stack.text) is type(default.text)  # not exported: the default's sentence encoder
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="kira-model.json"):
        load(empty)


def test_external_data_is_gathered_into_one_file(tmp_path, monkeypatch):
    """A > 2 GB model leaves the TorchScript exporter with one file per tensor; export_graph
    gathers them into <graph>.onnx.data. Simulated on a small module by re-saving that way."""
    import onnx
    import onnxruntime as ort

    from kira.models.exporters._common import collect_files, export_graph

    real_export = torch.onnx.export

    def export_like_a_big_model(module, args, f, **kw):
        real_export(module, args, f, **kw)
        onnx.save_model(onnx.load(f), f, save_as_external_data=True, all_tensors_to_one_file=False,
                        size_threshold=0)

    monkeypatch.setattr(torch.onnx, "export", export_like_a_big_model)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 4))  # > 1 KiB
    x = torch.randn(3, 64)
    path = export_graph(module, (x,), tmp_path / "graph.onnx", input_names=["x"], output_names=["y"],
                        dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.onnx", "graph.onnx.data"]
    got = ort.InferenceSession(str(path)).run(None, {"x": x.numpy()})[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, module(x).numpy(), atol=1e-6)
    assert set(collect_files(tmp_path, {"model": path})) == {"model", "external:graph.onnx.data"}


def test_onnx_stack_runs_through_the_pipeline(clip_export, dino_export, blip2_export, cross_ckpt, tmp_path):
    """The exported models behind every seam: ingest, then an image + text question, end to end."""
    import shutil

    from kira.knowledge_base import KnowledgeBase
    from kira.models.loading import load
    from kira.pipeline import Kira

    root = tmp_path / "models"
    for name, manifest in (("clip", clip_export), ("dino", dino_export), ("blip2", blip2_export)):
        shutil.copytree(Path(manifest).parent, root / name)
    export("cross-encoder", cross_ckpt, root / "rerank")
    stack = load(root, prefer_cuda=False)
    images = _images(4, seed=3)
    with KnowledgeBase.create(tmp_path / "kb", models=stack) as kb:
        for i, image in enumerate(images):
            kb.add_image(image, doc_id=f"img{i}", caption=f"a chest x-ray {WORDS[i]}", tags=["x-ray"])
        kb.commit()
    with KnowledgeBase.open(tmp_path / "kb", models=stack) as kb:
        result = Kira(kb, models=stack).ask("what does the chest x-ray show?", image=images[1], top_k=3)
    # the query image is img1 itself, so img1 is the subject and the rest are similar cases
    assert {e.doc_id for e in result.evidence.items} == {"img1"}
    assert {e.doc_id for e in result.evidence.similar} <= {f"img{i}" for i in range(4)} - {"img1"}
    assert any("rerank" in e.paths for e in (*result.evidence.items, *result.evidence.similar))
    assert all(set(c.citations) <= {e.number for e in result.evidence.items} for c in result.answer.claims)
    assert set(result.answer.citations) <= {e.number for e in (*result.evidence.items, *result.evidence.similar)}
