"""Few-shot adaptation on real labelled image sets: frozen, ProtoNet, projection head, local (patch)
prototypes, and the method `kira.adapt.validation` chooses, per image encoder.

Sets (whatever is on disk; nothing is downloaded): Fashion-MNIST (Debian `dataset-fashion-mnist`,
/usr/share/datasets/fashion-mnist, training split), scikit-learn digits (ships in the wheel;
8x8 scans shown to the encoders at 32x32, nearest-neighbour), LFW people (only when
scikit-learn's data home already holds it; else reported as skipped). Each set's pool is the
first `--pool` images of every class; each image is encoded once per encoder as kira ingests
it (the whole image plus a 4x4 patch grid: `encode_boxes` for the CNNs, crops for the pixel
descriptor; "fused" is built from the MobileNetV2 and pixel vectors exactly as
kira.models.fused joins them) and cached under /tmp/kira_fewshot_cache.

Episodes: every class, `shots` support images and `--queries` query images per class, drawn
from the pool with a seed per (set, shots, draw), the same episodes for every encoder. Per
episode each method is fitted on the support set and scored on the queries (accuracy);
"adapted" is the method validation chose on the support set alone. Reported: mean accuracy and
its 95% interval (1.96 standard errors over draws), and adapted - frozen paired per draw.

    python -m benchmarks.suites.fewshot_real --quick                    # CI size: pixel encoder, 5 draws
    nice -n 10 python -m benchmarks.suites.fewshot_real --out /tmp/fewshot.json   # full run (minutes)
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # small matrices: one thread each, kind to shared cores
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

CACHE = Path("/tmp/kira_fewshot_cache")
FMNIST = Path("/usr/share/datasets/fashion-mnist")
GRID = 4  # kira's default patch grid (ChunkingConfig.patch_grid)
ENCODERS = ("pixel", "mobilenet_v2", "efficientnet_lite0", "fused")
METHODS = ("frozen", "protonet", "projection", "local")


def load_sets(pool: int) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, str]]:
    """{name: (images uint8 (n, h, w), labels (n,))} with the first `pool` images of each class, and
    {name: why skipped}."""
    sets, skipped = {}, {}
    img = FMNIST / "train-images-idx3-ubyte.gz"
    if img.is_file():
        with gzip.open(img) as f:
            x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        with gzip.open(FMNIST / "train-labels-idx1-ubyte.gz") as f:
            y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
        sets["fashion_mnist"] = _first_per_class(x, y, pool)
    else:
        skipped["fashion_mnist"] = f"{img} not found: apt-get install dataset-fashion-mnist"
    from sklearn.datasets import load_digits

    d = load_digits()
    digits = np.kron(d.images / 16.0, np.ones((4, 4))) * 255  # 8x8 -> 32x32, nearest
    sets["digits"] = _first_per_class(digits.astype(np.uint8), d.target, pool)
    try:
        from sklearn.datasets import fetch_lfw_people

        lfw = fetch_lfw_people(min_faces_per_person=pool, download_if_missing=False)
        sets["lfw_people"] = _first_per_class((lfw.images * 255 / max(lfw.images.max(), 1)).astype(np.uint8),
                                              lfw.target, pool)
    except (OSError, IOError) as exc:
        skipped["lfw_people"] = f"not on disk and nothing may be downloaded ({type(exc).__name__})"
    return sets, skipped


def _first_per_class(x: np.ndarray, y: np.ndarray, pool: int) -> tuple[np.ndarray, np.ndarray]:
    keep = np.sort(np.concatenate([np.flatnonzero(y == c)[:pool] for c in np.unique(y)]))
    return x[keep], y[keep]


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)).astype(np.float32)


def encode(set_name: str, encoder: str, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(document vectors (n, d), patch vectors (n, GRID*GRID, d)) of `images`, cached under CACHE."""
    path = CACHE / f"{set_name}-{encoder}-{len(images)}.npz"
    if path.is_file():
        with np.load(path) as f:
            return f["doc"], f["patches"]
    if encoder == "fused":  # kira.models.fused: each part unit length, weighted sqrt(1-w), sqrt(w)
        from kira.models.fused import DEFAULT_PIXEL_WEIGHT as w

        (cd, cp), (pd, pp) = encode(set_name, "mobilenet_v2", images), encode(set_name, "pixel", images)
        doc = np.concatenate([np.sqrt(1 - w) * _unit(cd), np.sqrt(w) * _unit(pd)], axis=-1)
        patches = np.concatenate([np.sqrt(1 - w) * _unit(cp), np.sqrt(w) * _unit(pp)], axis=-1)
        return doc.astype(np.float32), patches.astype(np.float32)
    from kira.knowledge_base.chunker import patch_boxes
    from kira.models import load_default

    enc = load_default(image_encoder=encoder, threads=1, tagger=False).image
    h, w_ = images.shape[1:3]
    boxes = patch_boxes(w_, h, GRID)
    t = time.perf_counter()
    boxed = getattr(enc, "encode_boxes", None)
    rows = []
    for im in images:
        rgb = np.repeat(im[:, :, None], 3, axis=2)
        if callable(boxed):
            rows.append(boxed(rgb, [None, *boxes]))
        else:
            crops = [rgb] + [np.ascontiguousarray(rgb[y0:y1, x0:x1]) for x0, y0, x1, y1 in boxes]
            rows.append(enc.encode(crops))
    out = np.stack(rows).astype(np.float32)
    print(f"  encoded {set_name} with {encoder}: {len(images) / (time.perf_counter() - t):.0f} images/s", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, doc=out[:, 0], patches=out[:, 1:])
    os.replace(tmp, path)
    return out[:, 0], out[:, 1:]


def episode(labels: np.ndarray, shots: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    support, query = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        support.extend(idx[:shots])
        query.extend(idx[shots : shots + queries])
    return np.asarray(support), np.asarray(query)


def run_cell(doc: np.ndarray, patches: np.ndarray, labels: np.ndarray, shots: int, draws: int, queries: int,
             seed0: int) -> dict[str, object]:
    """Accuracy per method and of the validated choice over `draws` episodes."""
    from kira.adapt.fewshot import TRAINED, fit_classifier
    from kira.adapt.validation import validate

    names = labels.astype(str)
    acc: dict[str, list[float]] = {m: [] for m in (*METHODS, "adapted")}
    chosen: dict[str, int] = {}
    for draw in range(draws):
        s, q = episode(labels, shots, queries, seed0 + draw)
        scores = {}
        for m in METHODS:
            if m in TRAINED and shots < 2:
                continue
            clf = fit_classifier(m, doc[s], names[s], patches[s] if m == "local" else None, seed=draw)
            pred = clf.predict(doc[q], patches[q] if m == "local" else None)
            scores[m] = float(np.mean(np.asarray(pred) == names[q]))
            acc[m].append(scores[m])
        report = validate(doc[s], names[s], patches[s], seed=draw)
        acc["adapted"].append(scores[report.chosen])
        chosen[report.chosen] = chosen.get(report.chosen, 0) + 1
    out: dict[str, object] = {"chosen": chosen}
    for m, v in acc.items():
        if v:
            a = np.asarray(v)
            out[m] = (float(a.mean()), float(1.96 * a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else 0.0)
    diff = np.asarray(acc["adapted"]) - np.asarray(acc["frozen"])
    out["adapted-frozen"] = (float(diff.mean()), float(1.96 * diff.std(ddof=1) / np.sqrt(len(diff))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI size: pixel encoder, pool 20, 5 draws, 1 and 5 shots")
    parser.add_argument("--encoders", nargs="+", default=None, choices=ENCODERS)
    parser.add_argument("--sets", nargs="+", default=None)
    parser.add_argument("--shots", nargs="+", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--pool", type=int, default=None, help="images per class in each set's pool (default 40)")
    parser.add_argument("--queries", type=int, default=10, help="query images per class per episode")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    quick = args.quick
    encoders = args.encoders or (["pixel"] if quick else list(ENCODERS))
    shots_list = args.shots or ([1, 5] if quick else [1, 5, 10])
    draws = args.draws or (5 if quick else 20)
    pool = args.pool or (20 if quick else 40)
    sets, skipped = load_sets(pool)
    if args.sets:
        sets = {k: v for k, v in sets.items() if k in args.sets}
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    results = {"skipped": skipped, "draws": draws, "pool": pool, "queries": args.queries, "cells": []}
    print("| set | encoder | shots | frozen | protonet | projection | local | adapted | adapted - frozen | chosen |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for set_name, (images, labels) in sets.items():
        for encoder in encoders:
            doc, patches = encode(set_name, encoder, images)
            for shots in shots_list:
                seed0 = 1000 * shots + sum(map(ord, set_name))
                cell = run_cell(doc, patches, labels, shots, draws, args.queries, seed0)
                results["cells"].append({"set": set_name, "encoder": encoder, "shots": shots, **cell})
                fmt = [f"{cell[m][0]:.3f} ± {cell[m][1]:.3f}" if m in cell else "-" for m in (*METHODS, "adapted")]
                d = cell["adapted-frozen"]
                print(f"| {set_name} | {encoder} | {shots} | {' | '.join(fmt)} | {d[0]:+.3f} ± {d[1]:.3f} | "
                      f"{', '.join(f'{k} {v}' for k, v in sorted(cell['chosen'].items()))} |", flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
