"""The template generator against the bundled language model (SmolLM2 via llama.cpp) on real photos.

Corpus: the 20 scikit-image / scikit-learn photos of benchmarks/suites/real_photos.py, with their
one-line captions and without. Questions: the first `--questions` (10) of real_photos.QUESTIONS.
Both generators answer from the same evidence (one `Kira.ask` per question and generator, the
`--variant`, default full). Per generator and corpus it prints:

- names what the evidence shows: the answer holds a content word of what its first evidence item
  shows (caption, or classifier label), or it abstains saying nothing matches;
- bare field / statistic: the answer holds a field name used as a claim ("Labels [Evidence 1]") or
  a describer statistic ("54%", "salient region", "(600x400");
- invalid citations: claims that cited evidence the pack does not hold;
- grounded claims: the share of claims the verifier did not flag;
- s/answer: the generator's own time (the ask's "generate" stage), mean.

With --show, every answer side by side. Usage:
    python -m benchmarks.studies.compare_generators [--questions 10] [--variant full] [--show]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.suites.real_photos import CAPTIONS, QUESTIONS, photos

BARE = re.compile(r"(?:^|[.;]\s*)(?:labels?|tags?|text|caption)\s*\[Evidence|\d+%|salient region|\(\d+x\d+", re.I)


def score(result) -> dict[str, float]:
    from kira.reasoning.shown import shown
    from kira.text.tokens import content_tokens, stem

    answer = result.answer
    text = answer.plain_text.lower()
    items = result.evidence.items
    first = shown(items[0]).content_text() if items else ""
    said = {stem(t) for t in content_tokens(text)}
    names = answer.abstained or bool(said & {stem(t) for t in content_tokens(first)})
    claims = answer.claims
    return {
        "names": float(names),
        "bare": float(bool(BARE.search(answer.text))),
        "invalid": float(sum(bool(c.invalid_citations) for c in claims)),
        "grounded": float(np.mean([not c.hallucination_risk for c in claims])) if claims else float("nan"),
        "seconds": result.timings.get("generate", 0.0) / 1000.0,
    }


def main() -> None:
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira
    from kira.reasoning.lm_generator import LanguageModelGenerator

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--variant", default="full")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    images = photos()
    questions = list(QUESTIONS.values())[: args.questions]
    lm = LanguageModelGenerator.from_gguf()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for captioned in (True, False):
            kb = KnowledgeBase.create(Path(tmp) / f"kb-{captioned}")
            for name, image in images.items():
                kb.add_image(image, doc_id=name, caption=CAPTIONS[name] if captioned else None)
            kb.commit()
            corpus = "captioned" if captioned else "uncaptioned"
            for label, kira in (("template", Kira(kb)), ("lm", Kira(kb, generator=lm))):
                scores = []
                for q in questions:
                    result = kira.ask(q, variant=args.variant, top_k=3)
                    scores.append(score(result))
                    if args.show:
                        print(f"[{corpus} {label}] {q!r}: {result.answer.text}")
                mean = {k: float(np.nanmean([s[k] for s in scores])) for k in scores[0]}
                rows.append((corpus, label, mean))
            kb.close()
    print(f"\n{len(questions)} questions x 20 real photos, variant {args.variant}")
    print("| corpus | generator | names what the evidence shows | bare field / statistic | invalid citations "
          "per answer | grounded claims | s/answer |")
    print("|---|---|---|---|---|---|---|")
    for corpus, label, m in rows:
        print(f"| {corpus} | {label} | {m['names']:.2f} | {m['bare']:.2f} | {m['invalid']:.2f} | "
              f"{m['grounded']:.2f} | {m['seconds']:.2f} |")


if __name__ == "__main__":
    main()
