"""What one `Kira.ask` asks of Milvus: requests per kind and rows read, per variant.

Builds a Milvus Lite knowledge base of real photos (scikit-image and scikit-learn sample photos,
each captioned with its name, every third in a temporal sequence), asks each question once to warm
the per-commit caches, then counts the pymilvus client calls (search, query, get, ...) and the rows
they return during a second ask, per variant, with and without a query image. These counts, not
Milvus Lite's timings, are what carries over to a Milvus server: each call is one round trip
whose cost on a server depends on the rows it returns, not on the collection's size.

Usage: python -m benchmarks.suites.milvus_ask_requests [--variants dual_path,full]
"""

from __future__ import annotations

import argparse
import collections
import shutil
import tempfile
from pathlib import Path

import numpy as np

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "horse", "coins", "page", "moon", "clock",
          "brick", "grass")
QUESTIONS = ("a cup of coffee", "what does IMG_coffee show?", "a cat looking up")


class Counting:
    """Wraps a pymilvus client: counts calls per method and the rows each returns."""

    def __init__(self, client) -> None:
        self.client, self.calls, self.rows = client, collections.Counter(), collections.Counter()
        self.counting = False

    def wrap(self, name: str) -> None:
        real = getattr(self.client, name)

        def spy(*args, **kwargs):
            out = real(*args, **kwargs)
            if self.counting:
                self.calls[name] += 1
                if isinstance(out, list):
                    self.rows[name] += sum(len(r) if isinstance(r, list) else 1 for r in out)
            return out

        setattr(self.client, name, spy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="dual_path,full")
    args = parser.parse_args()
    from PIL import Image
    from skimage import data

    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default
    from kira.pipeline import Kira

    tmp = Path(tempfile.mkdtemp(prefix="kira-ask-requests-"))
    models = load_default()
    kb = KnowledgeBase.create(tmp / "kb", models=models, backend="milvus")
    try:
        for i, name in enumerate(PHOTOS):
            pixels = np.asarray(getattr(data, name)())
            kb.add_image(Image.fromarray(pixels[::3, ::3]), doc_id=f"IMG_{name}", caption=name,
                         sequence=f"s{i // 3}" if i % 3 == 0 or i % 3 == 1 else None)
        kb.commit()
        counting = Counting(kb.storage.client)
        for name in ("search", "query", "get", "hybrid_search", "query_iterator", "upsert", "delete", "flush"):
            counting.wrap(name)
        kira = Kira(kb)
        image = np.asarray(data.coffee())[20:-20, 20:-20]
        print(f"{len(PHOTOS)} photos, {sum(kb.storage.rows.count_chunks().values())} chunks; counts during one warm ask\n")
        print("| variant | query image | searches | queries | gets | iterators | rows returned |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for variant in [v for v in args.variants.split(",") if v]:
            for with_image in (False, True):
                totals = collections.Counter()
                rows = 0
                for question in QUESTIONS:
                    kira.ask(question, image=image if with_image else None, variant=variant, thumbnails=False)
                    counting.calls.clear()
                    counting.rows.clear()
                    counting.counting = True
                    kira.ask(question, image=image if with_image else None, variant=variant, thumbnails=False)
                    counting.counting = False
                    totals.update(counting.calls)
                    rows += sum(counting.rows.values())
                n = len(QUESTIONS)
                print(f"| {variant} | {'yes' if with_image else 'no'} | {totals['search'] / n:.1f} | "
                      f"{totals['query'] / n:.1f} | {totals['get'] / n:.1f} | {totals['query_iterator'] / n:.1f} | "
                      f"{rows / n:.0f} |", flush=True)
    finally:
        kb.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
