"""Ingest end to end against the image encoder alone, side by side in one process.

Issue 33.1: the default ingest (decode, encode, regions, descriptions, text pieces, commit) should
run at >= 0.8x the throughput of the default stack's image encoder alone, on the same machine
and the same images. Both run here, alternately, in one process with one model stack:

* **encoder alone**: the images decoded beforehand (not timed), then ``stack.image.encode`` over
  them in batches of `--batch` (the document vector of every image, nothing else);
* **ingest**: ``KnowledgeBase.create`` + ``kb.ingest(folder)`` + ``close`` into a new embedded
  knowledge base, with the defaults (every chunk level, text pieces, thumbnails), and once more
  with the text pieces left for later (``GroundingConfig.pieces_at_ingest = False``);
* with ``--before``, also ingest as it stored text pieces before issue 33's follow-up (every piece of
  document and region descriptions, appearance parts included: ``kira.knowledge_base.pieces.item_pieces`` with
  ``regions`` and ``appearance`` True) and with only the appearance parts held back (``regions`` True).

Besides images/s (wall) it prints CPU-ms per image (all threads of the process): on a machine
shared with other jobs the CPU ratio is the steadier figure.

The CNN's content-keyed forward cache is emptied before each run, so neither run reuses the
other's forward passes. Wall time on a shared machine moves with its load: the load average is
printed, the ratio is the figure to read. Images: real pictures only (scikit-image's data
images and resized / cropped copies of them, scikit-learn's two sample photographs, and
Fashion-MNIST items from Debian's ``dataset-fashion-mnist``, upscaled 4x), about `--images` files.

With ``--asks``, after each kind of ingest, the CPU cost of 8 text questions (the pieces not stored
are encoded when an ask cites them), and whether every kind gives the same answers.

With ``--stages``, instead, each stage's own CPU per image inside the ingest (benchmarks/suites/ingest_stages.py).

Usage: python -m benchmarks.suites.ingest_throughput [--images 300] [--rounds 2] [--before] [--asks] [--stages]
       [--profile FILE.prof]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

FASHION = Path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")
SKIMAGE = ("astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "moon", "page", "horse", "text",
           "immunohistochemistry", "retina", "motorcycle_left", "cat", "grass", "gravel", "brick", "clock",
           "hubble_deep_field", "colorwheel", "logo", "cell", "human_mitosis", "microaneurysms", "eagle")


def _uint8(pixels: np.ndarray) -> np.ndarray:
    if pixels.dtype == bool:
        return pixels.astype(np.uint8) * 255
    if pixels.dtype != np.uint8:
        return (255 * (pixels - pixels.min()) / max(float(np.ptp(pixels)), 1e-9)).astype(np.uint8)
    return pixels


def write_images(folder: Path, n: int) -> int:
    """About `n` real images into `folder` (module docstring); returns how many were written."""
    from PIL import Image
    from skimage import data
    from sklearn.datasets import load_sample_images

    folder.mkdir(parents=True, exist_ok=True)
    photos: list[tuple[str, Image.Image]] = []
    for name in SKIMAGE:
        try:
            pixels = _uint8(np.asarray(getattr(data, name)()))
        except Exception:  # noqa: BLE001 - a data file this scikit-image does not ship
            continue
        if pixels.ndim == 3 and pixels.shape[2] > 3:
            pixels = pixels[..., :3]
        if pixels.ndim == 3 and pixels.shape[2] == 2 or pixels.ndim > 3:
            continue
        photos.append((name, Image.fromarray(pixels)))
    for i, pixels in enumerate(load_sample_images().images):
        photos.append((f"sample{i}", Image.fromarray(pixels)))
    made = 0
    for name, im in photos:  # each photo at <= 512 px, a 256 px copy and a cropped 320 px copy
        for tag, side, crop in (("a", 512, False), ("b", 256, False), ("c", 320, True)):
            if made >= n:
                return made
            copy = im.copy()
            if crop:
                w, h = copy.size
                copy = copy.crop((w // 8, h // 8, w - w // 8, h - h // 8))
            copy.thumbnail((side, side))
            copy.save(folder / f"{name}_{tag}.{'jpg' if tag == 'b' and copy.mode == 'RGB' else 'png'}")
            made += 1
    if FASHION.is_file() and made < n:
        with gzip.open(FASHION) as f:
            items = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        for i in range(n - made):
            Image.fromarray(np.kron(items[i], np.ones((4, 4), np.uint8))).save(folder / f"fashion_{i:04d}.png")
            made += 1
    return made


def _clear_forward_cache(stack) -> None:
    for enc in (stack.image, getattr(stack.image, "cnn", None)):
        cache = getattr(enc, "_cache", None)
        if cache is not None:
            cache.clear()


def encoder_alone(stack, folder: Path, batch: int) -> tuple[float, float, int]:
    """(wall s, CPU s, images) of `stack.image.encode` over the decoded images in `folder`."""
    from kira.images import load_image
    from kira.knowledge_base.ingest import collect_paths

    images = [load_image(p) for p in collect_paths(folder)]
    _clear_forward_cache(stack)
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, len(images), batch):
        stack.image.encode(images[start : start + batch])
    return time.perf_counter() - t0, time.process_time() - c0, len(images)


def ingest_run(stack, folder: Path, work: Path, *, pieces: str = "default") -> tuple[float, float, int]:
    """(wall s, CPU s, images added) of a default ingest of `folder` into a new knowledge base. `pieces`:
    "default"; "none" leaves the text pieces out (`GroundingConfig.pieces_at_ingest = False`); "before" stores
    every piece of document and region descriptions (as before issue 33's follow-up); "looks" holds back only
    the appearance parts (regions' own pieces stored)."""
    import dataclasses
    import functools
    from unittest import mock

    import kira.knowledge_base.writing as writing
    from kira.config import KiraConfig
    from kira.knowledge_base import KnowledgeBase

    config = KiraConfig()
    if pieces == "none":
        config = dataclasses.replace(config, grounding=dataclasses.replace(config.grounding, pieces_at_ingest=False))
    rule = {"before": {"regions": True, "appearance": True}, "looks": {"regions": True}}.get(pieces, {})
    target = work / "kb"
    shutil.rmtree(target, ignore_errors=True)
    _clear_forward_cache(stack)
    with mock.patch.object(writing, "item_pieces", functools.partial(writing.item_pieces, **rule)):
        t0, c0 = time.perf_counter(), time.process_time()
        with KnowledgeBase.create(target, config=config, models=stack) as kb:
            summary = kb.ingest(folder, progress=False)
        return time.perf_counter() - t0, time.process_time() - c0, len(summary.added)


QUESTIONS = ("a cup of coffee", "a cat", "a rocket", "a dark greyscale image", "coins", "a bright colourful photo",
             "a shoe", "the surface of the moon")


def ask_cost(stack, work: Path) -> tuple[float, float, list[tuple[str, float | None]]]:
    """(CPU s per ask, texts encoded per ask, answers) over `QUESTIONS` on the knowledge base the last
    `ingest_run` left in `work`: the second of two rounds, each with a new `Kira`."""
    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    encode, texts = stack.text.encode, []

    def recording(batch):
        texts.extend(batch)
        return encode(batch)

    stack.text.encode = recording
    try:
        with KnowledgeBase.open(work / "kb", models=stack, read_only=True) as kb:
            for _ in range(2):
                kira, answers = Kira(kb), []
                texts.clear()
                c0 = time.process_time()
                for question in QUESTIONS:
                    result = kira.ask(question)
                    answers.append((result.answer.text, result.answer.grounding))
                cpu = time.process_time() - c0
    finally:
        stack.text.encode = encode
    return cpu / len(QUESTIONS), len(texts) / len(QUESTIONS), answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16, help="images per encoder call (encoder alone)")
    parser.add_argument("--profile", help="write a cProfile of one ingest run here and print its top entries")
    parser.add_argument("--before", action="store_true",
                        help="also ingest storing text pieces as before (all, and all but the appearance parts)")
    parser.add_argument("--stages", action="store_true",
                        help="only the CPU of each ingest stage per image (one onnxruntime thread per session)")
    parser.add_argument("--asks", action="store_true",
                        help="after each kind of ingest, the CPU cost of asking 8 questions (what moved to ask time)")
    args = parser.parse_args()

    from kira.models import load_default

    if args.stages:
        return stages(args)
    stack = load_default()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        n = write_images(work / "images", args.images)
        print(f"{n} real images; stack: {stack.identity()}; cores: {os.cpu_count()}")
        ingest_run(stack, work / "images", work)  # warm-up: graphs built, sessions and caches of the models ready
        if args.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.enable()
            ingest_run(stack, work / "images", work)
            prof.disable()
            prof.dump_stats(args.profile)
            pstats.Stats(args.profile).sort_stats("cumulative").print_stats(35)
        names = {"default": "ingest, end to end (default)", "none": "ingest, text pieces left for later",
                 "before": "ingest, pieces as before (all of documents and regions)",
                 "looks": "ingest, pieces as before but the appearance parts"}
        kinds = ["default", "none"] + (["before", "looks"] if args.before else [])
        enc: list[tuple[float, float, int]] = []
        ing: dict[str, list[tuple[float, float, int]]] = {k: [] for k in kinds}
        for _ in range(args.rounds):
            enc.append(encoder_alone(stack, work / "images", args.batch))
            for kind in kinds:
                ing[kind].append(ingest_run(stack, work / "images", work, pieces=kind))
        if args.asks:
            answers = {}
            for kind in kinds:
                ingest_run(stack, work / "images", work, pieces=kind)
                cpu, texts, answers[kind] = ask_cost(stack, work)
                print(f"asks after ingest '{kind}': {1000 * cpu:.0f} CPU-ms per ask, {texts:.1f} texts encoded per ask")
            same = all(len(a) == len(answers["default"]) and all(
                x[0] == y[0] and abs((x[1] or 0) - (y[1] or 0)) < 1e-5 for x, y in zip(a, answers["default"]))
                for a in answers.values())
            print(f"same answers and grounding after every kind of ingest: {same}")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("| run | round | wall s | CPU s | images | images/s |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name, runs in (("image encoder alone", enc), *((names[k], ing[k]) for k in kinds)):
            for r, (wall, cpu, count) in enumerate(runs, 1):
                print(f"| {name} | {r} | {wall:.2f} | {cpu:.2f} | {count} | {count / wall:.1f} |")
        enc_rate = max(c / w for w, _, c in enc)
        enc_cpu = min(cpu / c for _, cpu, c in enc)
        for name, runs in ((names[k], ing[k]) for k in kinds):
            rate, cpu = max(c / w for w, _, c in runs), min(cpu / c for _, cpu, c in runs)
            print(f"{name}: {rate:.1f} images/s, {1000 * cpu:.0f} CPU-ms/image; ratio to the encoder alone "
                  f"({enc_rate:.1f} images/s, {1000 * enc_cpu:.0f} CPU-ms/image): wall {rate / enc_rate:.2f}, "
                  f"CPU {enc_cpu / cpu:.2f}")


def stages(args: argparse.Namespace) -> None:
    """Each stage's own CPU per image in a default ingest (benchmarks/suites/ingest_stages.py), best of `--rounds`."""
    from benchmarks.suites.ingest_stages import StageClock, stage_table, timed_stages

    from kira.models import load_default

    stack = load_default(threads=1)  # a stage's CPU is then its thread's
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        n = write_images(work / "images", args.images)
        ingest_run(stack, work / "images", work)  # warm-up
        best: tuple[float, StageClock, float] | None = None
        for _ in range(args.rounds):
            _, encoder_cpu, _ = encoder_alone(stack, work / "images", args.batch)
            clock = StageClock()
            with timed_stages(clock):
                _, cpu, added = ingest_run(stack, work / "images", work)
            if best is None or cpu < best[0]:
                best = (cpu, clock, encoder_cpu)
        assert best is not None
        print(f"{n} real images, {added} added; load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(stage_table(best[1], added, best[0], best[2]))


if __name__ == "__main__":
    main()
