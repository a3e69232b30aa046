"""GPU check: kira's ONNX towers on onnxruntime's CUDA provider against torch eager.

    python -m benchmarks.peers.gpu_check                 # full size, on a GPU machine (< 8 minutes)
    python -m benchmarks.peers.gpu_check --tiny --cpu    # tiny towers on CPU: tests the script (< 1 minute)

It prints the execution providers this machine's onnxruntime offers, then builds
random-weight towers at full size (CLIP ViT-L/14 vision tower with its 768-d projection;
DINO ViT-S/8 with the CLS attention output), exports them with kira's exporter code
(TorchScript exporter, fp16 weights on CUDA) and measures images/s at batch 1 and 64:
onnxruntime CUDA (IO binding, inputs already on the device) against torch eager fp16 on
the same GPU. Where onnxruntime has no CUDA provider it says so and measures torch
eager against torch.compile (CUDA graphs, mode="reduce-overhead") instead. With
--decoder (on by default at full size) it also measures an OPT-2.7B-sized decoder (the
BLIP-2 language model) in greedy decoding with a KV cache, tokens/s. The result is a
markdown table ready for benchmarks/RESULTS.md. Random weights: speed only, no quality.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class Row:
    model: str
    batch: int
    engine: str
    precision: str
    rate: float  # images/s or tokens/s
    unit: str
    baseline: float | None = None  # the torch eager rate of the same model and batch

    def markdown(self) -> str:
        ratio = f"{self.rate / self.baseline:.2f}x" if self.baseline else "1.00x"
        return (f"| {self.model} | {self.batch} | {self.engine} | {self.precision} | "
                f"{self.rate:,.1f} {self.unit} | {ratio} |")


def _configs(tiny: bool) -> dict[str, Any]:
    from transformers import CLIPVisionConfig, OPTConfig, ViTConfig

    if tiny:
        return {
            "clip": CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, image_size=56, patch_size=14, projection_dim=32),
            "dino": ViTConfig(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                              image_size=56, patch_size=8),
            "opt": OPTConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, ffn_dim=128,
                             num_attention_heads=4, max_position_embeddings=256, word_embed_proj_dim=64),
        }
    return {
        # openai/clip-vit-large-patch14 vision tower: 24 x 1024, patch 14 at 224 px, 768-d projection
        "clip": CLIPVisionConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                                 num_attention_heads=16, image_size=224, patch_size=14, projection_dim=768),
        # facebook/dino-vits8: 12 x 384, 6 heads, patch 8 at 224 px (784 patches)
        "dino": ViTConfig(hidden_size=384, intermediate_size=1536, num_hidden_layers=12, num_attention_heads=6,
                          image_size=224, patch_size=8),
        # facebook/opt-2.7b (BLIP-2's language model): 32 x 2560, 32 heads
        "opt": OPTConfig(vocab_size=50272, hidden_size=2560, num_hidden_layers=32, ffn_dim=10240,
                         num_attention_heads=32, max_position_embeddings=2048, word_embed_proj_dim=2560),
    }


def _towers(torch: Any, cfgs: dict[str, Any], dtype: Any, device: str) -> dict[str, Any]:
    from transformers import CLIPVisionModelWithProjection, ViTModel

    torch.manual_seed(0)
    with torch.device(device):
        clip = CLIPVisionModelWithProjection._from_config(cfgs["clip"], attn_implementation="eager", dtype=dtype)
        dino = ViTModel._from_config(cfgs["dino"], attn_implementation="eager", add_pooling_layer=False, dtype=dtype)

    class Clip(torch.nn.Module):  # what kira's CLIP exporter traces: pixels -> projected embedding
        def __init__(self) -> None:
            super().__init__()
            self.m = clip

        def forward(self, pixel_values):  # type: ignore[no-untyped-def]
            return self.m(pixel_values=pixel_values.to(dtype)).image_embeds.float()

    class Dino(torch.nn.Module):  # what kira's DINO exporter traces: CLS + last-layer CLS attention
        def __init__(self) -> None:
            super().__init__()
            self.m = dino

        def forward(self, pixel_values):  # type: ignore[no-untyped-def]
            o = self.m(pixel_values=pixel_values.to(dtype), output_attentions=True)
            return o.last_hidden_state[:, 0].float(), o.attentions[-1][:, :, 0, 1:].float()

    return {
        f"CLIP ViT-L/14 vision{' (tiny)' if cfgs['clip'].hidden_size < 1024 else ''}": (Clip().to(device, dtype).eval(), cfgs["clip"].image_size),
        f"DINO ViT-S/8{' (tiny)' if cfgs['dino'].hidden_size < 384 else ''}": (Dino().to(device, dtype).eval(), cfgs["dino"].image_size),
    }


def _time(fn: Callable[[], Any], sync: Callable[[], None], *, min_seconds: float, warmup: int = 3) -> float:
    """Seconds per call of fn, after warm-up, over at least min_seconds (and at least 3 calls)."""
    for _ in range(warmup):
        fn()
    sync()
    calls, start = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < min_seconds:
        fn()
        calls += 1
    sync()
    return (time.perf_counter() - start) / calls


def _ort_runner(path: Path, x: np.ndarray, cuda: bool, threads: int | None) -> Callable[[], Any]:
    import onnxruntime as ort

    from kira.models.runtime import open_session

    sess = open_session(path, prefer_cuda=cuda, threads=threads)
    if cuda and sess.provider != "CUDAExecutionProvider":
        raise RuntimeError(f"asked for CUDA, onnxruntime gave {sess.provider}")
    s = sess.session
    if not cuda:
        return lambda: s.run(None, {"pixel_values": x})
    x_dev = ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    binding = s.io_binding()
    binding.bind_ortvalue_input("pixel_values", x_dev)
    for out in s.get_outputs():
        binding.bind_output(out.name, "cuda")

    def go() -> None:
        s.run_with_iobinding(binding)

    return go


def _export(module: Any, size: int, path: Path, device: str, outputs: list[str]) -> Path:
    import torch

    from kira.models.exporters._common import export_graph

    return export_graph(
        module, (torch.zeros(2, 3, size, size, device=device),), path, input_names=["pixel_values"],
        output_names=outputs, dynamic_axes={"pixel_values": {0: "batch"}, **{o: {0: "batch"} for o in outputs}},
    )


def towers(args: argparse.Namespace, ort_cuda: bool, torch_cuda: bool, work: Path) -> list[Row]:
    import torch

    device = "cuda" if torch_cuda else "cpu"
    dtype = torch.float16 if torch_cuda else torch.float32
    precision = "fp16" if torch_cuda else "fp32"
    sync = torch.cuda.synchronize if torch_cuda else (lambda: None)
    rows: list[Row] = []
    for name, (module, size) in _towers(torch, _configs(args.tiny), dtype, device).items():
        if name.split()[0].lower() not in args.models:
            continue
        outputs = ["cls_embedding", "cls_attention"] if name.startswith("DINO") else ["image_embeds"]
        onnx_path = None
        if ort_cuda or not torch_cuda:
            t0 = time.perf_counter()
            onnx_path = _export(module, size, work / f"{name.split()[0].lower()}.onnx", device, outputs)
            print(f"  exported {name} in {time.perf_counter() - t0:.1f} s ({onnx_path.stat().st_size / 1e6:.0f} MB)",
                  file=sys.stderr)
        compiled = None
        if torch_cuda and not ort_cuda:
            compiled = torch.compile(module, mode="reduce-overhead")
        for batch in args.batches:
            x = torch.randn(batch, 3, size, size, device=device)
            with torch.inference_mode():
                eager = _time(lambda: module(x), sync, min_seconds=args.seconds)
            base = batch / eager
            rows.append(Row(name, batch, f"torch eager ({device})", precision, base, "img/s"))
            if onnx_path is not None:
                run = _ort_runner(onnx_path, x.float().cpu().numpy(), ort_cuda, args.threads)
                t = _time(run, lambda: None, min_seconds=args.seconds)
                engine = "onnxruntime CUDA (IO binding)" if ort_cuda else "onnxruntime CPU"
                rows.append(Row(name, batch, engine, precision, batch / t, "img/s", base))
            if compiled is not None:
                with torch.inference_mode():
                    t = _time(lambda: compiled(x), sync, min_seconds=args.seconds, warmup=5)
                rows.append(Row(name, batch, "torch.compile reduce-overhead (CUDA graphs)", precision, batch / t,
                                "img/s", base))
            for row in rows[-3:]:
                if row.model == name and row.batch == batch:
                    print("  " + row.markdown(), file=sys.stderr)
        del module, compiled
        if torch_cuda:
            torch.cuda.empty_cache()
    return rows


def decoder(args: argparse.Namespace, ort_cuda: bool, torch_cuda: bool, work: Path) -> list[Row]:
    """Greedy decoding tokens/s of an OPT decoder with a KV cache: torch eager vs onnxruntime."""
    import torch
    from transformers import OPTForCausalLM
    from transformers.cache_utils import DynamicCache

    from kira.models.exporters._common import cache_keyword, export_graph

    device = "cuda" if torch_cuda else "cpu"
    dtype = torch.float16 if torch_cuda else torch.float32
    precision = "fp16" if torch_cuda else "fp32"
    cfg = _configs(args.tiny)["opt"]
    torch.manual_seed(0)
    with torch.device(device):  # initialise 2.7B random weights on the GPU, not the CPU
        lm = OPTForCausalLM._from_config(cfg, attn_implementation="eager", dtype=dtype).eval()
    layers = cfg.num_hidden_layers
    kv_arg = cache_keyword(lm)
    prompt, new = 36, args.new_tokens  # 32 query embeddings + a short prompt, as BLIP-2 sees it
    ids = torch.randint(4, cfg.vocab_size, (1, prompt), device=device)
    name = f"OPT-2.7B decoder{' (tiny)' if args.tiny else ''}"
    sync = torch.cuda.synchronize if torch_cuda else (lambda: None)

    def flat(cache: Any) -> tuple[Any, ...]:
        out: list[Any] = []
        for layer in cache.layers:
            out += [layer.keys, layer.values]
        return tuple(out)

    # the prefill is one call; both engines are timed on the per-token loop after it
    with torch.inference_mode():
        first = lm(input_ids=ids, use_cache=True, **{kv_arg: DynamicCache()})
    kv0 = [t.clone() for t in flat(first.past_key_values)]

    def torch_decode() -> None:
        with torch.inference_mode():
            cache = DynamicCache([(kv0[2 * i].clone(), kv0[2 * i + 1].clone()) for i in range(layers)])
            tok = ids[:, :1]
            for _ in range(new - 1):
                o = lm(input_ids=tok, use_cache=True, **{kv_arg: cache})
                cache, tok = o.past_key_values, o.logits[:, -1].argmax(-1, keepdim=True)

    eager = (new - 1) / _time(torch_decode, sync, min_seconds=args.seconds, warmup=1)
    rows = [Row(name, 1, f"torch eager ({device}), KV cache", precision, eager, "tok/s")]
    if not (ort_cuda or not torch_cuda):
        return rows
    present = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    past = [f"past.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = lm

        def forward(self, input_ids, attention_mask, *kv):  # type: ignore[no-untyped-def]
            cache = DynamicCache([(kv[2 * i], kv[2 * i + 1]) for i in range(layers)])
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=True, **{kv_arg: cache})
            return (o.logits[:, -1].float(),) + flat(o.past_key_values)

    t0 = time.perf_counter()
    step_path = export_graph(
        Step(), (ids[:, :1], torch.ones(1, prompt + 1, dtype=torch.long, device=device), *kv0), work / "step.onnx",
        input_names=["input_ids", "attention_mask", *past], output_names=["logits", *present],
        dynamic_axes={"attention_mask": {1: "total"}, **{n: {2: "past"} for n in past},
                      **{n: {2: "total"} for n in present}},
    )
    print(f"  exported {name} step graph in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    import onnxruntime as ort

    from kira.models.runtime import open_session

    sess = open_session(step_path, prefer_cuda=ort_cuda, threads=args.threads).session
    kv_np = [t.float().cpu().numpy().astype(np.float16 if torch_cuda else np.float32) for t in kv0]

    def ort_decode() -> None:
        tok = np.zeros((1, 1), np.int64)
        if ort_cuda:
            values = [ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0) for v in kv_np]
        else:
            values = kv_np
        for i in range(new - 1):
            mask = np.ones((1, prompt + i + 1), np.int64)
            if ort_cuda:
                b = sess.io_binding()
                b.bind_cpu_input("input_ids", tok)
                b.bind_cpu_input("attention_mask", mask)
                for n_, v in zip(past, values):
                    b.bind_ortvalue_input(n_, v)
                b.bind_output("logits")
                for n_ in present:
                    b.bind_output(n_, "cuda")
                sess.run_with_iobinding(b)
                outs = b.get_outputs()
                logits, values = outs[0].numpy(), outs[1:]
            else:
                logits, *values = sess.run(None, {"input_ids": tok, "attention_mask": mask,
                                                  **dict(zip(past, values))})
            tok = logits.argmax(-1).astype(np.int64)[:, None]

    t = _time(ort_decode, lambda: None, min_seconds=args.seconds, warmup=1)
    engine = "onnxruntime CUDA (IO binding), KV cache" if ort_cuda else "onnxruntime CPU, KV cache"
    rows.append(Row(name, 1, engine, precision, (new - 1) / t, "tok/s", eager))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny towers (tests the script)")
    parser.add_argument("--cpu", action="store_true", help="run on CPU even if a GPU is present")
    parser.add_argument("--batches", type=int, nargs="+", default=None, help="batch sizes (default 1 64)")
    parser.add_argument("--seconds", type=float, default=None, help="minimum timing per measurement")
    parser.add_argument("--decoder", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure the OPT-2.7B-sized decoder (default on)")
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens per greedy decode")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for both torch and onnxruntime (default: each library's own)")
    parser.add_argument("--models", nargs="+", choices=("clip", "dino"), default=["clip", "dino"],
                        help="which towers to measure (default both)")
    args = parser.parse_args(argv)
    args.batches = args.batches or ([1, 8] if args.tiny else [1, 64])
    args.seconds = args.seconds if args.seconds is not None else (0.2 if args.tiny else 3.0)

    import onnxruntime as ort
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    providers = ort.get_available_providers()
    print(f"onnxruntime {ort.__version__} execution providers: {', '.join(providers)}")
    torch_cuda = torch.cuda.is_available() and not args.cpu
    ort_cuda = torch_cuda and "CUDAExecutionProvider" in providers
    if torch_cuda:
        print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
        if not ort_cuda:
            print("onnxruntime has no CUDAExecutionProvider here (install onnxruntime-gpu); measuring torch eager "
                  "against torch.compile (CUDA graphs) instead")
    else:
        print(f"no GPU in use (--cpu or none found); torch eager vs onnxruntime CPU, fp32, on {platform.processor() or platform.machine()}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kira-gpu-check-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        rows += towers(args, ort_cuda, torch_cuda, work)
        if args.decoder:
            rows += decoder(args, ort_cuda, torch_cuda, work)
        took = time.perf_counter() - start
    print()
    print("| model | batch | engine | precision | throughput | vs torch eager |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row.markdown())
    print(f"\n(random weights; total {took:.0f} s; command: python -m benchmarks.peers.gpu_check {' '.join(sys.argv[1:] if argv is None else argv)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
