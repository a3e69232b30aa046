"""The learned default (MobileNetV2 ONNX + ImageNet tagger) against the old pixel descriptor, side by side.

Real images only: the 23 photographs and scans in skimage.data that ship offline plus
scikit-learn's two sample photos. In one process it reports:

1. augmented copies found at rank 1: each of 20 skimage.data images, cropped to 85% at
   a random place, mirrored, brightened by 20% and given Gaussian noise (5 copies each,
   seeded), queried against the 25 originals;
2. text questions on uncaptioned photos: the images whose content has an ImageNet name
   get one everyday question each (QUESTIONS below); a knowledge base of all 25 images
   with no captions is searched on its text index (the question's MiniLM vector against
   the document descriptions); the share whose image is in the top 3;
3. OCR word recall on skimage.data.page() and text() (words read by eye) and on a
   circuit schematic with text labels rendered by schemdraw;
4. encode speed: onnxruntime against torch eager for the same MobileNetV2 (a plain torch
   module loaded with the same weights), same batch, same threads;
5. ingest rate with all chunks (document, regions, patches), in wall-clock images/s and
   CPU-seconds per image.

Figures 1, 2 and 5 are given for the three image encoders side by side: the pixel
descriptor (the old default), MobileNetV2 and the two fused (kira.models.fused); the
column of the current `load_default()` is marked.

    python -m benchmarks.studies.compare_image_encoders            # about 2-3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
import warnings

import numpy as np

SKIMAGE = ["astronaut", "brick", "camera", "chelsea", "clock", "coffee", "coins", "colorwheel", "grass", "gravel",
           "horse", "hubble_deep_field", "immunohistochemistry", "logo", "microaneurysms", "moon", "page", "retina",
           "rocket", "text", "cell"]
# image -> an everyday question about what it shows (its content has an ImageNet class name)
QUESTIONS = {
    "chelsea": "a photo of a cat",
    "coffee": "a cup of coffee",
    "rocket": "a rocket on its launch pad",
    "camera": "a photographer with a camera on a tripod",
    "clock": "a clock",
    "horse": "a horse",
    "china": "a chinese temple or palace",
    "flower": "a flower",
}
PAGE = ("Region-based segmentation Let us first determine markers of the coins and the background. These markers are "
        "pixels that we can label unambiguously as either object or background. Here, the markers are found at the two "
        "extreme parts of the histogram of grey values: >>> markers = np.zeros_like(coins)")
TEXT = "(s) = 1 (t-x) e^-ps ds f(s) = -1 t^n 5"  # handwritten formulae of skimage.data.text(), read by eye


SCHEMATIC = "Battery 9V R1 10k C1 100nF"  # the labels drawn by schematic() below


def schematic() -> np.ndarray:
    """A small circuit with text labels rendered by schemdraw (the demo extra), as RGB."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import schemdraw
    import schemdraw.elements as elm
    from PIL import Image

    with schemdraw.Drawing(show=False) as d:
        d.config(fontsize=16)
        elm.SourceV().label("Battery 9V")
        elm.Resistor().right().label("R1 10k")
        elm.Capacitor().down().label("C1 100nF")
        elm.Line().left()
        elm.Ground()
    return np.asarray(Image.open(io.BytesIO(d.get_imagedata("png"))).convert("RGB"))


def images() -> dict[str, np.ndarray]:
    from skimage import data
    from sklearn.datasets import load_sample_images

    from kira.images import load_image

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in SKIMAGE:
            out[name] = load_image(getattr(data, name)())
    sample = load_sample_images()
    for fname, im in zip(sample.filenames, sample.images):
        out["china" if "china" in fname else "flower"] = im
    return out


def augment(im: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    h, w = im.shape[:2]
    ch, cw = int(h * 0.85), int(w * 0.85)
    y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
    out = im[y : y + ch, x : x + cw, :][:, ::-1].astype(np.float32) * 1.2
    out += rng.normal(0, 8, out.shape)
    return np.clip(out, 0, 255).astype(np.uint8)


def rank1(stack, ims: dict[str, np.ndarray]) -> float:
    names = list(ims)
    gallery = stack.image.encode([ims[n] for n in names])
    rng = np.random.default_rng(0)
    hits = total = 0
    for i, n in enumerate(names[:20]):
        q = stack.image.encode([augment(ims[n], rng) for _ in range(5)])
        hits += int(np.sum(np.argmax(q @ gallery.T, axis=1) == i))
        total += 5
    return hits / total


def text_top3(stack, ims: dict[str, np.ndarray]) -> tuple[float, list[str]]:
    from kira.knowledge_base.kb import KnowledgeBase

    with tempfile.TemporaryDirectory() as d:
        kb = KnowledgeBase.create(f"{d}/kb", models=stack, levels=("document",))
        for n, im in ims.items():
            kb.add_image(im, doc_id=n)
        kb.commit()
        ids, descs = zip(*kb.store.conn.execute("SELECT doc_id, description FROM chunks WHERE level='document'"))
        kb.close()
    dv = stack.text.encode(list(descs))
    found = []
    for name, question in QUESTIONS.items():
        top = np.argsort(-(dv @ stack.text.encode([question])[0]))[:3]
        if name in [ids[t] for t in top]:
            found.append(name)
    return len(found) / len(QUESTIONS), found


def word_recall(truth: str, read: str) -> float:
    words = [w for w in re.findall(r"[a-z0-9]+", truth.lower()) if len(w) > 1]
    squeezed = re.sub(r"[^a-z0-9]", "", read.lower())
    return sum(w in squeezed for w in words) / len(words)


def torch_vs_ort(batch: int, threads: int, repeat: int) -> tuple[float, float]:
    import torch

    from kira.models.cnn.encoder import CnnImageEncoder
    from kira.models.cnn.weights import MOBILENET_V2, weight_file
    from kira.models.torch_checkpoint import load_state_dict

    nn = torch.nn

    def cbr(i, o, k=3, s=1, g=1):
        return nn.Sequential(nn.Conv2d(i, o, k, s, (k - 1) // 2, groups=g, bias=False), nn.BatchNorm2d(o), nn.ReLU6())

    class Block(nn.Module):
        def __init__(self, i, o, s, t):
            super().__init__()
            hid = i * t
            self.skip = s == 1 and i == o
            layers = ([] if t == 1 else [cbr(i, hid, 1)]) + [cbr(hid, hid, s=s, g=hid), nn.Conv2d(hid, o, 1, bias=False),
                                                             nn.BatchNorm2d(o)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.skip else self.conv(x)

    feats, inp = [cbr(3, 32, s=2)], 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)):
        for k in range(n):
            feats.append(Block(inp, c, s if k == 0 else 1, t))
            inp = c
    feats.append(cbr(inp, 1280, 1))
    model = nn.Module()
    model.features = nn.Sequential(*feats)
    model.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, 1000))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in load_state_dict(weight_file(MOBILENET_V2)).items()})
    model.eval()
    torch.set_num_threads(threads)
    enc = CnnImageEncoder(threads=threads, prefer_cuda=False)
    x = np.random.default_rng(0).random((batch, 3, 224, 224), dtype=np.float32)
    xt = torch.from_numpy(x)

    def run_torch():
        with torch.inference_mode():
            f = model.features(xt)
            model.classifier(f.mean((2, 3)))

    def run_ort():
        enc._session.run({"pixels": x}, ["feature_map", "pooled", "logits"])

    best = {"torch": np.inf, "ort": np.inf}
    run_torch(), run_ort()
    for _ in range(repeat):  # interleaved, best of `repeat`
        for name, fn in (("torch", run_torch), ("ort", run_ort)):
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return batch / best["torch"], batch / best["ort"]


def ingest_rate(stack, ims: list[np.ndarray]) -> tuple[float, float]:
    from kira.knowledge_base.kb import KnowledgeBase

    with tempfile.TemporaryDirectory() as d:
        kb = KnowledgeBase.create(f"{d}/kb", models=stack)
        kb.add_image(ims[0], doc_id="warm-up")
        t, c = time.perf_counter(), time.process_time()
        for i, im in enumerate(ims):
            kb.add_image(im, doc_id=f"d{i}")
        kb.commit()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        kb.close()
    return len(ims) / wall, cpu / len(ims)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ingest", type=int, default=60, help="images ingested per stack (crops of the real images)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    from kira.models import load_default
    from kira.models.ocr import OcrReader

    ims = images()
    default = load_default(threads=args.threads).identity()["image"]
    stacks = {name: load_default(image_encoder=name, threads=args.threads) for name in ("pixel", "mobilenet_v2", "fused")}
    heads = [f"{n} (default)" if s.identity()["image"] == default else n for n, s in stacks.items()]
    print(f"{len(ims)} real images: {', '.join(ims)}\n")
    print(f"| figure | {' | '.join(heads)} |\n|---|{'---|' * len(stacks)}")
    print(f"| augmented copies at rank 1 (20 x 5) | {' | '.join(f'{rank1(s, ims):.2f}' for s in stacks.values())} |")
    found = [text_top3(s, ims) for s in stacks.values()]
    cells = [f"{r:.2f} ({', '.join(f)})" for r, f in found]
    print(f"| text question, image in top 3 ({len(QUESTIONS)} questions) | {' | '.join(cells)} |")
    rng = np.random.default_rng(1)
    pool = []
    for k in range(args.ingest):
        im = list(ims.values())[k % len(ims)]
        h, w = im.shape[:2]
        y, x = rng.integers(0, h // 4 + 1), rng.integers(0, w // 4 + 1)
        pool.append(np.ascontiguousarray(im[y : y + 3 * h // 4, x : x + 3 * w // 4]))
    rates = [ingest_rate(s, pool) for s in stacks.values()]
    print(f"| ingest, all chunks: images/s (CPU s per image), load {os.getloadavg()[0]:.1f} | "
          f"{' | '.join(f'{w:.1f} ({c:.3f})' for w, c in rates)} |")
    tr, orr = torch_vs_ort(16, args.threads, 5)
    print(f"\nMobileNetV2 encode, batch 16 at 224 px, {args.threads} threads: torch eager {tr:.0f} images/s, "
          f"onnxruntime {orr:.0f} images/s, ratio {orr / tr:.2f}x")
    reader = OcrReader(threads=args.threads, prefer_cuda=False)
    page, text, circuit = reader.text(ims["page"]), reader.text(ims["text"]), reader.text(schematic())
    print(f"OCR word recall: page {word_recall(PAGE, page):.2f}, text (handwritten) {word_recall(TEXT, text):.2f}, "
          f"rendered schematic {word_recall(SCHEMATIC, circuit):.2f}")
    print(f"  page read: {page}\n  text read: {text}\n  schematic read: {circuit}")


if __name__ == "__main__":
    main()
