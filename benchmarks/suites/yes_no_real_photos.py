"""Yes/no questions about one photo, on real photos without captions: does the answer open with the right word?

The corpus and knowledge bases of `benchmarks.suites.answers_real_photos` (41 real photos, no captions,
names IMG_1000.jpg ...). Each question in `QUESTIONS` asks about one photo whether it shows a concept,
once for a concept it shows and once for one it does not, two ways: with a crop of the photo as the query
image ("is this a cat?") and naming the photo by its file name ("does IMG_1004 show a cat?"). The concepts
are what a person would ask of each photo, written before any run, not the classifier's label words.

What the answer opens with (kira.grounding.yes_no) is counted per image encoder (full variant):

- yes right / yes wrong: "Yes" or "Possibly" when the photo shows / does not show the concept (goal for
  wrong: 0; a wrong yes is the one answer a user cannot catch);
- nothing recorded right / wrong: "Nothing recorded about ... matches" when the photo does not / does show
  the concept (a wrong one is a label set that does not name the photo: honest, but no yes);
- silent: no opening sentence (a label only near the question).

Usage: python -m benchmarks.suites.yes_no_real_photos [--encoders mobilenet_v2,efficientnet_lite0,fused]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from benchmarks.suites.answers_real_photos import _crop, anonymise, build, photos

QUESTIONS: list[tuple[str, str, str]] = [  # photo, a concept it shows, a concept it does not
    ("chelsea", "a cat", "a dog"),
    ("coffee", "a cup of coffee", "a pizza"),
    ("motorcycle", "a motorcycle", "a bicycle"),
    ("rocket", "a rocket", "a bridge"),
    ("astronaut", "an astronaut", "a cat"),
    ("grace_hopper", "a woman in uniform", "a horse"),
    ("camera", "a camera", "a car"),
    ("clock", "a clock", "a guitar"),
    ("china", "a temple", "a ship"),
    ("flower", "a flower", "an elephant"),
    ("moon", "the moon", "a tree"),
    ("coins", "coins", "a keyboard"),
]


def opening(text: str) -> str:
    """"yes", "nothing" or "silent": what the answer's text opens with."""
    if text.startswith(("Yes,", "Yes:", "Possibly,")):
        return "yes"
    return "nothing" if text.startswith("Nothing recorded about") else "silent"


def run(kb: Any, images: dict[str, np.ndarray], ids: dict[str, str], *, verbose: bool = False) -> dict[str, Any]:
    from kira.pipeline import Kira

    kira = Kira(kb)
    counts = dict(yes_right=0, yes_wrong=0, nothing_right=0, nothing_wrong=0, silent=0, asks=0)
    wrong_yes: list[str] = []
    t0 = time.perf_counter()
    for photo, shows, lacks in QUESTIONS:
        for concept, true in ((shows, True), (lacks, False)):
            for question, image in ((f"is this {concept}?", _crop(images[photo])),
                                    (f"does {ids[photo]} show {concept}?", None)):
                answer = kira.ask(question, image=image, variant="full", top_k=5, thumbnails=False).answer
                said = opening(answer.text)
                if verbose:
                    print(f"    {photo:12s} {'shows' if true else 'lacks'} {said:8s} {answer.text[:150]!r}")
                counts["asks"] += 1
                if said == "silent":
                    counts["silent"] += 1
                else:
                    counts[f"{said}_{'right' if (said == 'yes') == true else 'wrong'}"] += 1
                if said == "yes" and not true:
                    wrong_yes.append(f"{question} ({photo})")
    counts["ms"] = (time.perf_counter() - t0) * 1000 / max(counts["asks"], 1)
    counts["wrong_yes"] = wrong_yes
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoders", default="mobilenet_v2,efficientnet_lite0,fused")
    parser.add_argument("--verbose", action="store_true", help="print each answer's opening")
    args = parser.parse_args()
    images = photos()
    ids = anonymise(sorted(images))
    per = len(QUESTIONS) * 2
    print(f"{len(QUESTIONS)} photos; {per} asks about a concept the photo shows and {per} about one it does not "
          "(each asked with a crop as the query image and naming the photo)")
    print("| encoder | yes right (of shown) | yes wrong (of not shown) | nothing recorded right / wrong | silent "
          "| ms/ask |\n|---|---|---|---|---|---|")
    for encoder in [e for e in args.encoders.split(",") if e]:
        kb = build(encoder, images, ids)
        try:
            c = run(kb, images, ids, verbose=args.verbose)
        finally:
            kb.close()
        print(f"| {encoder} | {c['yes_right']} / {per} | {c['yes_wrong']} / {per} | "
              f"{c['nothing_right']} / {c['nothing_wrong']} | {c['silent']} | {c['ms']:.0f} |", flush=True)
        for q in c["wrong_yes"]:
            print(f"    wrong yes: {q}")


if __name__ == "__main__":
    main()
