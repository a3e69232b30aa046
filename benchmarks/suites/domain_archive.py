"""A domain archive: real medical and microscopy images, captions in an archive's style, present and absent findings.

Where records are photos of different things, the relevance judge's everyday-phrase scale holds
(benchmarks/suites/real_photos.py). Inside one domain every record shares words ("CT scan: ...",
"MR scan: ...") and the sentence encoder rates every record a match for any question of the domain.
This suite asks such an archive what a user of it would ask: findings it holds, and findings it does
not (a pneumothorax, a fractured wrist, a mammogram). Captions and questions were written before any
run; the images are pydicom's CT, MR, ultrasound and nuclear-medicine test files, matplotlib's MRI
slice and scikit-image's retina, fundus detail, cell and immunohistochemistry photos.

Per question it prints how the answer opens, its confidence and the first document; then:

- absent, sure: answers to absent findings given without a low-confidence banner and not abstaining
  (stated as if the archive held the finding; lower is better);
- present, sure and right: answers to present findings with the right document first and no banner;
- present, flagged: answers to present findings under a banner or abstaining (the cost of honesty).

Usage: python -m benchmarks.suites.domain_archive [--encoders pixel,mobilenet_v2,efficientnet_lite0,fused] [--verbose]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

CAPTIONS = {
    "ct_small": "CT scan: axial slice, soft tissue window",
    "ct_693": "CT scan: axial slice, plain study, 5 mm",
    "mr_small": "MR scan: axial slice",
    "mr_overlay": "MR scan: abdomen, a marked lesion in the liver",
    "mri_brain": "MR scan: slice of the brain",
    "nm_j2k": "Nuclear medicine scan: whole body bone scan",
    "us_rgb": "Ultrasound scan: colour image",
    "us_palette": "Ultrasound scan: palette colour image",
    "us_j2k": "Ultrasound scan: greyscale image",
    "retina": "Fundus photograph: colour image of the retina",
    "microaneurysms": "Fundus photograph: detail of the retina with microaneurysms",
    "cell": "Microscopy: a single cell",
    "immunohistochemistry": "Microscopy: immunohistochemistry stained tissue",
}

PRESENT: list[tuple[str, tuple[str, ...]]] = [
    ("a CT scan", ("ct_small", "ct_693")),
    ("an ultrasound image", ("us_rgb", "us_palette", "us_j2k")),
    ("a scan of the liver", ("mr_overlay",)),
    ("a brain MRI", ("mri_brain",)),
    ("a whole-body bone scan", ("nm_j2k",)),
    ("the retina of an eye", ("retina", "microaneurysms")),
    ("microaneurysms in the retina", ("microaneurysms",)),
    ("a stained tissue sample", ("immunohistochemistry",)),
    ("a cell under a microscope", ("cell",)),
    ("a nuclear medicine study", ("nm_j2k",)),
]
def _shuffled_key(name: str) -> str:
    import hashlib

    return hashlib.sha256(name.encode()).hexdigest()


STUDY = {name: f"study_{n:04d}" for n, name in enumerate(sorted(CAPTIONS, key=_shuffled_key), start=1201)}
"""An archive's accession ids: nothing about an image is in its id (a descriptive id would name it)."""
NAME_OF = {study: name for name, study in STUDY.items()}

ABSENT = ["a chest X-ray with a pneumothorax", "a scan of a fractured wrist", "an MRI of the knee", "a mammogram",
          "a dental X-ray", "a PET scan of the lungs", "an echocardiogram of the heart", "a CT scan of the spine",
          "a blood smear under a microscope", "a photograph of a skin lesion"]


def build(path: Path, encoder: str, images: dict):
    """The archive under `encoder`'s stack at `path`, from `images` (benchmarks.suites.answers_real_photos.photos)."""
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    kb = KnowledgeBase.create(path, models=load_default(image_encoder=encoder))
    for name, caption in CAPTIONS.items():
        kb.add_image(images[name], doc_id=STUDY[name], caption=caption)
    kb.commit()
    return kb


def ask_all(kb, verbose: bool) -> dict[str, int]:
    """Ask every question, print each answer's opening, and count (module docstring)."""
    from kira.pipeline import Kira
    from kira.reasoning.relevance import LOW_CONFIDENCE

    kira = Kira(kb)
    counts = dict(absent_sure=0, present_right=0, present_flagged=0)
    for question, right in [*PRESENT, *((q, ()) for q in ABSENT)]:
        result = kira.ask(question, top_k=5, thumbnails=False)
        answer = result.answer
        first = NAME_OF.get(result.evidence.items[0].doc_id, "-") if result.evidence.items else "-"
        sure = not answer.abstained and (answer.confidence is None or answer.confidence >= LOW_CONFIDENCE)
        if right:
            counts["present_right"] += sure and first in right
            counts["present_flagged"] += not sure
        else:
            counts["absent_sure"] += sure
        kind = "present" if right else "absent"
        opening = answer.text if verbose else answer.text[:110]
        print(f"{kind:7s} {question!r:42s} conf {answer.confidence!s:6s} first {first:22s} {opening}")
    return counts


def main() -> None:
    from benchmarks.suites.answers_real_photos import photos

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoders", default="pixel,mobilenet_v2,efficientnet_lite0,fused")
    parser.add_argument("--verbose", action="store_true", help="print each answer's text in full")
    args = parser.parse_args()
    images = photos()
    rows = []
    for encoder in [e for e in args.encoders.split(",") if e]:
        print(f"\n## {encoder}")
        with tempfile.TemporaryDirectory() as tmp:
            with build(Path(tmp) / "kb", encoder, images) as kb:
                counts = ask_all(kb, args.verbose)
        rows.append(f"| {encoder} | {counts['absent_sure']} of {len(ABSENT)} | {counts['present_right']} of "
                    f"{len(PRESENT)} | {counts['present_flagged']} of {len(PRESENT)} |")
    print("\n| encoder | absent finding stated without a banner | present finding answered right, no banner "
          "| present finding flagged or abstained |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
