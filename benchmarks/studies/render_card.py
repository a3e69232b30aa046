"""Render rationale cards for real photos and look at them as a person would.

Ingests scikit-image photos (rocket, coffee, chelsea, astronaut, coins) as IMG_1000.jpg ...
without captions, asks a question that matches ("a cup of coffee") and one that does not
("a brick wall"), writes each card as HTML and, when Debian's `chromium` is installed
(`apt-get install -y chromium`), screenshots it headless:

    python -m benchmarks.studies.render_card --out /tmp/cards
    # -> /tmp/cards/coffee.html, coffee.png, brick.html, brick.png

Open the PNGs and check: the no-match or low-confidence banner above the question; the
answer box unlike the question box; [Evidence N] links; evidence that says what each photo
shows (classifier label with its probability), then how it looks; no Python reprs or
"None"; each timing beside its value; a hop chain of document names, not chunk ids.
tests/explain/test_explain_html.py checks the same page structurally.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

PHOTOS = ("rocket", "coffee", "chelsea", "astronaut", "coins")
QUESTIONS = {"coffee": "a cup of coffee", "brick": "a brick wall"}


def screenshot(html: Path, png: Path, *, width: int = 1200, height: int = 1600) -> bool:
    """Screenshot `html` with headless Chromium into `png`; False when no chromium is installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return False
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
                    f"--window-size={width},{height}", html.resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)
    return png.exists()


def main() -> None:
    from PIL import Image
    from skimage import data

    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="cards", help="folder for the HTML cards and screenshots")
    parser.add_argument("--variant", default="full")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase.create(Path(tmp) / "kb")
        for n, name in enumerate(PHOTOS):
            path = Path(tmp) / f"IMG_{1000 + n}.jpg"
            image = np.asarray(getattr(data, name)())
            image = np.repeat(image[:, :, None], 3, 2) if image.ndim == 2 else image[:, :, :3]
            Image.fromarray(np.ascontiguousarray(image)).save(path, quality=92)
            kb.add_image(path, doc_id=path.stem)
        kb.commit()
        kira = Kira(kb)
        for key, question in QUESTIONS.items():
            result = kira.ask(question, variant=args.variant, top_k=3)
            html = out / f"{key}.html"
            html.write_text(result.card.to_html(), encoding="utf-8")
            shot = screenshot(html, out / f"{key}.png")
            print(f"{question!r}: {result.answer.text}\n  wrote {html}" + (f" and {key}.png" if shot else
                                                                         " (no chromium: no screenshot)"))
        kb.close()


if __name__ == "__main__":
    main()
