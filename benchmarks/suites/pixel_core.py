"""The pixel descriptor and saliency map: numpy specification vs kira._core, side by side.

Issue 33.1 moved `PixelEncoder.encode_prepared` and `SaliencyProposer.propose_prepared` into the
compiled core; the numpy implementation they replaced is kept as the specification in
tests/models/pixel_reference.py. This times both, alternately, in one process on the same real
images (scikit-image photos and crops, digits, DICOM, a uniform image: the parity test's set),
and prints per-image costs, their ratio, the max abs difference and the load average. On a
shared machine the ratio is the figure to read.

Usage (from the repository root): python -m benchmarks.suites.pixel_core [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
from PIL import Image

from kira.models.default.pixel_encoder import PixelEncoder
from kira.models.default.saliency import SaliencyProposer
from benchmarks.peers.pixel_reference import real_images, reference_encode_prepared, reference_saliency


def _best(fn: Callable[[], object], repeats: int) -> float:
    """Fastest of `repeats` runs, seconds (the least disturbed by other processes)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    images = real_images()
    encoder, proposer = PixelEncoder(), SaliencyProposer()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| what | batch | numpy ms/image | core ms/image | ratio | max abs diff |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for batch in (18, 128):
        rgb = encoder.prepare([images[i % len(images)] for i in range(batch)])
        numpy_s = _best(lambda: reference_encode_prepared(encoder, rgb), args.repeats)
        core_s = _best(lambda: encoder.encode_prepared(rgb), args.repeats)
        diff = float(np.abs(encoder.encode_prepared(rgb) - reference_encode_prepared(encoder, rgb)).max())
        print(f"| PixelEncoder.encode_prepared (64 x 64) | {batch} | {numpy_s / batch * 1e3:.3f} | "
              f"{core_s / batch * 1e3:.3f} | {numpy_s / core_s:.1f} | {diff:.1e} |")
    side = proposer.config.work_size
    small = np.stack([np.asarray(Image.fromarray(images[i % len(images)]).convert("RGB").resize((side, side)))
                      for i in range(18)])
    numpy_s = _best(lambda: reference_saliency(proposer.config, small), args.repeats)
    core_s = _best(lambda: proposer.propose_prepared(small), args.repeats)
    diff = float(np.abs(proposer.propose_prepared(small) - reference_saliency(proposer.config, small)).max())
    print(f"| SaliencyProposer.propose_prepared ({side} -> {proposer.config.grid}) | 18 | {numpy_s / 18 * 1e3:.3f} | "
          f"{core_s / 18 * 1e3:.3f} | {numpy_s / core_s:.1f} | {diff:.1e} |")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
