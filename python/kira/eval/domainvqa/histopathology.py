"""H&E-like histopathology fields: benign against malignant tissue, four fields per slide (multiview).

Eosin-pink stroma with fibre texture; haematoxylin-purple nuclei. Benign fields have
small, round, uniform nuclei in a single orderly layer around gland lumens at low
density. Malignant fields have large, pleomorphic (varied size and shape),
hyperchromatic nuclei, crowded in sheets with loss of gland architecture and mitotic
figures; poorly differentiated tumours more so than moderately differentiated ones.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

from kira.eval.dataset import BuildSize, Document, DomainDataset, Question
from kira.eval.domainvqa._common import IMAGE_SIZE, caption_style, float_rgb_to_uint8, question_split, smooth_noise, spread

LABELS = ("benign", "malignant")
TISSUES = ("breast", "colon")
CONCEPTS = (
    "benign tissue", "malignant tumour", "carcinoma", "nuclear pleomorphism", "nuclear size",
    "hyperchromatic nuclei", "high nuclear density", "mitotic figures", "gland formation",
    "orderly glands", "loss of architecture", "uniform round nuclei", "stroma", "eosin", "haematoxylin",
    "well differentiated", "poorly differentiated", "H&E stain", "high-power field",
)
_FINDINGS = {
    "benign": "small, round, uniform nuclei in orderly glands with low nuclear density and no mitoses",
    "malignant": "large pleomorphic hyperchromatic nuclei crowded in sheets with loss of gland architecture and mitotic figures",
}


def _nucleus(draw: ImageDraw.ImageDraw, x: float, y: float, rx: float, ry: float, angle: float,
             color: tuple[int, int, int], wobble: float, rng: np.random.Generator) -> None:
    t = np.linspace(0, 2 * np.pi, 14, endpoint=False)
    r = 1.0 + wobble * rng.standard_normal(t.size)
    px, py = rx * r * np.cos(t), ry * r * np.sin(t)
    ca, sa = np.cos(angle), np.sin(angle)
    draw.polygon([(x + a * ca - b * sa, y + a * sa + b * ca) for a, b in zip(px, py)], fill=color)


def render(rng: np.random.Generator, label: str, grade: str, tissue: str, size: int = IMAGE_SIZE) -> np.ndarray:
    """Draw one H&E field of `label` ("benign" | "malignant"), `grade` and `tissue`."""
    stroma = np.array([0.93, 0.72, 0.83] if tissue == "breast" else [0.90, 0.68, 0.78], dtype=np.float32)
    fibres = ndimage.gaussian_filter(rng.standard_normal((size, size)).astype(np.float32), (1.0, 6.0))
    base = stroma[None, None, :] + 0.06 * fibres[:, :, None] / (fibres.std() + 1e-6) * np.array([0.3, 1.0, 0.5])
    canvas = Image.fromarray(float_rgb_to_uint8(base))
    draw = ImageDraw.Draw(canvas)
    malignant = label == "malignant"
    poorly = grade == "poorly differentiated"
    # glands: benign keeps round lumens lined by one layer of nuclei; malignant fewer, distorted ones
    n_glands = int(rng.integers(1, 3)) if malignant and poorly else int(rng.integers(2, 4)) if malignant else int(rng.integers(3, 6))
    for _ in range(n_glands):
        gx, gy = rng.uniform(25, size - 25, 2)
        gr = float(rng.uniform(14, 26))
        squash = float(rng.uniform(0.5, 1.0)) if malignant else float(rng.uniform(0.8, 1.0))
        draw.ellipse((gx - gr - 6, gy - gr * squash - 6, gx + gr + 6, gy + gr * squash + 6), fill=(225, 150, 190))
        draw.ellipse((gx - gr, gy - gr * squash, gx + gr, gy + gr * squash), fill=(246, 238, 244))
        n_ring = int(2 * np.pi * gr / 6)
        for k in range(n_ring):
            a = 2 * np.pi * k / n_ring
            nx, ny = gx + (gr + 3) * np.cos(a), gy + (gr * squash + 3) * np.sin(a)
            if malignant:
                rr = float(rng.uniform(2.8, 5.5))
                _nucleus(draw, nx, ny, rr, rr * rng.uniform(0.6, 1.0), float(rng.uniform(0, np.pi)),
                         (70, 25, 110), 0.18, rng)
            else:
                _nucleus(draw, nx, ny, 2.4, 1.8, a, (110, 60, 150), 0.03, rng)
    # nuclei scattered in stroma / tumour sheets
    if malignant:
        n = int(rng.integers(380, 480)) if poorly else int(rng.integers(260, 340))
        sizes = (3.2, 7.0) if poorly else (2.8, 5.5)
        for _ in range(n):
            x, y = rng.uniform(0, size, 2)
            r = float(rng.uniform(*sizes))
            shade = int(rng.integers(35, 85))
            _nucleus(draw, x, y, r, r * rng.uniform(0.55, 1.0), float(rng.uniform(0, np.pi)),
                     (shade, int(shade * 0.3), shade + 50), 0.2, rng)
        for _ in range(int(rng.integers(3, 8))):  # mitotic figures: dark, irregular, clumped
            x, y = rng.uniform(10, size - 10, 2)
            for _ in range(5):
                _nucleus(draw, x + rng.normal(0, 2), y + rng.normal(0, 2), 1.8, 1.2, float(rng.uniform(0, np.pi)),
                         (25, 5, 45), 0.3, rng)
    else:
        for _ in range(int(rng.integers(70, 110))):
            x, y = rng.uniform(0, size, 2)
            _nucleus(draw, x, y, 2.3, 1.5, float(rng.uniform(0, np.pi)), (120, 70, 160), 0.04, rng)  # fibroblasts
    img = np.asarray(canvas, dtype=np.float32) / 255.0
    img = ndimage.gaussian_filter(img, (0.8, 0.8, 0))
    img = img * float(rng.uniform(0.93, 1.05)) + 0.02 * smooth_noise(rng, size, 0.8)[:, :, None]
    return float_rgb_to_uint8(img)


def _diagnosis(label: str, grade: str, tissue: str) -> str:
    if label == "benign":
        return f"benign {tissue} tissue, no evidence of malignancy"
    kind = "invasive ductal carcinoma" if tissue == "breast" else "adenocarcinoma"
    return f"{grade} {kind} of the {tissue}, malignant"


def _caption(rng: np.random.Generator, slide: str, field: int, label: str, grade: str, tissue: str) -> str:
    head = f"H&E section, slide {slide}, field {field}, {tissue}, 40x"
    style = caption_style(rng)
    if style == "full":
        return f"{head}. {_FINDINGS[label].capitalize()}. Diagnosis: {_diagnosis(label, grade, tissue)}."
    if style == "findings":
        return f"{head}. {_FINDINGS[label].capitalize()}."
    return f"{head}. Scanned {2020 + int(rng.integers(0, 5))}, case {int(rng.integers(1000, 9999))}."


_RETRIEVAL = {
    "benign": ("Find histopathology fields of benign tissue.", "Which H&E fields show uniform nuclei in orderly glands, without malignancy?"),
    "malignant": ("Find histopathology fields showing malignant tumour.", "Which H&E fields show pleomorphic nuclei consistent with carcinoma (malignant)?"),
}
_VISUAL = (
    "Is the tissue in this H&E field benign or malignant?",
    "What do the nuclear features in this field indicate?",
    "Give a diagnosis for this histopathology field.",
)


def build(seed: int, size: BuildSize) -> DomainDataset:
    """The histopathology domain: size.documents fields (4 per slide) and size.questions questions."""
    rng = np.random.default_rng(seed)
    n_slides = max(1, -(-size.documents // 4))
    docs: list[Document] = []
    multiview: list[tuple[str, ...]] = []
    slides = []
    for i, label in enumerate(spread(n_slides, LABELS)):
        slide = f"S{i + 1:03d}"
        tissue = TISSUES[(i // 2) % 2]
        grade = str(rng.choice(("moderately differentiated", "poorly differentiated"))) if label == "malignant" else "benign"
        ids = []
        for field in range(1, 5):
            doc_id = f"histopathology-{slide}-f{field}"
            ids.append(doc_id)
            docs.append(Document(
                doc_id=doc_id, domain="histopathology", image=render(rng, label, grade, tissue),
                caption=_caption(rng, slide, field, label, grade, tissue), label=label,
                attributes={"slide": slide, "field": str(field), "tissue": tissue, "grade": grade},
                tags=("H&E", tissue), group=slide))
        multiview.append(tuple(ids))
        slides.append((slide, label, grade, tissue))
    docs = docs[: size.documents]
    kept = {d.doc_id for d in docs}
    multiview = [tuple(i for i in g if i in kept) for g in multiview]
    multiview = [g for g in multiview if len(g) >= 2]
    by_label = {lab: tuple(d.doc_id for d in docs if d.label == lab) for lab in LABELS}
    n_ret, n_vis, n_hop = question_split(size.questions)
    questions: list[Question] = []
    for i, lab in enumerate(spread(n_ret, LABELS)):
        answer = f"Fields with {_FINDINGS[lab]}: {lab}."
        questions.append(Question(f"histopathology-r{i:03d}", "histopathology", "retrieval",
                                  _RETRIEVAL[lab][(i // 2) % 2], answer, by_label[lab], lab))
    for i, lab in enumerate(spread(n_vis, LABELS)):
        tissue = TISSUES[i % 2]
        grade = ("moderately differentiated", "poorly differentiated")[(i // 2) % 2] if lab == "malignant" else "benign"
        answer = f"{_FINDINGS[lab].capitalize()}: {_diagnosis(lab, grade, tissue)}."
        questions.append(Question(f"histopathology-v{i:03d}", "histopathology", "visual", _VISUAL[i % 3], answer,
                                  by_label[lab], lab, query_image=render(rng, lab, grade, tissue)))
    complete = [s for s, g in zip(slides, [None] * len(slides)) if f"histopathology-{s[0]}-f3" in kept]
    order: np.ndarray | list[int] = rng.permutation(len(complete)) if complete else []
    for i in range(n_hop):
        slide, lab, grade, tissue = complete[int(order[i % len(order)])]
        a, b = (1, 3) if i % 2 == 0 else (2, 3)
        text = f"Do fields {a} and {b} of slide {slide} agree, and what is the diagnosis for the slide?"
        answer = f"Yes; both fields show {_FINDINGS[lab]}, so the slide is {_diagnosis(lab, grade, tissue)}."
        questions.append(Question(f"histopathology-m{i:03d}", "histopathology", "multihop", text, answer,
                                  (f"histopathology-{slide}-f{a}", f"histopathology-{slide}-f{b}"), lab))
    return DomainDataset(
        name="histopathology", documents=tuple(docs), questions=tuple(questions), concept_bank=CONCEPTS,
        labels=LABELS, temporal_groups=(), multiview_groups=tuple(multiview),
        description="H&E-like fields: benign against malignant (nuclear size, density, pleomorphism); 4 fields per slide.",
    )
