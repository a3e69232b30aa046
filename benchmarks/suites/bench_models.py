"""Speed of the default model stack.

pytest-benchmark suites (CI runs them with --benchmark-disable as a correctness pass):
    python -m pytest benchmarks/suites/bench_models.py --benchmark-enable
Its throughput table (last recorded in `git show 998c7c8^:benchmarks/RESULTS.md`, "Default stack") comes from:
    python -m benchmarks.suites.bench_models            # prints a markdown table
It reports the median of several runs and the machine's load average at the time,
because other processes may share the CPU.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np
import pytest

from kira.models.bridge import TextToImageBridge
from kira.models.default.captioner import DefaultCaptioner
from kira.models.default.pixel_encoder import PixelEncoder
from kira.models.default.saliency import SaliencyProposer

BATCH, SIDE = 500, 256


def random_images(n: int = BATCH, side: int = SIDE, seed: int = 0, unique: int = 50) -> list[np.ndarray]:
    """Smooth random colour images (noise upsampled), so every descriptor has work to do.

    `unique` distinct images are generated and repeated (as copies) up to n.
    """
    from PIL import Image

    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    for _ in range(min(n, unique)):
        small = rng.integers(0, 256, size=(16, 16, 3), dtype=np.uint8)
        big = np.asarray(Image.fromarray(small).resize((side, side), Image.BICUBIC))
        out.append(np.clip(big.astype(np.int16) + rng.integers(-12, 13, size=big.shape), 0, 255).astype(np.uint8))
    return [out[i % len(out)].copy() for i in range(n)]


SENTENCES = [
    "A chest X-ray with a small opacity in the right upper lobe.",
    "Schematic of an RC low-pass filter with an op-amp buffer.",
    "Histology slide, H&E stain, dense lymphocytic infiltrate.",
    "Satellite image of a river delta with agricultural fields.",
] * 16  # 64 sentences


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    return random_images()


def test_pixel_encoder_batch(benchmark, images):
    enc = PixelEncoder()
    out = benchmark(enc.encode, images)
    assert out.shape == (BATCH, enc.dim)


def test_pixel_encoder_throughput_floor(images):
    """Issue 3 asks for >= 500 images/s of 256x256. Measured in process CPU time, which
    other jobs on a shared machine do not inflate (wall-clock figures: see main())."""
    enc = PixelEncoder()
    enc.encode(images[:20])
    start = time.process_time()
    enc.encode(images)
    rate = len(images) / max(time.process_time() - start, 1e-9)
    assert rate >= 500, f"{rate:.0f} images per CPU-second"


def test_saliency_one_image(benchmark, images):
    grid = benchmark(SaliencyProposer().propose, images[0])
    assert grid.shape == (32, 32)


def test_caption_one_image(benchmark, images):
    text = benchmark(DefaultCaptioner().caption, images[0])
    assert text.startswith("A ")


def test_bridge_fit(benchmark):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(300, 384)), np.abs(rng.normal(size=(300, 633)))  # pairs < dims: the dual form
    fit = benchmark(TextToImageBridge().fit, x, y)
    assert fit.pairs == 300


def test_minilm_batch(benchmark, tmp_path_factory):
    from kira.models.minilm import MiniLMEncoder

    enc = MiniLMEncoder(cache=tmp_path_factory.getbasetemp() / "kira-cache")
    out = benchmark(enc.encode, SENTENCES)
    assert out.shape == (len(SENTENCES), 384)


def _median_rate(fn, items: int, repeats: int = 5) -> tuple[float, float]:
    """(items per wall second, items per CPU second of this process), medians over `repeats` runs."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return items / statistics.median(wall), items / max(statistics.median(cpu), 1e-9)


def main() -> None:
    from kira.models.minilm import MiniLMEncoder

    imgs = random_images()
    enc = PixelEncoder()
    sal = SaliencyProposer()
    cap = DefaultCaptioner()
    text = MiniLMEncoder(threads=int(os.environ.get("KIRA_BENCH_THREADS", "0")) or None)
    rows = [
        ("PixelEncoder.encode, batch of 500 RGB 256x256", _median_rate(lambda: enc.encode(imgs), BATCH), "images/s"),
        ("SaliencyProposer.propose, 256x256", _median_rate(lambda: [sal.propose(i) for i in imgs[:50]], 50), "images/s"),
        ("DefaultCaptioner.caption, 256x256", _median_rate(lambda: [cap.caption(i) for i in imgs[:50]], 50), "images/s"),
        ("MiniLM (onnxruntime) batch of 64 sentences", _median_rate(lambda: text.encode(SENTENCES), 64), "sentences/s"),
    ]
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} logical CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; "
          f"python {sys.version.split()[0]}, numpy {np.__version__}; onnxruntime provider {text.provider}")
    print("\n| what | wall-clock rate | per CPU-second |\n| --- | --- | --- |")
    for name, (rate, cpu_rate), unit in rows:
        print(f"| {name} | {rate:,.0f} {unit} | {cpu_rate:,.0f} {unit} |")


if __name__ == "__main__":
    main()
