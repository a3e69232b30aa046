"""`kira demo`: an offline end-to-end run on real images that ship with Python packages.

Images: scikit-image's `skimage.data` (retina, immunohistochemistry, astronaut, coffee,
chelsea, camera, moon, hubble deep field, rocket, cell, microaneurysms), scikit-learn's
sample photos (china, flower), pydicom's CT and MR test files, and circuit schematics
drawn with schemdraw (rendered to PNG in memory through matplotlib). Each has a caption
written here. Two schematic revisions form a temporal sequence and the
immunohistochemistry slide with a zoomed view of it form a multiview set.

It builds a knowledge base, asks text, image and text+image questions, prints the
rationale cards and writes each card as HTML into the output folder. Nothing is
downloaded. Needs the demo extra: ``pip install kira[demo]``.
"""

from __future__ import annotations

import io
import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

log = logging.getLogger(__name__)

DEMO_EXTRA = "pip install 'kira[demo]'  (scikit-image, scikit-learn, pydicom, schemdraw, matplotlib)"


@dataclass(frozen=True)
class DemoImage:
    doc_id: str
    load: Callable[[], np.ndarray]
    caption: str
    tags: tuple[str, ...] = ()
    sequence: tuple[str, float] | None = None
    view: tuple[str, float] | None = None


@dataclass
class DemoSummary:
    """What the demo did: documents, questions asked, cards written, seconds taken."""

    documents: int = 0
    chunks: dict[str, int] = field(default_factory=dict)
    questions: list[tuple[str, str]] = field(default_factory=list)  # (query, answer)
    cards: list[str] = field(default_factory=list)
    seconds: float = 0.0
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import skimage.data

        return getattr(skimage.data, name)()

    return load


def _sample_photo(index: int) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from sklearn.datasets import load_sample_images

        return load_sample_images().images[index]

    return load


def _dicom(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import pydicom
        from pydicom.data import get_testdata_file

        try:
            path = get_testdata_file(name, download=False)
        except TypeError:  # older pydicom: no download flag; these two files ship with it
            path = get_testdata_file(name)
        if path is None:
            raise FileNotFoundError(f"pydicom test file {name} is not installed")
        return np.asarray(pydicom.dcmread(path).pixel_array)

    return load


def _zoom(load: Callable[[], np.ndarray], box: tuple[int, int, int, int]) -> Callable[[], np.ndarray]:
    def crop() -> np.ndarray:
        x0, y0, x1, y1 = box
        return np.ascontiguousarray(load()[y0:y1, x0:x1])

    return crop


def _schematic(kind: str) -> Callable[[], np.ndarray]:
    def draw() -> np.ndarray:
        import matplotlib

        matplotlib.use("Agg")
        import schemdraw
        import schemdraw.elements as elm
        from PIL import Image

        schemdraw.use("matplotlib")
        with schemdraw.Drawing(show=False) as d:
            d.config(fontsize=12)
            if kind == "rc_lowpass":
                d += elm.SourceSin().up().label("Vin")
                d += elm.Resistor().right().label("R 1k")
                d.push()
                d += elm.Capacitor().down().label("C 100n")
                d += elm.Line().left()
                d.pop()
                d += elm.Line().right().label("Vout", loc="right")
            elif kind == "rc_lowpass_v2":
                d += elm.SourceSin().up().label("Vin")
                d += elm.Resistor().right().label("R 1k")
                d.push()
                d += elm.Capacitor().down().label("C 100n")
                d += elm.Ground()
                d.pop()
                d += elm.Resistor().right().label("R 10k")
                d += elm.Capacitor().down().label("C 10n")
                d += elm.Ground()
            elif kind == "divider":
                d += elm.Battery().up().label("9V")
                d += elm.Resistor().right().label("R1 10k")
                d += elm.Resistor().down().label("R2 10k")
                d += elm.Line().left()
            elif kind == "led":
                d += elm.Battery().up().label("5V")
                d += elm.Resistor().right().label("330")
                d += elm.LED().down().label("LED")
                d += elm.Line().left()
            else:  # inverting op-amp amplifier
                op = elm.Opamp(leads=True)
                d += op
                d += elm.Line().left(d.unit / 4).at(op.in2)
                d += elm.Ground(lead=False)
                d += elm.Resistor().at(op.in1).left().label("Rin 10k")
                d += elm.Line().up(d.unit / 2).at(op.in1)
                d += elm.Resistor().tox(op.out).label("Rf 100k")
                d += elm.Line().toy(op.out)
            png = d.get_imagedata("png")
        with Image.open(io.BytesIO(png)) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)

    return draw


def demo_images(quick: bool = False) -> list[DemoImage]:
    """The demo corpus (a smaller one with `quick`)."""
    ihc = _skimage("immunohistochemistry")
    images = [
        DemoImage("retina", _skimage("retina"), "retina fundus photograph showing the optic disc and branching blood vessels",
                  ("ophthalmology", "fundus")),
        DemoImage("ihc_slide", ihc, "immunohistochemistry stained tissue section, brown DAB positive cells on blue haematoxylin nuclei",
                  ("histopathology", "IHC"), view=("ihc-slide-1", 0)),
        DemoImage("ihc_zoom", _zoom(ihc, (128, 128, 384, 384)), "zoomed view of the same immunohistochemistry slide: stained nuclei up close",
                  ("histopathology", "IHC"), view=("ihc-slide-1", 1)),
        DemoImage("ct_small", _dicom("CT_small.dcm"), "axial CT slice, a small test scan (pydicom test file)", ("radiology", "CT")),
        DemoImage("mr_small", _dicom("MR_small.dcm"), "MR image slice, a small test scan (pydicom test file)", ("radiology", "MRI")),
        DemoImage("rc_filter_rev1", _schematic("rc_lowpass"), "circuit schematic of an RC low-pass filter: 1k resistor, 100n capacitor",
                  ("circuits", "filter"), sequence=("rc-filter-design", 1)),
        DemoImage("rc_filter_rev2", _schematic("rc_lowpass_v2"), "revised schematic: two-stage RC low-pass filter with ground",
                  ("circuits", "filter"), sequence=("rc-filter-design", 2)),
        DemoImage("voltage_divider", _schematic("divider"), "circuit schematic of a voltage divider: 9V battery and two 10k resistors",
                  ("circuits",)),
        DemoImage("chelsea", _skimage("chelsea"), "an orange tabby cat sitting indoors", ("animal", "cat")),
        DemoImage("coffee", _skimage("coffee"), "a cup of coffee on a saucer with a spoon", ("food",)),
        DemoImage("hubble", _skimage("hubble_deep_field"), "Hubble deep field: many distant galaxies on a dark sky", ("astronomy",)),
    ]
    if not quick:
        images += [
            DemoImage("astronaut", _skimage("astronaut"), "astronaut Eileen Collins in a space suit with the US flag", ("space", "person")),
            DemoImage("camera", _skimage("camera"), "black and white photo of a cameraman with a tripod camera", ("photo",)),
            DemoImage("moon", _skimage("moon"), "grayscale photograph of the lunar surface with craters", ("astronomy",)),
            DemoImage("rocket", _skimage("rocket"), "a rocket on the launch pad before lift-off", ("space",)),
            DemoImage("cell", _skimage("cell"), "microscopy image of a single cell", ("microscopy",)),
            DemoImage("microaneurysms", _skimage("microaneurysms"), "retinal image patch with microaneurysms (small red dots)",
                      ("ophthalmology",)),
            DemoImage("china", _sample_photo(0), "photograph of a Chinese pagoda temple among trees", ("photo", "building")),
            DemoImage("flower", _sample_photo(1), "close-up photograph of a pink flower", ("photo", "plant")),
            DemoImage("led_circuit", _schematic("led"), "circuit schematic: LED with a 330 ohm current-limiting resistor on 5V",
                      ("circuits",)),
            DemoImage("opamp", _schematic("opamp"), "circuit schematic of an inverting op-amp amplifier, gain -10", ("circuits",)),
        ]
    return images


def demo_questions(quick: bool = False) -> list[dict[str, Any]]:
    """(question, image doc id to use as the query image) pairs."""
    questions: list[dict[str, Any]] = [
        {"question": "Which image shows blood vessels of the eye?"},
        {"question": "Show me a low-pass filter schematic and how it was revised"},
        {"question": "stained tissue with brown positive cells"},
        {"question": None, "image": "coffee"},
        {"question": "What kind of scan is this?", "image": "ct_small"},
    ]
    if not quick:
        questions += [
            {"question": "an orange cat indoors"},
            {"question": "a circuit with a battery and resistors"},
            {"question": "galaxies in deep space"},
        ]
    return questions


def _safe_name(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text.lower())[:40].strip("_") or "query"


def run_demo(out_dir: str | Path = "kira_demo_out", *, quick: bool = False, models: Any = None,
             kb_dir: str | Path | None = None, echo: Callable[[str], None] = print) -> DemoSummary:
    """Build the demo knowledge base, ask the demo questions, print and write the cards.

    Parameters
    ----------
    out_dir: where ``card_<n>_<query>.html`` files go (created).
    quick: the smaller corpus and question set (for tests).
    models: a model stack (default: the embedded default stack).
    kb_dir: keep the knowledge base here (default: a temporary directory).
    echo: where the printed output goes.

    Raises ImportError naming the demo extra when a demo package is missing.
    """
    try:
        import matplotlib  # noqa: F401
        import pydicom  # noqa: F401
        import schemdraw  # noqa: F401
        import skimage  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"kira demo needs {exc.name}: {DEMO_EXTRA}") from exc
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    start = time.perf_counter()
    summary = DemoSummary()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.TemporaryDirectory(prefix="kira-demo-") if kb_dir is None else None
    path = Path(tmp.name) / "kb" if tmp is not None else Path(kb_dir)  # type: ignore[arg-type]
    try:
        kb = KnowledgeBase.create(path, models=models)
        pixels: dict[str, np.ndarray] = {}
        with kb:
            echo(f"kira demo: building a knowledge base in {path}")
            for img in demo_images(quick):
                try:
                    pixels[img.doc_id] = img.load()
                    kb.add_image(pixels[img.doc_id], doc_id=img.doc_id, caption=img.caption, tags=img.tags,
                                 sequence=img.sequence, view=img.view, metadata={"demo": True})
                except (ImportError, OSError, ValueError) as exc:
                    summary.skipped.append((img.doc_id, str(exc)))
                    echo(f"  skipped {img.doc_id}: {exc}")
            kb.commit()
            stats = kb.stats()
            summary.documents, summary.chunks = stats["documents"], stats["chunks"]
            echo(f"  {stats['documents']} images -> chunks {stats['chunks']}; groups {stats['groups']} "
                 f"({time.perf_counter() - start:.1f} s)")
            kira = Kira(kb)
            for n, q in enumerate(demo_questions(quick), start=1):
                image = pixels.get(q.get("image", ""))
                if q.get("image") and image is None:
                    continue
                result = kira.ask(q["question"], image=image, top_k=5)
                label = q["question"] or f"(image: {q['image']})"
                if q["question"] and image is not None:
                    label = f"{q['question']} (image: {q['image']})"
                summary.questions.append((label, result.answer.text))
                echo("")
                echo(result.card.to_text())
                card_path = out / f"card_{n}_{_safe_name(label)}.html"
                card_path.write_text(result.card.to_html(), encoding="utf-8")
                summary.cards.append(str(card_path))
    finally:
        if tmp is not None:
            tmp.cleanup()
    summary.seconds = time.perf_counter() - start
    echo("")
    echo(f"kira demo: {summary.documents} images, {len(summary.questions)} questions, "
         f"{len(summary.cards)} HTML cards in {out}/ ({summary.seconds:.1f} s)")
    for label, answer in summary.questions:  # the similar-case paragraph stays under its answer
        paragraphs = [p.strip() for p in answer.split("\n\n") if p.strip()]
        echo(f"  Q: {label}\n     A: " + "\n        ".join(paragraphs))
    return summary
