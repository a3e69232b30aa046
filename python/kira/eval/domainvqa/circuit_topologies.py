"""The twelve circuit topologies of the DomainVQA-R circuits domain, drawn as schematics.

A `CircuitDesign` names a design, its class (amplifier, filter, power supply, oscillator), which
of the class's three topologies it is and its component values; `draw_schematic` draws it with a
`kira.eval.domainvqa.schematic_pen.SchematicPen` (the layout jittered by the design's seed), labels
the components with their values, and adds a slight blur, brightness change and noise. The values,
revisions, captions and questions are kira.eval.domainvqa.circuits'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from kira.eval.domainvqa._common import IMAGE_SIZE, float_rgb_to_uint8
from kira.eval.domainvqa.schematic_pen import SchematicPen


@dataclass(frozen=True)
class CircuitDesign:
    """One schematic to draw: which circuit it is and its component values."""

    name: str  # the design's name, written on the sheet ("C001")
    label: str  # its class: one of kira.eval.domainvqa.circuits.LABELS
    subtype: int  # which of the class's three topologies (0, 1 or 2)
    values: dict[str, str]  # component values by key: "Rin", "Rf", "R1", "C1"
    layout_seed: int  # seeds the pen's jitter: both revisions of a design share one layout


def draw_schematic(design: CircuitDesign, revision: str, rng: np.random.Generator,
                   size: int = IMAGE_SIZE) -> np.ndarray:
    """`design` at `revision` (written on the sheet) as a (size, size, 3) uint8 image; `rng` draws the
    brightness and the noise."""
    v = design.values
    sh = SchematicPen(size, np.random.default_rng(design.layout_seed))
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


__all__ = ["CircuitDesign", "draw_schematic"]
