"""kira on real photographs nobody here made: retrieval by question, and the critic's precision and recall.

Corpus: 20 scikit-image / scikit-learn sample photos, each with a one-line caption written
here (the kind of text a user attaches; `CAPTIONS`) and, for each, a question a user would
ask about it (`QUESTIONS`, worded without the caption's words where possible). Prints:

- per variant, how often the photo a question is about is the first document and among
  the top 3 (text questions, captioned corpus);
- the critic (the pipeline's default: SimilarityCritic over MiniLM) over every
  (question, candidate) pair the grounded variant hands it: precision and recall of "kept"
  against "is the photo the question is about";
- the same retrieval on the uncaptioned corpus (what `kira ingest` of a bare folder gives).

Each for every image encoder asked for (`load_default(image_encoder=...)`; default: all four).
The uncaptioned corpus with anonymised names, absent concepts and answer wording is
benchmarks/answers_real_photos.py.

Usage: python benchmarks/real_photos.py [--variants full,visual_only] [--encoders fused,pixel]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

CAPTIONS = {
    "astronaut": "portrait of an astronaut in a white spacesuit in front of the flag",
    "brick": "a brick wall texture",
    "camera": "black and white photo of a man with a camera on a tripod",
    "cell": "microscope image of a single cell",
    "chelsea": "an orange tabby cat looking up",
    "clock": "a wall clock photographed at an angle",
    "coffee": "a cup of coffee on a saucer with a spoon",
    "coins": "old coins lying on a table",
    "grass": "a close-up texture of grass",
    "gravel": "a close-up texture of gravel stones",
    "hubble_deep_field": "deep field telescope image full of distant galaxies",
    "immunohistochemistry": "stained tissue section under a microscope",
    "microaneurysms": "a small greyscale fundus detail with dark spots",
    "moon": "the surface of the moon with craters",
    "page": "a scanned page of printed text",
    "retina": "a colour photograph of the back of the eye",
    "rocket": "a rocket on the launch pad before lift-off",
    "text": "handwritten and printed letters on a noisy background",
    "china": "a temple roof in front of trees",
    "flower": "a flower with red petals in close-up",
}
QUESTIONS = {
    "astronaut": "who is the person wearing a space suit?",
    "brick": "a masonry wall",
    "camera": "a photographer with his equipment",
    "cell": "what does the biological cell look like?",
    "chelsea": "a picture of a kitten or cat",
    "clock": "what time does the clock show?",
    "coffee": "a hot drink in a mug",
    "coins": "metal money",
    "grass": "green lawn",
    "gravel": "small pebbles",
    "hubble_deep_field": "galaxies in space",
    "immunohistochemistry": "a histology slide",
    "microaneurysms": "dark dots in a grey eye image",
    "moon": "lunar craters",
    "page": "a document with printed words",
    "retina": "an eye fundus photo",
    "rocket": "a space launch vehicle",
    "text": "letters on a background",
    "china": "an old building with a roof",
    "flower": "a red blossom",
}


def photos() -> dict[str, np.ndarray]:
    from skimage import data
    from sklearn.datasets import load_sample_image

    def rgb(a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        return np.ascontiguousarray(np.repeat(a[:, :, None], 3, 2) if a.ndim == 2 else a[:, :, :3])

    out = {n: rgb(getattr(data, n)()) for n in CAPTIONS if n not in ("china", "flower")}
    out.update({n: rgb(load_sample_image(f"{n}.jpg")) for n in ("china", "flower")})
    return out


def build(path: Path, images: dict[str, np.ndarray], captions: bool, encoder: str | None = None):
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    kb = KnowledgeBase.create(path, models=load_default(image_encoder=encoder))
    for name, image in images.items():
        kb.add_image(image, doc_id=name, caption=CAPTIONS[name] if captions else None)
    kb.commit()
    return kb


def retrieval(kb, variants: list[str]) -> dict[str, tuple[float, float, float]]:
    from kira.pipeline import Kira

    kira = Kira(kb)
    out = {}
    for variant in variants:
        first = top3 = 0
        t0 = time.perf_counter()
        for name, question in QUESTIONS.items():
            docs = list(dict.fromkeys(i.doc_id for i in kira.ask(question, variant=variant, top_k=5).evidence.items))
            first += bool(docs) and docs[0] == name
            top3 += name in docs[:3]
        ms = (time.perf_counter() - t0) * 1000 / len(QUESTIONS)
        out[variant] = (first / len(QUESTIONS), top3 / len(QUESTIONS), ms)
    return out


def critic(kb) -> tuple[float, float, int]:
    """Precision and recall of the critic's "kept" against "the photo the question is about"."""
    from kira.pipeline import Kira
    from kira.grounding.stages import Critic, SelectEvidence
    from kira.pipeline.variants import variant_stages

    tp = fp = fn = pairs = 0
    stages = variant_stages("grounded")
    upto = next(i for i, s in enumerate(stages) if isinstance(s, Critic))
    assert isinstance(stages[upto - 1], SelectEvidence)
    for name, question in QUESTIONS.items():
        probe = Kira(kb, stages=stages[: upto + 1])
        state_result = probe.ask(question, top_k=5)
        kept = {i.doc_id for i in state_result.evidence.items}
        seen = kept | {i.doc_id for i in state_result.evidence.dropped}
        for doc in seen:
            pairs += 1
            relevant = doc == name
            tp += relevant and doc in kept
            fp += (not relevant) and doc in kept
            fn += relevant and doc not in kept
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return precision, recall, pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="visual_only,dual_path,query_expansion,multi_hop,grounded,full")
    parser.add_argument("--encoders", default="pixel,mobilenet_v2,efficientnet_lite0,fused")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    images = photos()
    with tempfile.TemporaryDirectory() as tmp:
        for encoder, captions in [(e, c) for e in args.encoders.split(",") if e for c in (True, False)]:
            kb = build(Path(tmp) / f"kb-{encoder}-{captions}", images, captions, encoder)
            label = "captioned" if captions else "uncaptioned"
            print(f"\n## {label} corpus ({len(images)} real photos), text questions; image encoder: "
                  f"{kb.models.identity().get('image')}")
            print("| variant | question's photo first | in top 3 | ms/ask |\n|---|---|---|---|")
            for variant, (first, top3, ms) in retrieval(kb, variants).items():
                print(f"| {variant} | {first:.2f} | {top3:.2f} | {ms:.1f} |")
            if captions:
                p, r, n = critic(kb)
                print(f"\ncritic over {n} (question, candidate) pairs: precision {p:.2f}, recall {r:.2f}")
            kb.close()


if __name__ == "__main__":
    main()
