"""The CNN fused with the pixel descriptor, against each alone, on real labelled images.

Fusion: the L2-normalised parts concatenated with weights sqrt(1 - w) and sqrt(w), so
the fused vector has unit norm and its cosine is (1 - w) cos_cnn + w cos_pixel (score
fusion and concatenation are the same thing). The weight is chosen on one set only,
Fashion-MNIST *training* images (queries: training images 10,000-11,999 against the
first 10,000), and the figures for every weight are then reported on sets it was not
chosen on:

- Fashion-MNIST: 2,000 test queries against the 10,000-image gallery, precision@10;
- scikit-learn's digits (1,797 real 8 x 8 scans), leave-one-out precision@10;
- skimage's LFW subset (100 faces, 100 non-faces, 25 x 25), leave-one-out precision@10;
- augmented copies: 20 skimage.data images x 5 (85% crop, mirror, +20% brightness,
  noise; as in compare_image_encoders.py) against 23 real originals, share at rank 1.

Features are cached under KIRA_CACHE_DIR/bench (shared with compare_fashion_mnist.py).

    python -m benchmarks.studies.compare_fused_encoder            # ~3 min on 2 cores when nothing is cached
"""

from __future__ import annotations

import os
import warnings

import numpy as np

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)


def fuse(cnn: np.ndarray, pixel: np.ndarray, w: float) -> np.ndarray:
    return np.concatenate([np.sqrt(1.0 - w) * cnn, np.sqrt(w) * pixel], axis=1).astype(np.float32)


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def loo_precision_at_10(f: np.ndarray, y: np.ndarray) -> float:
    s = f @ f.T
    np.fill_diagonal(s, -np.inf)
    top = np.argpartition(-s, 10, axis=1)[:, :10]
    return float((y[top] == y[:, None]).mean())


def encode(stack_name: str, images: list[np.ndarray]) -> np.ndarray:
    from kira.models import load_default

    enc = load_default(image_encoder=stack_name, threads=2).image
    return unit(np.concatenate([enc.encode(images[i : i + 256]) for i in range(0, len(images), 256)]))


def main() -> None:
    from benchmarks.studies import compare_fashion_mnist as fm
    from benchmarks.studies import compare_image_encoders as ci

    os.environ.setdefault("OMP_NUM_THREADS", "2")
    xtr, ytr = fm.load("train")
    xte, yte = fm.load("t10k")
    feats = {}
    for name in ("mobilenet_v2", "pixel"):
        feats[name] = {
            "gallery": fm.features(name, xtr[:10_000], "train"),
            "val": fm.features(name, xtr[10_000:12_000], "train@10000"),
            "test": fm.features(name, xte[:2_000], "test"),
        }
    from skimage import data
    from sklearn.datasets import load_digits

    digits = load_digits()
    dig = [np.clip(im * 16, 0, 255).astype(np.uint8) for im in digits.images]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lfw = data.lfw_subset()
    lfw_ims = [np.clip(im * 255, 0, 255).astype(np.uint8) for im in lfw]
    lfw_y = np.array([1] * 100 + [0] * 100)
    ims = ci.images()
    names = list(ims)
    rng = np.random.default_rng(0)
    queries = [ci.augment(ims[n], rng) for n in names[:20] for _ in range(5)]
    truth = np.repeat(np.arange(20), 5)
    other = {name: {"digits": encode(name, dig), "lfw": encode(name, lfw_ims),
                    "originals": encode(name, [ims[n] for n in names]), "augmented": encode(name, queries)}
             for name in ("mobilenet_v2", "pixel")}

    c, p = feats["mobilenet_v2"], feats["pixel"]
    val = {w: fm.precision_at_10(fuse(c["val"], p["val"], w), ytr[10_000:12_000], fuse(c["gallery"], p["gallery"], w),
                                 ytr[:10_000]) for w in WEIGHTS}
    best = max(val, key=lambda w: (round(val[w], 4), -w))
    print(f"load average {os.getloadavg()[0]:.1f}; weight w of the pixel part chosen on Fashion-MNIST train "
          f"(2,000 train queries vs 10,000 train gallery): w = {best}\n")
    print("| w (pixel share) | FMNIST train-val p@10 (chooses w) | FMNIST test p@10 | digits p@10 | LFW subset p@10 "
          "| augmented copies rank 1 |\n|---|---|---|---|---|---|")
    co, po = other["mobilenet_v2"], other["pixel"]
    for w in WEIGHTS:
        test = fm.precision_at_10(fuse(c["test"], p["test"], w), yte[:2_000], fuse(c["gallery"], p["gallery"], w),
                                  ytr[:10_000])
        d = loo_precision_at_10(fuse(co["digits"], po["digits"], w), digits.target)
        lf = loo_precision_at_10(fuse(co["lfw"], po["lfw"], w), lfw_y)
        r1 = float(np.mean(np.argmax(fuse(co["augmented"], po["augmented"], w)
                                     @ fuse(co["originals"], po["originals"], w).T, axis=1) == truth))
        label = {0.0: "0 (CNN alone)", 1.0: "1 (pixel alone)"}.get(w, f"{w}")
        mark = " **chosen**" if w == best else ""
        print(f"| {label}{mark} | {val[w]:.3f} | {test:.3f} | {d:.3f} | {lf:.3f} | {r1:.2f} |", flush=True)


if __name__ == "__main__":
    main()
