"""Calibration of kira.reasoning.relevance on real photos: abstention on absent concepts, none on present ones.

Corpus: the 20 scikit-image / scikit-learn photos of benchmarks/real_photos.py (no DomainVQA-R),
ingested with and without their one-line captions, under every shipped image encoder
("pixel", "mobilenet_v2", "efficientnet_lite0", "fused"). Questions: the 20 paraphrased
questions of real_photos.py, each about one photo (PRESENT), and `ABSENT`, concepts none of the
photos shows. For each (encoder, corpus, question) the full pipeline answers; the script records
the relevance verdict (kira.reasoning.relevance: the best evidence item's standout z) and prints

- abstention on absent questions (goal >= 0.8) and false abstention on present ones (goal <= 0.1):
  how often the full pipeline's answer abstained (``answer.abstained``);
- the same two rates from the best item's z alone at other thresholds (a question naming a document
  counts as answered), so the choice of ABSTAIN_Z can be checked.

A present question about an uncaptioned photo whose classifier label does not name it ("a space
launch vehicle" for a photo labelled 'obelisk') has nothing recorded that answers it: abstaining
there is the honest answer, and the uncaptioned rows show how often that happens.

Usage: python benchmarks/calibrate_relevance.py [--encoders pixel,mobilenet_v2,efficientnet_lite0,fused]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.suites.real_photos import CAPTIONS, QUESTIONS, photos

ABSENT = (
    "a bicycle", "a snowy mountain", "a sailing boat", "a pizza", "a guitar", "a dog playing in a park",
    "an aeroplane in the sky", "a bridge over a river", "a football match", "a birthday cake", "a traffic jam",
    "a violin", "a beach with palm trees", "a red sports car",
)
THRESHOLDS = (1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


def standouts(kira, question: str) -> tuple[float, bool, str, float, bool]:
    """(the best evidence item's z, whether it holds every question word, the answer, seconds, whether the answer
    abstained) of one ask. z is +inf where the question has nothing to measure (it names a document, as "what does
    the biological cell look like?" names 'cell'): such a question is answered by construction, never abstained on."""
    from kira.reasoning.relevance import RelevanceJudge

    t0 = time.perf_counter()
    result = kira.ask(question, top_k=5)
    seconds = time.perf_counter() - t0
    verdict = RelevanceJudge(kira.models.text).judge(question, result.evidence)
    if verdict.score is None:
        z = float("inf")
    else:
        z = float("-inf") if verdict.standout is None else verdict.standout
    return z, verdict.lexical, result.answer.text, seconds, bool(result.answer.abstained)


def main() -> None:
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default
    from kira.pipeline import Kira
    from kira.reasoning.relevance import ABSTAIN_Z

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoders", default="pixel,mobilenet_v2,efficientnet_lite0,fused")
    parser.add_argument("--show", action="store_true", help="print every answer")
    args = parser.parse_args()
    images = photos()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for encoder in [e for e in args.encoders.split(",") if e]:
            models = load_default(image_encoder=encoder)
            for captioned in (True, False):
                kb = KnowledgeBase.create(Path(tmp) / f"{encoder}-{captioned}", models=models)
                for name, image in images.items():
                    kb.add_image(image, doc_id=name, caption=CAPTIONS[name] if captioned else None)
                kb.commit()
                kira = Kira(kb)
                present = [standouts(kira, q) for q in QUESTIONS.values()]
                absent = [standouts(kira, q) for q in ABSENT]
                if args.show:
                    for q, (z, lex, text, _, _) in zip([*QUESTIONS.values(), *ABSENT], present + absent):
                        print(f"  [{encoder} {'cap' if captioned else 'raw'}] z={z:5.2f} lex={lex:d} {q!r}: {text}")
                rows.append((encoder, "captioned" if captioned else "uncaptioned", present, absent))
                kb.close()
    print(f"\nrelevance calibration: {len(QUESTIONS)} present, {len(ABSENT)} absent questions, "
          f"{len(images)} real photos; ABSTAIN_Z = {ABSTAIN_Z}")
    print("| encoder | corpus | abstained on absent | abstained on present | "
          + " | ".join(f"z={t}: abs/false" for t in THRESHOLDS) + " | s/ask |")
    print("|---|---|---|---|" + "---|" * len(THRESHOLDS) + "---|")
    for encoder, corpus, present, absent in rows:
        def rates(t: float) -> tuple[float, float]:
            abstain_absent = np.mean([not (lex or z >= t) for z, lex, *_ in absent])
            false_present = np.mean([not (lex or z >= t) for z, lex, *_ in present])
            return float(abstain_absent), float(false_present)
        # what the library did (the pipeline's own verdict, with its label rules), then the sweep of z alone
        a, f = float(np.mean([r[4] for r in absent])), float(np.mean([r[4] for r in present]))
        cost = np.mean([r[3] for r in present + absent])
        print(f"| {encoder} | {corpus} | {a:.2f} | {f:.2f} | "
              + " | ".join("{:.2f}/{:.2f}".format(*rates(t)) for t in THRESHOLDS) + f" | {cost:.3f} |")


if __name__ == "__main__":
    main()
