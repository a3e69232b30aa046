"""Fashion-MNIST retrieval with kira's image encoders, and the projection head at scale.

Data: Debian's `dataset-fashion-mnist` (`apt-get install dataset-fashion-mnist`: the
idx files under /usr/share/datasets/fashion-mnist). Gallery: the first `--gallery`
training images; queries: the first `--queries` test images; precision@10 is the share
of a query's 10 nearest gallery images (cosine) with the query's class.

Side by side in one run: raw pixels (784-d), the pixel descriptor, the CNN (frozen), the
CNN fused with the pixel descriptor (the default image encoder, kira.models.fused) and
one of them (`--project`) + a projection head trained with kira.adapt.train_projection on the first
`--project-train` training images. Features are cached under KIRA_CACHE_DIR/bench, so a
second run only trains. `--scale-only` times train_projection on 60,000 x `--scale-dim`
features (1,977: the default fused encoder's width; 1,280: the CNN alone) and reports its
peak memory, without encoding anything.

    python -m benchmarks.studies.compare_fashion_mnist --gallery 10000 --queries 2000 --project-train 10000
    python -m benchmarks.studies.compare_fashion_mnist --scale-only
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import time
from pathlib import Path

import numpy as np

ROOT = Path("/usr/share/datasets/fashion-mnist")


def load(split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (n, 28, 28), labels int (n,)) of 'train' or 't10k'."""
    img, lab = ROOT / f"{split}-images-idx3-ubyte.gz", ROOT / f"{split}-labels-idx1-ubyte.gz"
    if not img.is_file():
        raise FileNotFoundError(f"{img} not found: apt-get install dataset-fashion-mnist")
    with gzip.open(img) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(lab) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return x, y


def features(name: str, images: np.ndarray, tag: str) -> np.ndarray:
    """Unit-row features of `images` with encoder `name` ('raw', 'pixel', 'mobilenet_v2', ...), cached."""
    from kira.models.cnn.weights import cache_dir

    path = cache_dir() / "bench" / f"fmnist-{name}-{tag}-{len(images)}.npy"
    if path.is_file():
        return np.load(path)
    if name == "fused":  # exactly FusedImageEncoder.encode, built from the parts' (cached) features
        from kira.models.fused import DEFAULT_PIXEL_WEIGHT as w

        return np.concatenate([np.sqrt(1 - w) * features("mobilenet_v2", images, tag),
                               np.sqrt(w) * features("pixel", images, tag)], axis=1).astype(np.float32)
    prefixes = sorted(path.parent.glob(f"fmnist-{name}-{tag}-*.npy"), key=lambda p: -int(p.stem.split("-")[-1]))
    for prefix in prefixes:  # a cached shorter prefix of the same images: encode only the rest
        n = int(prefix.stem.split("-")[-1])
        if n < len(images):
            head = np.load(prefix)
            rest = features(name, images[n:], f"{tag}@{n}")
            f = np.concatenate([head, rest])
            np.save(path, f)
            return f
    t = time.perf_counter()
    if name == "raw":
        f = images.reshape(len(images), -1).astype(np.float32)
        f -= f.mean(axis=1, keepdims=True)
    else:
        from kira.models import load_default

        enc = load_default(image_encoder=name, threads=2).image
        f = np.concatenate([enc.encode(list(images[i : i + 256])) for i in range(0, len(images), 256)])
    f = (f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    print(f"  encoded {len(images)} {tag} images with {name}: {len(images) / (time.perf_counter() - t):.0f} images/s")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, f)
    return f


def precision_at_10(q: np.ndarray, qy: np.ndarray, g: np.ndarray, gy: np.ndarray) -> float:
    hits = []
    for s in range(0, len(q), 500):
        sims = q[s : s + 500] @ g.T
        top = np.argpartition(-sims, 10, axis=1)[:, :10]
        hits.append((gy[top] == qy[s : s + 500, None]).mean(axis=1))
    return float(np.concatenate(hits).mean())


def scale_only(rows: int, dim: int, epochs: int) -> None:
    from kira.adapt.projection import train_projection

    rng = np.random.default_rng(0)
    centres = rng.standard_normal((10, dim)).astype(np.float32)
    y = rng.integers(0, 10, rows)
    x = centres[y] + 3.0 * rng.standard_normal((rows, dim), dtype=np.float32)  # float32 at once: no float64 peak
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t, c = time.perf_counter(), time.process_time()
    res = train_projection(x, y.astype(str), epochs=epochs, batch_size=128, seed=0)
    dt, dc = time.perf_counter() - t, time.process_time() - c
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"train_projection on {rows} x {dim}, {epochs} epochs, batch 128: {dt:.0f} s wall, {dc:.0f} CPU-s, "
          f"peak RSS {peak:.0f} MiB (inputs alone {x.nbytes / 2**20:.0f} MiB, {before:.0f} MiB before); "
          f"train recall@1 {res.history.train_recall_at_1[0]:.3f} -> {res.history.train_recall_at_1[-1]:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gallery", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=2_000)
    ap.add_argument("--encoders", default="raw,pixel,mobilenet_v2,fused")
    ap.add_argument("--project", default="fused", help="encoder whose features get a projection head ('' for none)")
    ap.add_argument("--project-train", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--scale-only", action="store_true")
    ap.add_argument("--scale-dim", type=int, default=1977, help="feature width for --scale-only (1977: the fused default)")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    if args.scale_only:
        scale_only(60_000, args.scale_dim, args.epochs)
        return
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    gy, qy = ytr[: args.gallery], yte[: args.queries]
    rows = []
    for name in [e for e in args.encoders.split(",") if e]:
        g = features(name, xtr[: args.gallery], "train")
        q = features(name, xte[: args.queries], "test")
        rows.append((name, precision_at_10(q, qy, g, gy)))
    if args.project:
        from kira.adapt.projection import train_projection

        n = max(args.project_train, args.gallery)
        tr = features(args.project, xtr[:n], "train") if n != args.gallery else features(args.project, xtr[: args.gallery], "train")
        t = time.perf_counter()
        head = train_projection(tr[: args.project_train], ytr[: args.project_train].astype(str), epochs=args.epochs,
                                batch_size=128, seed=0).head
        dt = time.perf_counter() - t
        g = head.apply(features(args.project, xtr[: args.gallery], "train"))
        q = head.apply(features(args.project, xte[: args.queries], "test"))
        rows.append((f"{args.project} + projection ({args.project_train} train, {args.epochs} epochs, {dt:.0f} s)",
                     precision_at_10(q, qy, g, gy)))
    print(f"\nFashion-MNIST, gallery {args.gallery} train images, {args.queries} test queries\n")
    print("| features | precision@10 |\n|---|---|")
    for name, p in rows:
        print(f"| {name} | {p:.3f} |")


if __name__ == "__main__":
    main()
