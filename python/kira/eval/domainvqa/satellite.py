"""Satellite tiles: urban, agricultural, forest and water scenes, each seen at two dates (temporal).

Urban tiles are a street grid of blocks with roofs, shadows and parks; agricultural
tiles are a patchwork of rectangular fields with crop rows and tracks; forest tiles are
a closed canopy of crowns of varied green; water tiles are open water with wave texture
and a shoreline. Between the two acquisitions a tile may change the way such tiles do:
new construction, harvest, clear-cutting, a falling water level.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

from kira.eval.dataset import BuildSize, Document, DomainDataset, Question
from kira.eval.domainvqa._common import IMAGE_SIZE, caption_style, float_rgb_to_uint8, question_split, smooth_noise, spread

LABELS = ("urban", "agricultural", "forest", "water")
CONCEPTS = (
    "urban area", "street grid", "residential blocks", "building roofs", "parks",
    "agricultural land", "crop fields", "field boundaries", "crop rows", "harvest",
    "forest", "closed canopy", "tree crowns", "deforestation", "clear-cut",
    "water body", "open water", "shoreline", "sandbank", "water level",
    "land cover change", "true-colour composite",
)
_CHANGES = {
    "urban": ("new construction", "new blocks were built on the periphery of the street grid"),
    "agricultural": ("harvest", "several crop fields were harvested, turning from green to bare brown soil"),
    "forest": ("clear-cut", "a clear-cut patch of bare ground opened in the canopy, indicating deforestation"),
    "water": ("receding shoreline", "the water level fell and the shoreline receded, exposing sandbanks"),
}
_DESCRIPTIONS = {
    "urban": "dense residential blocks on a regular street grid with scattered parks",
    "agricultural": "a patchwork of rectangular crop fields with visible crop rows and farm tracks",
    "forest": "closed canopy of tree crowns with no visible clearings",
    "water": "open water with wave texture and a shoreline along one edge",
}


def _scene(rng: np.random.Generator, label: str, changed: bool, layout_seed: int, size: int = IMAGE_SIZE) -> np.ndarray:
    """Draw one tile. The same layout_seed draws the same place; `changed` applies the label's change."""
    lay = np.random.default_rng(layout_seed)
    x: float  # positions and sizes: whole pixels in some layouts, fractions in others
    y: float
    w: float
    h: float
    canvas = Image.new("RGB", (size, size))
    draw = ImageDraw.Draw(canvas)
    if label == "urban":
        draw.rectangle((0, 0, size, size), fill=(118, 116, 112))
        step = int(lay.integers(30, 44))
        road = int(lay.integers(4, 7))
        extent = size if changed else int(size * lay.uniform(0.6, 0.8))
        for bx in range(0, size, step):
            for by in range(0, size, step):
                x0, y0 = bx + road, by + road
                x1, y1 = bx + step - 1, by + step - 1
                if lay.random() < 0.12:
                    draw.rectangle((x0, y0, x1, y1), fill=(70, 120, 60))  # park
                    continue
                n = int(lay.integers(2, 5))
                for _ in range(n * 2):
                    w, h = int(lay.integers(6, 14)), int(lay.integers(6, 14))
                    px, py = int(lay.integers(x0, max(x0 + 1, x1 - w))), int(lay.integers(y0, max(y0 + 1, y1 - h)))
                    roof = [(170, 90, 70), (150, 150, 155), (205, 205, 200), (120, 100, 90)][int(lay.integers(0, 4))]
                    draw.rectangle((px + 2, py + 2, px + w + 2, py + h + 2), fill=(55, 55, 60))  # shadow
                    draw.rectangle((px, py, px + w, py + h), fill=roof)
        if not changed:  # before the construction: fields at the edge of town
            edge = (extent // step) * step
            draw.rectangle((edge, 0, size, size), fill=(104, 128, 72))
        for bx in range(0, size, step):
            draw.rectangle((bx, 0, bx + road - 1, size), fill=(175, 172, 165))
            draw.rectangle((0, bx, size, bx + road - 1), fill=(175, 172, 165))
    elif label == "agricultural":
        draw.rectangle((0, 0, size, size), fill=(120, 110, 80))
        xs = np.unique(np.concatenate([[0, size], lay.integers(20, size - 20, int(lay.integers(2, 4)))]))
        for i in range(len(xs) - 1):
            ys = np.unique(np.concatenate([[0, size], lay.integers(20, size - 20, int(lay.integers(1, 4)))]))
            for j in range(len(ys) - 1):
                crop = [(80, 140, 50), (110, 160, 60), (190, 175, 90), (140, 110, 70), (60, 120, 45)][int(lay.integers(0, 5))]
                harvest = lay.random() < 0.7
                if changed and crop[1] > 130 and harvest:
                    crop = (150, 115, 75)  # harvested: bare soil
                box = (int(xs[i]) + 2, int(ys[j]) + 2, int(xs[i + 1]) - 2, int(ys[j + 1]) - 2)
                if box[2] - box[0] < 6 or box[3] - box[1] < 6:
                    continue
                draw.rectangle(box, fill=crop)
                spacing = int(lay.integers(4, 7))
                shade = tuple(int(c * 0.82) for c in crop)
                if lay.random() < 0.5:
                    for x in range(box[0], box[2], spacing):
                        draw.line((x, box[1], x, box[3]), fill=shade)
                else:
                    for y in range(box[1], box[3], spacing):
                        draw.line((box[0], y, box[2], y), fill=shade)
        track = int(lay.integers(30, size - 30))
        draw.line((0, track, size, track + int(lay.integers(-30, 30))), fill=(185, 170, 140), width=3)
    elif label == "forest":
        draw.rectangle((0, 0, size, size), fill=(30, 60, 30))
        for _ in range(int(lay.integers(350, 450))):
            x, y = float(lay.uniform(-5, size + 5)), float(lay.uniform(-5, size + 5))
            r = float(lay.uniform(4, 9))
            g = int(lay.integers(70, 120))
            draw.ellipse((x - r, y - r, x + r, y + r), fill=(int(g * 0.35), g, int(g * 0.3)))
            draw.ellipse((x - r * 0.5, y - r * 0.6, x + r * 0.2, y), fill=(int(g * 0.45), min(255, g + 30), int(g * 0.4)))
        if changed:
            cx, cy = float(lay.uniform(50, size - 50)), float(lay.uniform(50, size - 50))
            w, h = float(lay.uniform(30, 55)), float(lay.uniform(25, 45))
            draw.polygon([(cx - w, cy - h), (cx + w, cy - h * 0.7), (cx + w * 0.8, cy + h), (cx - w * 0.9, cy + h * 0.8)],
                         fill=(150, 120, 80))
    else:  # water
        draw.rectangle((0, 0, size, size), fill=(25, 55, 95))
        edge = int(lay.integers(0, 4))
        depth = float(lay.uniform(0.15, 0.3)) * size * (1.6 if changed else 1.0)
        pts = [(t, depth + 12 * np.sin(t / 17.0 + layout_seed % 7)) for t in np.linspace(0, size, 20)]
        if edge in (0, 1):
            poly = [(0, 0)] + [(x, y) for x, y in pts] + [(size, 0)]
        else:
            poly = [(0, size)] + [(x, size - y) for x, y in pts] + [(size, size)]
        draw.polygon(poly, fill=(95, 125, 70))
        if changed:
            sand = [(x, y - 14) for x, y in pts[::-1]]
            band = ([(x, y) for x, y in pts] + sand) if edge in (0, 1) else ([(x, size - y) for x, y in pts] + [(x, size - y + 14) for x, y in pts[::-1]])
            draw.polygon(band, fill=(200, 185, 140))
    img = np.asarray(canvas, dtype=np.float32) / 255.0
    if label == "water":
        waves = np.sin(np.linspace(0, 40, size))[None, :] * np.cos(np.linspace(0, 23, size))[:, None]
        img = img + 0.03 * waves[:, :, None] * (img[:, :, 2:3] > img[:, :, 1:2])
    img = ndimage.gaussian_filter(img, (0.7, 0.7, 0))
    img = img * float(rng.uniform(0.9, 1.1)) + 0.02 * smooth_noise(rng, size, 1.0)[:, :, None]
    return float_rgb_to_uint8(img)


def _caption(rng: np.random.Generator, tile: str, label: str, date: str, changed: bool) -> str:
    head = f"Sentinel-2 true-colour tile {tile}, 10 m resolution, acquired {date}"
    style = caption_style(rng)
    if style == "full":
        body = f"{label.capitalize()} land cover: {_DESCRIPTIONS[label]}."
        if changed:
            body += f" Change since the previous acquisition: {_CHANGES[label][1]}."
        return f"{head}. {body}"
    if style == "findings":
        return f"{head}. Shows {_DESCRIPTIONS[label]}."
    return f"{head}. Cloud cover {int(rng.integers(0, 9))}%."


_RETRIEVAL = {
    "urban": ("Find satellite tiles of urban areas.", "Which tiles show dense built-up residential blocks?"),
    "agricultural": ("Find satellite tiles of agricultural land.", "Which tiles show cultivated crop fields?"),
    "forest": ("Find satellite tiles of forest.", "Which tiles show a closed tree canopy?"),
    "water": ("Find satellite tiles of water bodies.", "Which tiles show open water and a shoreline?"),
}
_VISUAL = (
    "What land cover does this satellite tile show?",
    "Classify the dominant land use in this image.",
    "What kind of terrain is visible in this tile?",
)


def build(seed: int, size: BuildSize) -> DomainDataset:
    """The satellite domain: size.documents tiles (one place at two dates) and size.questions questions."""
    rng = np.random.default_rng(seed)
    n_tiles = max(1, -(-size.documents // 2))
    docs: list[Document] = []
    temporal: list[tuple[str, ...]] = []
    tiles: list[tuple[str, str, bool, tuple[str, str]]] = []
    for i, label in enumerate(spread(n_tiles, LABELS)):
        tile = f"T{i + 1:03d}"
        layout = int(rng.integers(0, 2**31))
        changed = bool(rng.random() < 0.6)
        year = int(rng.integers(2018, 2023))
        dates = (f"{year}-{int(rng.integers(4, 7)):02d}-{int(rng.integers(1, 28)):02d}",
                 f"{year + 2}-{int(rng.integers(7, 10)):02d}-{int(rng.integers(1, 28)):02d}")
        ids = []
        for t in range(2):
            doc_id = f"satellite-{tile}-d{t}"
            ids.append(doc_id)
            after = changed and t == 1
            docs.append(Document(
                doc_id=doc_id, domain="satellite", image=_scene(rng, label, after, layout),
                caption=_caption(rng, tile, label, dates[t], after), label=label,
                attributes={"tile": tile, "date": dates[t], "changed": str(after).lower()},
                tags=("sentinel-2", "rgb"), group=tile))
        temporal.append(tuple(ids))
        tiles.append((tile, label, changed, dates))
    docs = docs[: size.documents]
    kept = {d.doc_id for d in docs}
    temporal = [g for g in temporal if all(i in kept for i in g)]
    by_label = {lab: tuple(d.doc_id for d in docs if d.label == lab) for lab in LABELS}
    n_ret, n_vis, n_hop = question_split(size.questions)
    questions: list[Question] = []
    for i, lab in enumerate(spread(n_ret, LABELS)):
        answer = f"Tiles showing {_DESCRIPTIONS[lab]}: {lab} land cover."
        questions.append(Question(f"satellite-r{i:03d}", "satellite", "retrieval", _RETRIEVAL[lab][(i // 4) % 2],
                                  answer, by_label[lab], lab))
    for i, lab in enumerate(spread(n_vis, LABELS)):
        image = _scene(rng, lab, bool(rng.random() < 0.3), int(rng.integers(0, 2**31)))
        answer = f"{lab.capitalize()} land cover: {_DESCRIPTIONS[lab]}."
        questions.append(Question(f"satellite-v{i:03d}", "satellite", "visual", _VISUAL[i % 3], answer, by_label[lab],
                                  lab, query_image=image))
    complete = [t for t in tiles if f"satellite-{t[0]}-d1" in kept]
    order: np.ndarray | list[int] = rng.permutation(len(complete)) if complete else []
    for i in range(n_hop):
        tile, lab, changed, dates = complete[int(order[i % len(order)])]
        text = f"Compare tile {tile} acquired on {dates[0]} with its acquisition on {dates[1]}: what changed?"
        if changed:
            answer = f"Between the two acquisitions of this {lab} tile, {_CHANGES[lab][1]}."
        else:
            answer = f"No land cover change: both acquisitions show {_DESCRIPTIONS[lab]}."
        questions.append(Question(f"satellite-m{i:03d}", "satellite", "multihop", text, answer,
                                  (f"satellite-{tile}-d0", f"satellite-{tile}-d1"), lab))
    return DomainDataset(
        name="satellite", documents=tuple(docs), questions=tuple(questions), concept_bank=CONCEPTS, labels=LABELS,
        temporal_groups=tuple(temporal), multiview_groups=(),
        description="Satellite tiles: urban, agricultural, forest, water; each place at two dates.",
    )
