"""What one text ask costs on a knowledge base of real photos, stage by stage, cold and warm.

Asks 20 text questions twice over an existing knowledge base (e.g. the one
`benchmarks/load_serve.py --build 400 --kb DIR` leaves behind): the first round meets
every piece of evidence for the first time (the critic and the verifier encode what they
have not seen), the second finds it cached. Prints p50 milliseconds per stage.

Usage: python benchmarks/ask_cost.py KB_DIR [--variant full]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

QUESTIONS = ("a cat", "a rocket launch", "coffee cup", "coins on a table", "the moon", "printed text page",
             "a flower", "galaxies", "a man with a camera", "brick wall", "gravel", "grass field", "an eye",
             "stained tissue", "a building roof", "space suit", "handwriting", "a clock", "a single cell", "dark spots")


def main() -> None:
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kb")
    parser.add_argument("--variant", default="full")
    args = parser.parse_args()
    kb = KnowledgeBase.open(args.kb, read_only=True)
    kira = Kira(kb)
    kira.warm()
    print(f"{len(kb)} documents, {sum(kb.stats()['chunks'].values())} chunks; variant {args.variant}")
    for label in ("cold (evidence seen for the first time)", "warm (the same questions again)"):
        totals, stages = [], {}
        for question in QUESTIONS:
            start = time.perf_counter()
            result = kira.ask(question, variant=args.variant)
            totals.append((time.perf_counter() - start) * 1000)
            for stage, ms in result.timings.items():
                stages.setdefault(stage, []).append(ms)
        parts = ", ".join(f"{s} {np.median(v):.1f}" for s, v in stages.items() if s != "total" and np.median(v) >= 0.5)
        print(f"{label}: p50 {np.median(totals):.1f} ms ({parts})")
    kb.close()


if __name__ == "__main__":
    main()
