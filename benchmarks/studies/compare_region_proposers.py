"""Region proposers on real images with object masks: the CNN's activation energy, the hand-made saliency, a centre box.

The region proposer gives an attention grid that the core's `extract_regions` thresholds
(mean + 0.5 std) into the region chunks of an image. This compares, side by side in one
run, on real images whose object mask comes with the data or was drawn by hand from the
photo (never from kira's own processing):

- photos: 8 photographs that ship offline (skimage.data chelsea, coffee, rocket,
  astronaut, camera, stereo_motorcycle's left view; scikit-learn's china and flower),
  each with one box around its main object drawn by eye on a 50-px grid (BOXES below);
- quokka: the photo in the `imgaug` 0.4.0 wheel (MIT) with the animal's polygon from
  its `quokka_annotations.json` (install the wheel with --no-deps; it is only read);
- nuclei: the fluorescence image of the 2018 Data Science Bowl in the `stardist` 0.9.2
  wheel (BSD-3-Clause) with its instance mask (read with tifffile; --no-deps too);
- Fashion-MNIST: the first `--fashion` test images (Debian `dataset-fashion-mnist`),
  28 x 28, the object being every pixel that is not the set's pure-black background.

Proposers: `cnn` (MobileNetV2's last-feature-map energy, `ActivationProposer`, the CNN
stack's), `saliency` (spectral residual + colour contrast, `SaliencyProposer`, the pixel
stack's) and `centre` (a map falling off with the distance to the centre; its one region
is the centred box of half the width and height). Figures per image, then averaged:

- AUC: the attention map (bilinear to the image size) as a per-pixel score of the mask,
  threshold-free (0.5 = chance);
- hit: the pointing game, the attention's peak falls inside the mask;
- IoU: of the top region (best score) with the mask, as pixel sets;
- cover / prec: the share of the mask inside the union of all regions, and the share of
  that union that is mask (covering the whole image gives cover 1 but prec = the mask's
  area share);
- n: regions per image.

    python -m benchmarks.studies.compare_region_proposers            # about 1 minute on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np

# x0, y0, x1, y1 (exclusive) of the main object, drawn by eye on a 50-px grid over each photo
BOXES = {
    "chelsea": (0, 0, 395, 300),  # the cat's head
    "coffee": (75, 15, 480, 390),  # cup, saucer and spoon
    "rocket": (302, 125, 340, 410),  # the rocket (not the towers)
    "astronaut": (20, 15, 365, 512),  # the astronaut
    "camera": (0, 65, 405, 512),  # the photographer, camera and tripod
    "motorcycle": (92, 95, 685, 450),  # the motorcycle
    "china": (60, 28, 370, 427),  # the pagoda
    "flower": (168, 85, 447, 360),  # the dahlia in front
}


def _box_mask(shape: tuple[int, int], box: tuple[int, int, int, int]) -> np.ndarray:
    m = np.zeros(shape, bool)
    x0, y0, x1, y1 = box
    m[y0:y1, x0:x1] = True
    return m


def photos() -> list[tuple[str, np.ndarray, np.ndarray]]:
    from skimage import data
    from sklearn.datasets import load_sample_images

    from kira.images import load_image

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("chelsea", "coffee", "rocket", "astronaut", "camera"):
            out.append((name, load_image(getattr(data, name)())))
        out.append(("motorcycle", load_image(data.stereo_motorcycle()[0])))
    sample = load_sample_images()
    for fname, im in zip(sample.filenames, sample.images):
        out.append(("china" if "china" in fname else "flower", im))
    return [(n, im, _box_mask(im.shape[:2], BOXES[n])) for n, im in out]


def _wheel_file(dist: str, suffix: str):
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return None
    hits = [f for f in files if str(f).endswith(suffix)]
    return hits[0].locate() if hits else None


def quokka() -> list[tuple[str, np.ndarray, np.ndarray]]:
    from PIL import Image, ImageDraw

    img, ann = _wheel_file("imgaug", "imgaug/quokka.jpg"), _wheel_file("imgaug", "imgaug/quokka_annotations.json")
    if img is None or ann is None:
        print("  (quokka skipped: pip install --no-deps imgaug==0.4.0)")
        return []
    im = np.asarray(Image.open(img).convert("RGB"))
    poly = [(p["x"], p["y"]) for p in json.loads(Path(ann).read_text())["polygons"][0]["keypoints"]]
    canvas = Image.new("L", (im.shape[1], im.shape[0]), 0)
    ImageDraw.Draw(canvas).polygon(poly, fill=1)
    return [("quokka", im, np.asarray(canvas, bool))]


def nuclei() -> list[tuple[str, np.ndarray, np.ndarray]]:
    img, mask = _wheel_file("stardist", "images/img2d.tif"), _wheel_file("stardist", "images/mask2d.tif")
    if img is None or mask is None:
        print("  (nuclei skipped: pip install --no-deps stardist)")
        return []
    import tifffile

    from kira.images import load_image

    return [("nuclei", load_image(tifffile.imread(img)), tifffile.imread(mask) > 0)]


def fashion(n: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    import gzip

    path = Path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")
    if n <= 0 or not path.is_file():
        if n > 0:
            print("  (Fashion-MNIST skipped: apt-get install dataset-fashion-mnist)")
        return []
    with gzip.open(path) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:n]
    return [(f"fmnist{i}", np.repeat(im[:, :, None], 3, axis=2), im > 0) for i, im in enumerate(x)]


class CentreProposer:
    """The trivial baseline: attention falls off with the distance to the image's centre."""

    def propose(self, image: np.ndarray) -> np.ndarray:
        g = (np.arange(16) + 0.5) / 16 - 0.5
        return np.ascontiguousarray(-(g[:, None] ** 2 + g[None, :] ** 2), dtype=np.float32)


def auc(score: np.ndarray, mask: np.ndarray) -> float:
    """Area under the ROC curve of `score` as a predictor of `mask` (ties count half)."""
    from scipy.stats import rankdata

    pos, n = int(mask.sum()), mask.size
    if pos in (0, n):
        return float("nan")
    ranks = rankdata(score.ravel())
    return float((ranks[mask.ravel()].sum() - pos * (pos + 1) / 2) / (pos * (n - pos)))


def measure(proposer, name: str, items, config) -> dict[str, float]:
    from PIL import Image

    from kira.knowledge_base.chunker import region_boxes

    rows = []
    t = time.process_time()
    for _, im, mask in items:
        h, w = mask.shape
        grid = np.asarray(proposer.propose(im), np.float32)
        full = np.asarray(Image.fromarray(grid, mode="F").resize((w, h), Image.BILINEAR))
        gy, gx = np.unravel_index(int(np.argmax(grid)), grid.shape)
        py, px = int((gy + 0.5) / grid.shape[0] * h), int((gx + 0.5) / grid.shape[1] * w)
        if name == "centre":
            boxes = [((w // 4, h // 4, w - w // 4, h - h // 4), 1.0)]
        else:
            boxes = region_boxes(im, proposer, config)
        union = np.zeros_like(mask)
        for box, _ in boxes:
            union |= _box_mask(mask.shape, box)
        top = _box_mask(mask.shape, boxes[0][0]) if boxes else np.zeros_like(mask)
        rows.append((auc(full, mask), float(mask[py, px]), float((top & mask).sum() / max((top | mask).sum(), 1)),
                     float((union & mask).sum() / max(mask.sum(), 1)), float((union & mask).sum() / max(union.sum(), 1))
                     if union.any() else 0.0, len(boxes)))
    r = np.nanmean(np.array(rows, np.float64), axis=0)
    return {"auc": r[0], "hit": r[1], "iou": r[2], "cover": r[3], "prec": r[4], "n": r[5],
            "ms": (time.process_time() - t) / max(len(items), 1) * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fashion", type=int, default=500, help="Fashion-MNIST test images (0: none)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--k-sigma", type=float, default=None, help="extract_regions threshold (default: ChunkingConfig's)")
    args = ap.parse_args()
    from kira.config import ChunkingConfig
    from kira.models.cnn.encoder import ActivationProposer, CnnImageEncoder
    from kira.models.default.saliency import SaliencyProposer

    config = ChunkingConfig() if args.k_sigma is None else ChunkingConfig(region_k_sigma=args.k_sigma)
    proposers = {"cnn": ActivationProposer(CnnImageEncoder(threads=args.threads, prefer_cuda=False)),
                 "saliency": SaliencyProposer(), "centre": CentreProposer()}
    sets = {"photos (8, boxes by eye)": photos(), "quokka (polygon)": quokka(), "nuclei (instance mask)": nuclei(),
            f"Fashion-MNIST ({args.fashion}, non-background)": fashion(args.fashion)}
    print(f"load average {os.getloadavg()[0]:.1f}; k_sigma {config.region_k_sigma}, "
          f"at most {config.max_regions} regions\n")
    print("| set | proposer | AUC | hit | top IoU | cover | prec | regions | CPU ms/img |\n|---|---|---|---|---|---|---|---|---|")
    for set_name, items in sets.items():
        if not items:
            continue
        mask_share = float(np.mean([m.mean() for _, _, m in items]))
        for name, proposer in proposers.items():
            r = measure(proposer, name, items, config)
            print(f"| {set_name}, mask {mask_share:.0%} of image | {name} | {r['auc']:.3f} | {r['hit']:.2f} | "
                  f"{r['iou']:.3f} | {r['cover']:.2f} | {r['prec']:.2f} | {r['n']:.1f} | {r['ms']:.1f} |", flush=True)
    photo_items = sets["photos (8, boxes by eye)"]
    print("\nper photo, AUC cnn / saliency / centre:")
    for item in photo_items + sets["quokka (polygon)"] + sets["nuclei (instance mask)"]:
        a = [measure(p, n, [item], config)["auc"] for n, p in proposers.items()]
        print(f"  {item[0]}: {a[0]:.3f} / {a[1]:.3f} / {a[2]:.3f}")


if __name__ == "__main__":
    main()
