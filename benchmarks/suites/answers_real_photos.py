"""What a user reads, on real photos nobody here made: retrieval, the critic, abstention, answer wording.

Corpus: every real photograph or scan that ships offline in an installed wheel: scikit-image's
sample photos, scikit-learn's two sample photos and a few of its handwritten digits,
matplotlib's Grace Hopper portrait and MRI slice, pydicom's CT, MR, ultrasound and nuclear
medicine test images. No captions, no tags; files are written as IMG_1000.jpg, IMG_1001.jpg ...
in a seeded shuffle, so nothing about an image is in its name (what a phone folder gives).

Questions (`QUESTIONS`): text questions whose answer is in the knowledge base (each with the
photos that answer it), questions about concepts no photo shows, and image queries (a crop,
a mirror or a brightened copy of a stored photo). Reported per image encoder and variant:

- rank1 / top3: the question's photo is the first / among the first three documents of the
  evidence (the subject's items, then similar cases), over the present questions and image queries;
- abstain(absent): share of absent-concept questions answered with ``Answer.abstained`` (goal >= 0.8);
- abstain(present): share of present questions answered with it (false abstention; goal <= 0.1);
- of which found: share of present questions answered with it although the question's photo was in
  the evidence (the abstention the relevance verdict, not retrieval, is to blame for);
- answered right / wrong: share of present text questions answered (not abstained) with the
  question's photo first in the evidence / with another photo first (an answer about the wrong photo
  is not what false abstention's goal asks for; a label set that does not name the photo leaves
  abstaining as the honest answer);
- no banner right / wrong: of those answers, how many were given without a low-confidence banner
  (confidence >= LOW_CONFIDENCE, or unmeasured) with the question's photo first / with another photo
  first (counts): how far a user can trust an answer that carries no warning;
- names_top: share of answered present questions whose text names what the top evidence shows
  (one of its classifier labels, or, when it has none, its file name) (goal >= 0.9);
- bare_field: answers holding a bare field name ("Labels [Evidence 1].") or an appearance
  statistic as a claim ("dominated by orange (54%)", "1 salient region") (goal 0);
- critic P / R: over every (question, candidate document) pair the critic judged in the grounded
  variant, precision and recall of "kept" against "the document answers the question".

Knowledge bases are cached under /tmp/kira_answers_real_photos (delete it to rebuild).

Usage: python benchmarks/answers_real_photos.py [--encoders pixel,mobilenet_v2,efficientnet_lite0,fused]
                                                [--variants dual_path,grounded,full]
"""

from __future__ import annotations

import argparse
import gzip
import re
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

CACHE = Path("/tmp/kira_answers_real_photos")
VERSION = "v2"  # bump when the corpus changes, so cached knowledge bases are rebuilt

SKIMAGE = ("astronaut", "brick", "camera", "chelsea", "cell", "clock", "coffee", "coins", "grass", "gravel",
           "hubble_deep_field", "immunohistochemistry", "microaneurysms", "moon", "page", "retina", "rocket", "text")
PYDICOM = {"ct_small": "CT_small.dcm", "mr_small": "MR_small.dcm", "mr_overlay": "examples_overlay.dcm",
           "us_rgb": "examples_rgb_color.dcm", "us_palette": "examples_palette.dcm", "us_j2k": "examples_jpeg2k.dcm",
           "ct_693": "693_J2KI.dcm", "nm_j2k": "JPEG2000.dcm"}
DIGITS = tuple(range(10))  # the first handwritten digit of each class

PRESENT: list[tuple[str, tuple[str, ...]]] = [
    ("a rocket", ("rocket",)),
    ("a space launch vehicle", ("rocket",)),
    ("a cup of coffee", ("coffee",)),
    ("a hot drink", ("coffee",)),
    ("a cat", ("chelsea",)),
    ("a kitten", ("chelsea",)),
    ("an astronaut", ("astronaut",)),
    ("a person in a space suit", ("astronaut",)),
    ("a man with a camera", ("camera",)),
    ("coins", ("coins",)),
    ("money", ("coins",)),
    ("a brick wall", ("brick",)),
    ("a clock", ("clock",)),
    ("grass", ("grass",)),
    ("gravel stones", ("gravel",)),
    ("galaxies in deep space", ("hubble_deep_field",)),
    ("a stained tissue sample under a microscope", ("immunohistochemistry", "cell")),
    ("the surface of the moon", ("moon",)),
    ("a printed page of text", ("page", "text")),
    ("the retina of an eye", ("retina", "microaneurysms")),
    ("a motorcycle", ("motorcycle",)),
    ("a pagoda", ("china",)),
    ("a flower", ("flower",)),
    ("a woman in a military uniform", ("grace_hopper",)),
    ("a brain MRI", ("mri_brain", "mr_small", "mr_overlay")),
    ("a CT scan", ("ct_small", "ct_693")),
    ("an ultrasound image", ("us_rgb", "us_palette", "us_j2k")),
    ("handwritten digits", tuple(f"digit_{d}" for d in DIGITS)),
]
ABSENT = ["a bicycle", "a dog on a beach", "a snowy mountain", "a sailing boat", "a pizza", "a traffic light",
          "a guitar", "an elephant", "a bridge over a river", "a birthday cake", "a computer keyboard",
          "a red fire truck"]


def _crop(a: np.ndarray) -> np.ndarray:
    h, w = a.shape[:2]
    return np.ascontiguousarray(a[h // 8: h - h // 8, w // 8: w - w // 8])


IMAGE_QUERIES: list[tuple[str, str, Callable[[np.ndarray], np.ndarray]]] = [
    ("crop", "coffee", _crop),
    ("mirror", "chelsea", lambda a: np.ascontiguousarray(a[:, ::-1])),
    ("brighter", "rocket", lambda a: np.clip(a.astype(np.float32) * 1.2 + 10, 0, 255).astype(np.uint8)),
    ("crop", "astronaut", _crop),
    ("mirror", "china", lambda a: np.ascontiguousarray(a[:, ::-1])),
    ("brighter", "moon", lambda a: np.clip(a.astype(np.float32) * 1.2 + 10, 0, 255).astype(np.uint8)),
]

BARE_FIELD = re.compile(r"(?:^|[.!?]\s+)(?:labels?|tags?|text|caption|metadata|description)\s*(?:\[|:|\.)", re.I)
APPEARANCE_STAT = re.compile(r"\d+(?:\.\d+)?\s*%|\b\d+x\d+\b|salient region|medium-brightness|high-contrast|"
                             r"low-contrast|brightness|highly textured|dominated by", re.I)


def _rgb(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype != np.uint8:
        a = a.astype(np.float64)
        lo, hi = np.percentile(a, (0.5, 99.5))
        a = np.clip((a - lo) / max(hi - lo, 1e-9) * 255, 0, 255).astype(np.uint8)
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    return np.ascontiguousarray(a[:, :, :3])


def photos() -> dict[str, np.ndarray]:
    """name -> uint8 RGB, every real image this machine has offline (module docstring)."""
    import matplotlib.cbook
    import pydicom
    from pydicom.data import get_testdata_file
    from skimage import data
    from sklearn.datasets import load_digits, load_sample_image

    out = {n: _rgb(getattr(data, n)()) for n in SKIMAGE}
    out["motorcycle"] = _rgb(data.stereo_motorcycle()[0])
    out.update({n: _rgb(load_sample_image(f"{n}.jpg")) for n in ("china", "flower")})
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
        from PIL import Image

        out["grace_hopper"] = _rgb(np.asarray(Image.open(f).convert("RGB")))
    with matplotlib.cbook.get_sample_data("s1045.ima.gz") as f:
        raw = f.read()
    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    out["mri_brain"] = _rgb(np.frombuffer(raw, np.uint16).astype(np.float64).reshape(256, 256))
    for name, file in PYDICOM.items():
        pixels = pydicom.dcmread(get_testdata_file(file)).pixel_array
        out[name] = _rgb(pixels[0] if pixels.ndim == 3 and pixels.shape[-1] not in (3, 4) else pixels)
    digits = load_digits()
    for d in DIGITS:
        small = digits.images[int(np.flatnonzero(digits.target == d)[0])]
        out[f"digit_{d}"] = _rgb(np.kron(255 - small * 16, np.ones((12, 12))).clip(0, 255).astype(np.uint8))
    return out


def anonymise(names: list[str]) -> dict[str, str]:
    """name -> IMG_1000 ... in a seeded shuffle."""
    order = np.random.default_rng(7).permutation(len(names))
    return {names[int(i)]: f"IMG_{1000 + n}" for n, i in enumerate(order)}


def build(encoder: str, images: dict[str, np.ndarray], ids: dict[str, str]) -> Any:
    """The knowledge base of `images` under `encoder`, built once into CACHE and reopened after."""
    from PIL import Image

    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    models = load_default(image_encoder=encoder)
    folder = CACHE / f"photos-{VERSION}"
    if not folder.exists():
        tmp = CACHE / f"photos-{VERSION}.tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        for name, image in images.items():
            Image.fromarray(image).save(tmp / f"{ids[name]}.jpg", quality=92)
        tmp.rename(folder)
    path = CACHE / f"kb-{encoder}-{VERSION}"
    if not path.exists():
        with KnowledgeBase.create(path.with_suffix(".tmp"), models=models) as kb:
            kb.ingest(folder)
        path.with_suffix(".tmp").rename(path)
    return KnowledgeBase.open(path, models=models, read_only=True)


def _docs(result: Any) -> list[str]:
    ev = result.evidence
    return list(dict.fromkeys(i.doc_id for i in (*ev.items, *ev.similar)))


def _names_top(result: Any) -> bool:
    """Whether the answer text names what the top evidence shows: a label (or its file name if it has none)."""
    items = (*result.evidence.items, *result.evidence.similar)
    if not items:
        return False
    top, text = items[0], result.answer.text.lower()
    words = [str(lb.get("label", "")).lower() for lb in top.provenance.get("labels") or []]
    words += [str(t).lower() for t in top.provenance.get("tags") or []]
    words = [w for w in words if w] or [top.doc_id.lower()]
    return any(w in text for w in words)


def run(kb: Any, images: dict[str, np.ndarray], ids: dict[str, str], variants: list[str]) -> dict[str, dict]:
    from kira.pipeline import Kira

    kira = Kira(kb)
    out: dict[str, dict] = {}
    for variant in variants:
        m = dict(rank1=0, top3=0, ranked=0, abstain_absent=0, abstain_present=0, abstain_found=0, names=0,
                 answered=0, bare=0,
                 asks=0, tp=0, fp=0, fn=0, right_answered=0, sure_right=0, sure_wrong=0)
        t0 = time.perf_counter()
        queries = [(q, {ids[n] for n in right}, None) for q, right in PRESENT]
        queries += [(q, set(), None) for q in ABSENT]
        queries += [(None, {ids[n]}, change(images[n])) for _how, n, change in IMAGE_QUERIES]
        from kira.reasoning.relevance import LOW_CONFIDENCE

        for question, right, image in queries:
            result = kira.ask(question, image=image, variant=variant, top_k=5, thumbnails=False)
            answer, docs = result.answer, _docs(result)
            m["asks"] += 1
            m["bare"] += bool(BARE_FIELD.search(answer.text) or APPEARANCE_STAT.search(answer.text))
            if not right:
                m["abstain_absent"] += bool(answer.abstained)
                continue
            m["ranked"] += 1
            m["rank1"] += bool(docs) and docs[0] in right
            m["top3"] += bool(right & set(docs[:3]))
            if question is not None:
                m["abstain_present"] += bool(answer.abstained)
                m["abstain_found"] += bool(answer.abstained and right & set(docs))  # the right photo was in the evidence
                if not answer.abstained:
                    m["answered"] += 1
                    is_right = bool(docs) and docs[0] in right
                    m["right_answered"] += is_right
                    m["names"] += _names_top(result)
                    if answer.confidence is None or answer.confidence >= LOW_CONFIDENCE:  # no low-confidence banner
                        m["sure_right" if is_right else "sure_wrong"] += 1
                if result.card.critic is not None:
                    kept = set(docs)
                    for doc in kept | {i.doc_id for i in result.evidence.dropped}:
                        m["tp"] += doc in right and doc in kept
                        m["fp"] += doc not in right and doc in kept
                        m["fn"] += doc in right and doc not in kept
        m["ms"] = (time.perf_counter() - t0) * 1000 / max(m["asks"], 1)
        out[variant] = m
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoders", default="pixel,mobilenet_v2,efficientnet_lite0,fused")
    parser.add_argument("--variants", default="dual_path,grounded,full")
    args = parser.parse_args()
    images = photos()
    ids = anonymise(sorted(images))
    present = len(PRESENT)
    print(f"{len(images)} real photos, {present} present questions, {len(ABSENT)} absent, "
          f"{len(IMAGE_QUERIES)} image queries")
    print("| encoder | variant | rank1 | top3 | abstain(absent) | abstain(present) | of which found "
          "| answered right / wrong | no banner: right / wrong | names_top | bare_field | critic P | critic R | ms/ask |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for encoder in [e for e in args.encoders.split(",") if e]:
        kb = build(encoder, images, ids)
        try:
            for variant, m in run(kb, images, ids, [v for v in args.variants.split(",") if v]).items():
                critic = (f"{m['tp'] / max(m['tp'] + m['fp'], 1):.2f} | {m['tp'] / max(m['tp'] + m['fn'], 1):.2f}"
                          if m["tp"] + m["fp"] + m["fn"] else "- | -")
                print(f"| {encoder} | {variant} | {m['rank1'] / m['ranked']:.2f} | {m['top3'] / m['ranked']:.2f} | "
                      f"{m['abstain_absent'] / len(ABSENT):.2f} | {m['abstain_present'] / present:.2f} | "
                      f"{m['abstain_found'] / present:.2f} | "
                      f"{m['right_answered'] / present:.2f} / {(m['answered'] - m['right_answered']) / present:.2f} | "
                      f"{m['sure_right']} / {m['sure_wrong']} | "
                      f"{m['names'] / max(m['answered'], 1):.2f} | {m['bare']} | {critic} | {m['ms']:.0f} |", flush=True)
        finally:
            kb.close()


if __name__ == "__main__":
    main()
