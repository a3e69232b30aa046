"""A tiny schematic pen over PIL, for the DomainVQA-R circuits domain (kira.eval.domainvqa.circuits).

`SchematicPen` draws components between two grid points of a 224-unit sheet, scaled to the image
and jittered per design: resistors as zig-zags, capacitors as plate pairs, inductors as coils,
diodes as triangle-and-bar, sources as circles, op-amps as triangles, BJTs as circles with
collector/emitter legs, transformers as coupled coils, regulators as boxes; wires, junction dots,
ground and supply symbols, and text labels. PIL line primitives: schemdraw + matplotlib took ~40x
longer per image, which a 200-document default build cannot afford.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

INK = (20, 20, 30)


class SchematicPen:
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
        self.d.line([self.p(*q) for q in pts], fill=INK, width=self.w)

    def dot(self, x: float, y: float) -> None:
        cx, cy = self.p(x, y)
        self.d.ellipse((cx - 2.5, cy - 2.5, cx + 2.5, cy + 2.5), fill=INK)

    def text(self, x: float, y: float, s: str) -> None:
        self.d.text(self.p(x, y), s, fill=INK, font=self.font)

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
            self.d.arc((cx - r, cy - r, cx + r, cy + r), 180, 360, fill=INK, width=self.w)
        self._label(a, b, n, label)

    def diode(self, a, b, label: str = "") -> None:
        m0, u, n = self._frame(a, b, body=12.0)
        tip = (m0[0] + u[0] * 12, m0[1] + u[1] * 12)
        tri = [(m0[0] + n[0] * 6, m0[1] + n[1] * 6), (m0[0] - n[0] * 6, m0[1] - n[1] * 6), tip]
        self.d.polygon([self.p(*q) for q in tri], outline=INK, fill=INK)
        self.wire((tip[0] + n[0] * 6, tip[1] + n[1] * 6), (tip[0] - n[0] * 6, tip[1] - n[1] * 6))
        self._label(a, b, n, label)

    def source(self, a, b, label: str = "~") -> None:
        m0, u, n = self._frame(a, b, body=20.0)
        c = self.p(m0[0] + u[0] * 10, m0[1] + u[1] * 10)
        r = 10 * self.s
        self.d.ellipse((c[0] - r, c[1] - r, c[0] + r, c[1] + r), outline=INK, width=self.w)
        self.d.text((c[0] - 3, c[1] - 6), label, fill=INK, font=self.font)

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
        self.d.polygon([self.p(*q) for q in tri], outline=INK, width=self.w)
        self.text(x + 3, y - 17, "-")
        self.text(x + 3, y + 6, "+")
        return (x, y - 11), (x, y + 11), (x + 40, y)

    def bjt(self, x: float, y: float) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
        """NPN transistor centred at (x, y); returns (base, collector, emitter) pins."""
        cx, cy = self.p(x, y)
        r = 13 * self.s
        self.d.ellipse((cx - r, cy - r, cx + r, cy + r), outline=INK, width=self.w)
        self.wire((x - 5, y - 8), (x - 5, y + 8))
        self.wire((x - 13, y), (x - 5, y))
        self.wire((x - 5, y - 4), (x + 6, y - 12), (x + 6, y - 20))
        self.wire((x - 5, y + 4), (x + 6, y + 12), (x + 6, y + 20))
        self.d.polygon([self.p(x + 6, y + 12), self.p(x + 1, y + 11), self.p(x + 4, y + 7)], fill=INK)
        return (x - 13, y), (x + 6, y - 20), (x + 6, y + 20)

    def box(self, x0: float, y0: float, x1: float, y1: float, name: str) -> None:
        self.d.rectangle((*self.p(x0, y0), *self.p(x1, y1)), outline=INK, width=self.w)
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


__all__ = ["INK", "SchematicPen"]
