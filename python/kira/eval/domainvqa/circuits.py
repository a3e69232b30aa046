"""Circuit schematics: amplifiers, filters, power supplies and oscillators, two revisions per design.

Drawn with PIL line primitives (schemdraw + matplotlib took ~40x longer per image, which
a 200-document default build cannot afford): resistors as zig-zags, capacitors as plate
pairs, inductors as coils, diodes as triangle-and-bar, op-amps as triangles, BJTs as
circles with collector/emitter legs, transformers as coupled coils, regulators as boxes;
wires, junction dots, ground and supply symbols, reference designators and values. Each
class has three topologies (e.g. inverting / non-inverting / common-emitter amplifier).
Revision B of a design changes one component value, and the caption says what that does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy import ndimage

from kira.eval.dataset import BuildSize, Document, DomainDataset, Question
from kira.eval.domainvqa._common import IMAGE_SIZE, caption_style, float_rgb_to_uint8, question_split, spread

LABELS = ("amplifier", "filter", "power supply", "oscillator")
SUBTYPES = {
    "amplifier": ("inverting op-amp amplifier", "non-inverting op-amp amplifier", "common-emitter BJT amplifier"),
    "filter": ("RC low-pass filter", "RC high-pass filter", "series RLC band-pass filter"),
    "power supply": ("full-wave bridge rectifier supply", "half-wave rectifier supply", "7805 linear regulated supply"),
    "oscillator": ("Wien bridge oscillator", "RC phase-shift oscillator", "Colpitts LC oscillator"),
}
_FUNCTION = {
    "amplifier": "amplifies the input signal by a gain set by the resistor ratio",
    "filter": "passes one band of frequencies and attenuates the rest, with a cutoff set by the RC or LC values",
    "power supply": "converts AC mains from a transformer into a smoothed DC output",
    "oscillator": "produces a periodic output at a frequency set by its RC or LC network, using positive feedback",
}
# which part revision B changes, and what that does
_REVISION = {
    "amplifier": ("Rf", "R", "raises the closed-loop gain"),
    "filter": ("R1", "R", "lowers the cutoff frequency"),
    "power supply": ("C1", "C", "lowers the output ripple"),
    "oscillator": ("R1", "R", "lowers the oscillation frequency"),
}
CONCEPTS = (
    "amplifier", "op-amp", "gain", "feedback resistor", "common-emitter", "transistor",
    "filter", "low-pass", "high-pass", "band-pass", "cutoff frequency", "RC network",
    "power supply", "rectifier", "diode bridge", "smoothing capacitor", "transformer", "voltage regulator",
    "oscillator", "positive feedback", "Wien bridge", "phase shift", "LC tank", "oscillation frequency",
)
_R = ("1k", "2.2k", "4.7k", "10k", "22k", "47k", "100k")
_C = ("10n", "47n", "100n", "1u", "10u", "100u", "470u", "1000u")
_INK = (20, 20, 30)


@dataclass(frozen=True)
class _Design:
    name: str
    label: str
    subtype: int
    values: dict[str, str]
    layout_seed: int


class _Sheet:
    """A tiny schematic pen over PIL: components between two grid points, wires, symbols."""

    def __init__(self, size: int, rng: np.random.Generator):
        self.img = Image.new("RGB", (size, size), (250, 250, 246))
        self.d = ImageDraw.Draw(self.img)
        self.s = size / 224.0 * float(rng.uniform(0.92, 1.0))
        self.ox, self.oy = float(rng.uniform(0, 10)), float(rng.uniform(0, 10))
        self.w = int(rng.integers(1, 3))
        self.font = ImageFont.load_default()

    def p(self, x: float, y: float) -> tuple[float, float]:
        return (self.ox + x * self.s, self.oy + y * self.s)

    def wire(self, *pts: tuple[float, float]) -> None:
        self.d.line([self.p(*q) for q in pts], fill=_INK, width=self.w)

    def dot(self, x: float, y: float) -> None:
        cx, cy = self.p(x, y)
        self.d.ellipse((cx - 2.5, cy - 2.5, cx + 2.5, cy + 2.5), fill=_INK)

    def text(self, x: float, y: float, s: str) -> None:
        self.d.text(self.p(x, y), s, fill=_INK, font=self.font)

    def _frame(self, a, b, body: float = 26.0):
        (x0, y0), (x1, y1) = a, b
        length = float(np.hypot(x1 - x0, y1 - y0)) or 1.0
        ux, uy = (x1 - x0) / length, (y1 - y0) / length
        m0 = ((x0 + x1) / 2 - ux * body / 2, (y0 + y1) / 2 - uy * body / 2)
        m1 = ((x0 + x1) / 2 + ux * body / 2, (y0 + y1) / 2 + uy * body / 2)
        self.wire(a, m0)
        self.wire(m1, b)
        return m0, (ux, uy), (-uy, ux)

    def resistor(self, a, b, label: str = "") -> None:
        m0, u, n = self._frame(a, b)
        pts = [m0]
        for k in range(1, 7):
            t = k * 26.0 / 7
            side = 5.0 * (1 if k % 2 else -1)
            pts.append((m0[0] + u[0] * t + n[0] * side, m0[1] + u[1] * t + n[1] * side))
        pts.append((m0[0] + u[0] * 26, m0[1] + u[1] * 26))
        self.wire(*pts)
        self._label(a, b, n, label)

    def capacitor(self, a, b, label: str = "") -> None:
        m0, u, n = self._frame(a, b, body=6.0)
        for t in (0.0, 6.0):
            c = (m0[0] + u[0] * t, m0[1] + u[1] * t)
            self.wire((c[0] - n[0] * 9, c[1] - n[1] * 9), (c[0] + n[0] * 9, c[1] + n[1] * 9))
        self._label(a, b, n, label)

    def inductor(self, a, b, label: str = "") -> None:
        m0, u, n = self._frame(a, b, body=28.0)
        for k in range(4):
            c = (m0[0] + u[0] * (3.5 + 7 * k), m0[1] + u[1] * (3.5 + 7 * k))
            cx, cy = self.p(*c)
            r = 3.5 * self.s
            self.d.arc((cx - r, cy - r, cx + r, cy + r), 180, 360, fill=_INK, width=self.w)
        self._label(a, b, n, label)

    def diode(self, a, b, label: str = "") -> None:
        m0, u, n = self._frame(a, b, body=12.0)
        tip = (m0[0] + u[0] * 12, m0[1] + u[1] * 12)
        tri = [(m0[0] + n[0] * 6, m0[1] + n[1] * 6), (m0[0] - n[0] * 6, m0[1] - n[1] * 6), tip]
        self.d.polygon([self.p(*q) for q in tri], outline=_INK, fill=_INK)
        self.wire((tip[0] + n[0] * 6, tip[1] + n[1] * 6), (tip[0] - n[0] * 6, tip[1] - n[1] * 6))
        self._label(a, b, n, label)

    def source(self, a, b, label: str = "~") -> None:
        m0, u, n = self._frame(a, b, body=20.0)
        c = self.p(m0[0] + u[0] * 10, m0[1] + u[1] * 10)
        r = 10 * self.s
        self.d.ellipse((c[0] - r, c[1] - r, c[0] + r, c[1] + r), outline=_INK, width=self.w)
        self.d.text((c[0] - 3, c[1] - 6), label, fill=_INK, font=self.font)

    def ground(self, x: float, y: float) -> None:
        self.wire((x, y), (x, y + 6))
        for k, half in enumerate((8, 5, 2)):
            self.wire((x - half, y + 6 + 3 * k), (x + half, y + 6 + 3 * k))

    def supply(self, x: float, y: float, name: str = "+Vcc") -> None:
        self.wire((x - 7, y), (x + 7, y))
        self.text(x - 12, y - 12, name)

    def opamp(self, x: float, y: float) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
        """Triangle with its left edge at x, centred on y; returns (minus, plus, out) pins."""
        tri = [(x, y - 22), (x, y + 22), (x + 40, y)]
        self.d.polygon([self.p(*q) for q in tri], outline=_INK, width=self.w)
        self.text(x + 3, y - 17, "-")
        self.text(x + 3, y + 6, "+")
        return (x, y - 11), (x, y + 11), (x + 40, y)

    def bjt(self, x: float, y: float) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
        """NPN transistor centred at (x, y); returns (base, collector, emitter) pins."""
        cx, cy = self.p(x, y)
        r = 13 * self.s
        self.d.ellipse((cx - r, cy - r, cx + r, cy + r), outline=_INK, width=self.w)
        self.wire((x - 5, y - 8), (x - 5, y + 8))
        self.wire((x - 13, y), (x - 5, y))
        self.wire((x - 5, y - 4), (x + 6, y - 12), (x + 6, y - 20))
        self.wire((x - 5, y + 4), (x + 6, y + 12), (x + 6, y + 20))
        self.d.polygon([self.p(x + 6, y + 12), self.p(x + 1, y + 11), self.p(x + 4, y + 7)], fill=_INK)
        return (x - 13, y), (x + 6, y - 20), (x + 6, y + 20)

    def box(self, x0: float, y0: float, x1: float, y1: float, name: str) -> None:
        self.d.rectangle((*self.p(x0, y0), *self.p(x1, y1)), outline=_INK, width=self.w)
        self.text(x0 + 4, (y0 + y1) / 2 - 6, name)

    def transformer(self, x: float, y0: float, y1: float) -> None:
        self.inductor((x - 6, y0), (x - 6, y1))
        self.inductor((x + 6, y0), (x + 6, y1))
        self.wire((x - 1, y0 + 8), (x - 1, y1 - 8))
        self.wire((x + 1, y0 + 8), (x + 1, y1 - 8))

    def _label(self, a, b, n, label: str) -> None:
        if label:
            mx, my = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
            off = 12 if abs(n[0]) < 0.5 else 14
            self.text(mx + n[0] * off - (4 if abs(n[0]) < 0.5 else -2), my + n[1] * off - 5, label)


def _draw(design: _Design, revision: str, rng: np.random.Generator, size: int = IMAGE_SIZE) -> np.ndarray:
    v = design.values
    sh = _Sheet(size, np.random.default_rng(design.layout_seed))
    lab, sub = design.label, design.subtype
    if lab == "amplifier" and sub in (0, 1):
        minus, plus, out = sh.opamp(110, 120)
        if sub == 0:
            sh.source((20, 170), (20, 100))
            sh.ground(20, 170)
            sh.resistor((20, 100), (85, 100), f"Rin {v['Rin']}")
            sh.wire((85, 100), (85, minus[1]), minus)
            sh.wire(plus, (100, plus[1]), (100, 160))
            sh.ground(100, 160)
            sh.dot(85, 100)
        else:
            sh.source((20, 170), (20, plus[1]))
            sh.ground(20, 170)
            sh.wire((20, plus[1]), plus)
            sh.resistor((85, minus[1]), (85, 175), f"Rin {v['Rin']}")
            sh.ground(85, 175)
            sh.wire((85, minus[1]), minus)
            sh.dot(85, minus[1])
        sh.wire((85, minus[1]), (85, 60))
        sh.resistor((85, 60), (175, 60), f"Rf {v['Rf']}")
        sh.wire((175, 60), (175, 120))
        sh.wire(out, (205, 120))
        sh.dot(175, 120)
        sh.text(190, 126, "Vout")
    elif lab == "amplifier":
        base, coll, emit = sh.bjt(120, 120)
        sh.supply(126, 30)
        sh.resistor((126, 30), coll, f"Rc {v['Rf']}")
        sh.resistor(emit, (126, 190), f"Re {v['Rin']}")
        sh.ground(126, 190)
        sh.wire((80, 30), (126, 30))
        sh.resistor((80, 30), (80, 120), "R1 47k")
        sh.resistor((80, 120), (80, 190), "R2 10k")
        sh.ground(80, 190)
        sh.wire((80, 120), base)
        sh.dot(80, 120)
        sh.capacitor((20, 120), (80, 120), "C1 1u")
        sh.capacitor((126, 80), (200, 80), "C2 1u")
        sh.dot(126, 80)
        sh.text(185, 88, "out")
    elif lab == "filter":
        sh.source((20, 170), (20, 90))
        sh.ground(20, 170)
        if sub == 0:
            sh.resistor((20, 90), (110, 90), f"R1 {v['R1']}")
            sh.capacitor((110, 90), (110, 165), f"C1 {v['C1']}")
        elif sub == 1:
            sh.capacitor((20, 90), (110, 90), f"C1 {v['C1']}")
            sh.resistor((110, 90), (110, 165), f"R1 {v['R1']}")
        else:
            sh.inductor((20, 90), (80, 90), "L1 10m")
            sh.capacitor((80, 90), (130, 90), f"C1 {v['C1']}")
            sh.resistor((130, 90), (130, 165), f"R1 {v['R1']}")
        node = 130 if sub == 2 else 110
        sh.ground(node, 165)
        sh.dot(node, 90)
        sh.wire((node, 90), (200, 90))
        sh.text(180, 96, "Vout")
    elif lab == "power supply":
        sh.source((15, 150), (15, 70), "AC")
        sh.wire((15, 70), (34, 70))
        sh.wire((15, 150), (34, 150))
        sh.transformer(40, 70, 150)
        sh.wire((46, 70), (70, 70))
        sh.wire((46, 150), (70, 150))
        if sub == 1:
            sh.diode((70, 70), (120, 70), "D1")
            top, bottom = 120, 150
            sh.wire((70, 150), (120, 150))
        else:
            # diode bridge: a diamond of four diodes
            sh.diode((70, 110), (95, 85), "")
            sh.diode((95, 135), (120, 110), "")
            sh.diode((70, 110), (95, 135), "")
            sh.diode((95, 85), (120, 110), "")
            sh.wire((70, 70), (70, 110))
            sh.wire((70, 150), (95, 150), (95, 135))
            sh.wire((120, 110), (120, 70))
            top, bottom = 120, 150
            sh.wire((95, 85), (95, 60), (140, 60), (140, 150), (bottom, 150))
        sh.capacitor((top, 70), (top, 150), f"C1 {v['C1']}")
        sh.dot(top, 70)
        if sub == 2:
            sh.wire((top, 70), (150, 70))
            sh.box(150, 58, 180, 82, "7805")
            sh.wire((165, 82), (165, 150))
            sh.wire((180, 70), (200, 70))
            sh.capacitor((200, 70), (200, 150), "C2 100n")
        else:
            sh.wire((top, 70), (185, 70))
            sh.resistor((185, 70), (185, 150), "RL 1k")
        sh.wire((top, 150), (200, 150))
        sh.ground(160, 150)
        sh.text(150, 40, "+5V" if sub == 2 else "DC out")
    else:  # oscillator
        if sub == 0:
            minus, plus, out = sh.opamp(120, 120)
            sh.wire(out, (195, 120), (195, 40))
            sh.resistor((195, 40), (140, 40), f"R1 {v['R1']}")
            sh.capacitor((140, 40), (90, 40), f"C1 {v['C1']}")
            sh.wire((90, 40), (90, plus[1]), plus)
            sh.resistor((90, plus[1]), (90, 200), f"R2 {v['R1']}")
            sh.capacitor((60, plus[1]), (60, 200), f"C2 {v['C1']}")
            sh.wire((60, plus[1]), (90, plus[1]))
            sh.wire((60, 200), (90, 200))
            sh.ground(75, 200)
            sh.dot(90, plus[1])
            sh.resistor((105, minus[1]), (105, 70), "Rg 10k")
            sh.wire((105, minus[1]), minus)
            sh.resistor((105, 70), (175, 70), "Rf 22k")
            sh.wire((175, 70), (175, 120))
        elif sub == 1:
            minus, plus, out = sh.opamp(150, 150)
            sh.wire(plus, (140, plus[1]), (140, 190))
            sh.ground(140, 190)
            sh.wire(out, (205, 150), (205, 30), (20, 30), (20, 60))
            xs = (20, 60, 100, 140)
            for k in range(3):
                sh.capacitor((xs[k], 60), (xs[k + 1], 60), f"C{k + 1}")
                sh.resistor((xs[k + 1], 60), (xs[k + 1], 110), f"R{k + 1}" if k else f"R1 {v['R1']}")
                sh.ground(xs[k + 1], 110)
                sh.dot(xs[k + 1], 60)
            sh.wire((140, 60), (140, minus[1] - 0), minus)
        else:
            base, coll, emit = sh.bjt(110, 110)
            sh.supply(116, 25)
            sh.inductor((116, 25), coll, "L1 1m")
            sh.resistor(emit, (116, 185), f"R1 {v['R1']}")
            sh.ground(116, 185)
            sh.wire(coll, (175, coll[1]))
            sh.capacitor((175, coll[1]), (175, 140), f"C1 {v['C1']}")
            sh.capacitor((175, 140), (175, 190), "C2 1n")
            sh.ground(175, 190)
            sh.wire((175, 140), (116, 140))
            sh.dot(175, 140)
            sh.wire(base, (60, 110))
            sh.resistor((60, 25), (60, 110), "Rb 100k")
            sh.wire((60, 25), (116, 25))
    sh.text(150, 205, f"{design.name} rev {revision}")
    img = np.asarray(sh.img, dtype=np.float32) / 255.0
    img = ndimage.gaussian_filter(img, (0.5, 0.5, 0))
    img = img * float(rng.uniform(0.95, 1.0)) + 0.01 * rng.standard_normal(img.shape[:2]).astype(np.float32)[:, :, None]
    return float_rgb_to_uint8(img)


def _values(rng: np.random.Generator, label: str) -> dict[str, str]:
    return {"Rin": str(rng.choice(_R[1:4])), "Rf": str(rng.choice(_R[3:6])), "R1": str(rng.choice(_R[1:5])),
            "C1": str(rng.choice(_C[4:7]) if label == "power supply" else rng.choice(_C[0:4]))}


def _bump(value: str, table: tuple[str, ...]) -> str:
    i = table.index(value)
    return table[min(i + 2, len(table) - 1)] if i + 2 < len(table) else table[i - 1]


def _revise(design: _Design) -> tuple[dict[str, str], str, str, str]:
    part, kind, effect = _REVISION[design.label]
    key = {"Rf": "Rf", "R1": "R1", "C1": "C1"}[part]
    table = _R if kind == "R" else _C
    old = design.values[key]
    new = _bump(old, table)
    if table.index(new) < table.index(old):  # went down instead: the effect reverses
        effect = {"raises the closed-loop gain": "lowers the closed-loop gain",
                  "lowers the cutoff frequency": "raises the cutoff frequency",
                  "lowers the output ripple": "raises the output ripple",
                  "lowers the oscillation frequency": "raises the oscillation frequency"}[effect]
    values = dict(design.values)
    values[key] = new
    return values, f"{part} changed from {old} to {new}", effect, part


def _describe(design: _Design, values: dict[str, str]) -> str:
    sub = SUBTYPES[design.label][design.subtype]
    if design.label == "amplifier":
        return f"{sub}, Rin = {values['Rin']}, feedback Rf = {values['Rf']}"
    if design.label == "filter":
        return f"{sub}, R1 = {values['R1']}, C1 = {values['C1']}"
    if design.label == "power supply":
        return f"{sub}, smoothing capacitor C1 = {values['C1']}"
    return f"{sub}, timing R1 = {values['R1']}, C1 = {values['C1']}"


def _caption(rng: np.random.Generator, design: _Design, revision: str, values: dict[str, str], change: str | None) -> str:
    head = f"Schematic {design.name} rev {revision}"
    style = caption_style(rng)
    if style == "full":
        text = f"{head}: {_describe(design, values)}; it {_FUNCTION[design.label]}."
        return text + (f" {change}." if change else "")
    if style == "findings":
        return f"{head}: {_describe(design, values)}." + (f" {change}." if change else "")
    return f"{head}, drawn by {rng.choice(('J. Park', 'A. Novak', 'M. Silva', 'K. Adeyemi'))}, sheet 1 of 1."


_RETRIEVAL = {
    "amplifier": ("Find schematics of amplifier circuits.", "Which schematics show a gain stage built around an op-amp or transistor (amplifier)?"),
    "filter": ("Find schematics of filter circuits.", "Which schematics show an RC or RLC frequency-selective filter?"),
    "power supply": ("Find schematics of power supplies.", "Which schematics show a rectifier with a smoothing capacitor (power supply)?"),
    "oscillator": ("Find schematics of oscillator circuits.", "Which schematics show an oscillator with positive feedback?"),
}
_VISUAL = (
    "What kind of circuit is shown in this schematic, and what does it do?",
    "Identify the function of this circuit.",
    "What is this schematic?",
)


def _article(word: str) -> str:
    return "an" if word[0] in "aeiouAEIO" else "a"


def build(seed: int, size: BuildSize) -> DomainDataset:
    """The circuits domain: size.documents schematics (two revisions per design) and size.questions questions."""
    rng = np.random.default_rng(seed)
    n_designs = max(1, -(-size.documents // 2))
    docs: list[Document] = []
    temporal: list[tuple[str, ...]] = []
    designs: list[tuple[_Design, str, str]] = []
    for i, label in enumerate(spread(n_designs, LABELS)):
        design = _Design(f"C{i + 1:03d}", label, (i // len(LABELS)) % 3, _values(rng, label), int(rng.integers(0, 2**31)))
        values_b, change, effect, part = _revise(design)
        ids = []
        for rev, values, note in (("A", design.values, None), ("B", values_b, f"{change}, which {effect}")):
            doc_id = f"circuits-{design.name}-rev{rev}"
            ids.append(doc_id)
            revised = _Design(design.name, label, design.subtype, values, design.layout_seed)
            docs.append(Document(
                doc_id=doc_id, domain="circuits", image=_draw(revised, rev, rng),
                caption=_caption(rng, revised, rev, values, note), label=label,
                attributes={"design": design.name, "revision": rev, "subtype": SUBTYPES[label][design.subtype]},
                tags=("schematic",), group=design.name))
        temporal.append(tuple(ids))
        designs.append((design, change, effect))
    docs = docs[: size.documents]
    kept = {d.doc_id for d in docs}
    temporal = [g for g in temporal if all(i in kept for i in g)]
    by_label = {lab: tuple(d.doc_id for d in docs if d.label == lab) for lab in LABELS}
    n_ret, n_vis, n_hop = question_split(size.questions)
    questions: list[Question] = []
    for i, lab in enumerate(spread(n_ret, LABELS)):
        answer = f"Schematics of {lab} circuits: each {_FUNCTION[lab]}."
        questions.append(Question(f"circuits-r{i:03d}", "circuits", "retrieval", _RETRIEVAL[lab][(i // 4) % 2],
                                  answer, by_label[lab], lab))
    for i, lab in enumerate(spread(n_vis, LABELS)):
        q = _Design(f"Q{i + 1:03d}", lab, (i // len(LABELS)) % 3, _values(rng, lab), int(rng.integers(0, 2**31)))
        sub = SUBTYPES[lab][q.subtype]
        answer = f"{_article(sub).capitalize()} {sub}, {_article(lab)} {lab} circuit: it {_FUNCTION[lab]}."
        questions.append(Question(f"circuits-v{i:03d}", "circuits", "visual", _VISUAL[i % 3], answer, by_label[lab],
                                  lab, query_image=_draw(q, "A", rng)))
    complete = [d for d in designs if f"circuits-{d[0].name}-revB" in kept]
    order: np.ndarray | list[int] = rng.permutation(len(complete)) if complete else []
    for i in range(n_hop):
        design, change, effect = complete[int(order[i % len(order)])]
        text = f"How does revision B of design {design.name} differ from revision A, and what does the change do?"
        answer = f"In revision B of this {SUBTYPES[design.label][design.subtype]}, {change}, which {effect}."
        questions.append(Question(f"circuits-m{i:03d}", "circuits", "multihop", text, answer,
                                  (f"circuits-{design.name}-revA", f"circuits-{design.name}-revB"), design.label))
    return DomainDataset(
        name="circuits", documents=tuple(docs), questions=tuple(questions), concept_bank=CONCEPTS, labels=LABELS,
        temporal_groups=tuple(temporal), multiview_groups=(),
        description="Circuit schematics: amplifiers, filters, power supplies, oscillators; two revisions per design.",
    )
