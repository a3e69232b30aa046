"""Circuit schematics: amplifiers, filters, power supplies and oscillators, two revisions per design.

Each class has three topologies (e.g. inverting / non-inverting / common-emitter amplifier),
drawn by kira.eval.domainvqa.circuit_topologies with PIL line primitives
(kira.eval.domainvqa.schematic_pen): components, wires, junction dots, ground and supply
symbols, reference designators and values. This module draws the designs' component values,
makes revision B of each design change one of them (the caption says what that does), writes
the captions and asks the questions.
"""

from __future__ import annotations

import numpy as np

from kira.eval.dataset import BuildSize, Document, DomainDataset, Question
from kira.eval.domainvqa._common import caption_style, question_split, spread
from kira.eval.domainvqa.circuit_topologies import CircuitDesign, draw_schematic

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


def _values(rng: np.random.Generator, label: str) -> dict[str, str]:
    return {"Rin": str(rng.choice(_R[1:4])), "Rf": str(rng.choice(_R[3:6])), "R1": str(rng.choice(_R[1:5])),
            "C1": str(rng.choice(_C[4:7]) if label == "power supply" else rng.choice(_C[0:4]))}


def _bump(value: str, table: tuple[str, ...]) -> str:
    i = table.index(value)
    return table[min(i + 2, len(table) - 1)] if i + 2 < len(table) else table[i - 1]


def _revise(design: CircuitDesign) -> tuple[dict[str, str], str, str, str]:
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


def _describe(design: CircuitDesign, values: dict[str, str]) -> str:
    sub = SUBTYPES[design.label][design.subtype]
    if design.label == "amplifier":
        return f"{sub}, Rin = {values['Rin']}, feedback Rf = {values['Rf']}"
    if design.label == "filter":
        return f"{sub}, R1 = {values['R1']}, C1 = {values['C1']}"
    if design.label == "power supply":
        return f"{sub}, smoothing capacitor C1 = {values['C1']}"
    return f"{sub}, timing R1 = {values['R1']}, C1 = {values['C1']}"


def _caption(rng: np.random.Generator, design: CircuitDesign, revision: str, values: dict[str, str],
             change: str | None) -> str:
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
    designs: list[tuple[CircuitDesign, str, str]] = []
    for i, label in enumerate(spread(n_designs, LABELS)):
        design = CircuitDesign(f"C{i + 1:03d}", label, (i // len(LABELS)) % 3, _values(rng, label),
                               int(rng.integers(0, 2**31)))
        values_b, change, effect, part = _revise(design)
        ids = []
        for rev, values, note in (("A", design.values, None), ("B", values_b, f"{change}, which {effect}")):
            doc_id = f"circuits-{design.name}-rev{rev}"
            ids.append(doc_id)
            revised = CircuitDesign(design.name, label, design.subtype, values, design.layout_seed)
            docs.append(Document(
                doc_id=doc_id, domain="circuits", image=draw_schematic(revised, rev, rng),
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
        q = CircuitDesign(f"Q{i + 1:03d}", lab, (i // len(LABELS)) % 3, _values(rng, lab), int(rng.integers(0, 2**31)))
        sub = SUBTYPES[lab][q.subtype]
        answer = f"{_article(sub).capitalize()} {sub}, {_article(lab)} {lab} circuit: it {_FUNCTION[lab]}."
        questions.append(Question(f"circuits-v{i:03d}", "circuits", "visual", _VISUAL[i % 3], answer, by_label[lab],
                                  lab, query_image=draw_schematic(q, "A", rng)))
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
