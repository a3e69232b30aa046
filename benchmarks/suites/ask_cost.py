"""What one text ask costs on a knowledge base of real photos, stage by stage, cold and warm.

Asks 20 text questions twice over an existing knowledge base (e.g. the one
`benchmarks/suites/load_serve.py --build 400 --kb DIR` leaves behind): the first round meets
every piece of evidence for the first time (whatever the critic and the verifier must
encode that the knowledge base does not store, they encode then), the second finds the
same questions again. Prints p50 milliseconds per stage and of the whole ask.

--check also re-scores every answer with a fresh verifier (every evidence piece encoded
now, nothing read from the knowledge base) and every critic decision with a fresh critic
(question and evidence encoded now), and prints the largest difference: what stored
vectors change in the outputs (nothing, up to float rounding).

Wall time on a shared machine moves with its load; the CPU time of the process per ask
(all its threads) moves less, and is printed beside it.

--ingest-cost N instead adds N photographs (as `load_serve.py --build` makes them) to two new
knowledge bases, one as kira does and one with the text-pieces step left out, and prints
what encoding the pieces at ingest costs.

Usage: python -m benchmarks.suites.ask_cost KB_DIR [--variant full] [--threads N] [--no-thumbnails] [--check]
       [--out FILE.json]
       python -m benchmarks.suites.ask_cost --ingest-cost 40 [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

QUESTIONS = ("a cat", "a rocket launch", "coffee cup", "coins on a table", "the moon", "printed text page",
             "a flower", "galaxies", "a man with a camera", "brick wall", "gravel", "grass field", "an eye",
             "stained tissue", "a building roof", "space suit", "handwriting", "a clock", "a single cell", "dark spots")


def _differences(kira, result) -> tuple[float, float]:
    """(largest |claim grounding difference|, largest |critic probability difference|) against fresh models."""
    from kira.reasoning import GroundingVerifier, SimilarityCritic

    fresh = GroundingVerifier(kira.models.text, kira.config.grounding).verify(result.answer, result.evidence)
    grounding = max((abs(a.grounding - b.grounding) for a, b in zip(result.answer.claims, fresh.claims)), default=0.0)
    critic = 0.0
    if isinstance(kira.critic, SimilarityCritic) and result.card.critic:
        items = (*result.evidence.items, *result.evidence.dropped)
        mine = kira.critic.probabilities(result.question or "", items, question_vector=kira.models.text.encode(
            [result.question])[0])
        theirs = SimilarityCritic(kira.models.text, kira.config.grounding).probabilities(result.question or "", items)
        critic = max((abs(a - b) for a, b in zip(mine, theirs)), default=0.0)
    return grounding, critic


def ingest_cost(n: int, models) -> None:
    """Add `n` photographs to a new knowledge base with and without the text pieces; print the time."""
    import tempfile
    from pathlib import Path

    import dataclasses

    from kira.config import KiraConfig

    from benchmarks.suites import load_serve

    full = KiraConfig()
    left_out = dataclasses.replace(full, grounding=dataclasses.replace(full.grounding, pieces_at_ingest=False))
    for label, config in (("without text pieces", left_out), ("with text pieces", full)):
        with tempfile.TemporaryDirectory() as tmp:
            start, start_cpu = time.perf_counter(), time.process_time()
            load_serve.build(Path(tmp) / "kb", n, models=models, config=config)
            wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
            size = (Path(tmp) / "kb" / "kira.sqlite").stat().st_size
        print(f"{label}: {n} documents in {wall:.1f} s wall, {cpu:.1f} s CPU, database {size / 1e6:.1f} MB "
              f"(load average {os.getloadavg()[0]:.2f})")


def main() -> None:
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kb", nargs="?")
    parser.add_argument("--ingest-cost", type=int, default=0, metavar="N",
                        help="measure what the text pieces cost at ingest over N documents instead")
    parser.add_argument("--variant", default="full")
    parser.add_argument("--threads", type=int, default=None,
                        help="onnxruntime threads per model and BLAS threads, as `kira serve --model-threads` sets "
                             "them (default: their own)")
    parser.add_argument("--no-thumbnails", action="store_true",
                        help="evidence without decoded thumbnails (as kira serve asks unless card=html)")
    parser.add_argument("--check", action="store_true", help="compare grounding and critic with fresh encodings")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    models = None
    if args.threads is not None:
        from kira.serve.readers import load_models

        models = load_models(None, args.threads)
    if args.ingest_cost:
        ingest_cost(args.ingest_cost, models)
        return
    if not args.kb:
        parser.error("give a knowledge base directory (or --ingest-cost N)")
    kb = KnowledgeBase.open(args.kb, read_only=True, **({"models": models} if models is not None else {}))
    kira = Kira(kb)
    kira.warm()
    chunks = sum(kb.stats()["chunks"].values())
    schema = kb.store.schema_version()
    print(f"{len(kb)} documents, {chunks} chunks, schema {schema}; variant {args.variant}; "
          f"threads {args.threads or 'default'}; thumbnails {not args.no_thumbnails}; "
          f"load average {os.getloadavg()[0]:.2f}")
    report: dict = {"documents": len(kb), "chunks": chunks, "schema": schema, "variant": args.variant,
                    "threads": args.threads, "thumbnails": not args.no_thumbnails, "rounds": {}}
    worst = [0.0, 0.0]
    for label in ("cold", "warm"):
        totals, cpu, stages = [], [], {}
        for question in QUESTIONS:
            start, start_cpu = time.perf_counter(), time.process_time()
            result = kira.ask(question, variant=args.variant, thumbnails=not args.no_thumbnails)
            totals.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)
            for stage, ms in result.timings.items():
                stages.setdefault(stage, []).append(ms)
            if args.check and label == "cold":
                worst = [max(w, d) for w, d in zip(worst, _differences(kira, result))]
        p50 = {s: float(np.median(v)) for s, v in stages.items() if s != "total"}
        report["rounds"][label] = {"p50_ms": float(np.median(totals)), "p90_ms": float(np.percentile(totals, 90)),
                                   "cpu_p50_ms": float(np.median(cpu)), "stages_p50_ms": p50}
        parts = ", ".join(f"{s} {ms:.1f}" for s, ms in p50.items() if ms >= 0.5)
        what = "evidence seen for the first time" if label == "cold" else "the same questions again"
        print(f"{label} ({what}): p50 {np.median(totals):.1f} ms, p90 {np.percentile(totals, 90):.1f} ms, "
              f"CPU p50 {np.median(cpu):.1f} ms ({parts})")
    if args.check:
        report["max_difference"] = {"claim_grounding": worst[0], "critic_probability": worst[1]}
        print(f"stored vs fresh encodings, largest difference: claim grounding {worst[0]:.2e}, "
              f"critic P(relevant) {worst[1]:.2e}")
    report["load_average"] = os.getloadavg()[0]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    kb.close()


if __name__ == "__main__":
    main()
