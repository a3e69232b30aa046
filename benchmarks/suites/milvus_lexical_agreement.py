"""How far Milvus's BM25 agrees with kira's in-process BM25, and what it does to answers, on real photos.

The corpus, questions and answer metrics are benchmarks/suites/answers_real_photos.py's (every real photo
installed offline, anonymised file names, no captions: the words come from kira's generated
descriptions). The same photos are ingested, here, into an embedded knowledge base (kira's `LexicalIndex`
over document texts) and into a Milvus Lite one (Milvus's BM25 function over the ``lexical`` field,
kira.knowledge_base.milvus.lexical). For every text question it reports the top-10 overlap of the
two lexical searches (shared documents / the longer list) and how many give the same order; as a
reference it also ranks with BM25 over the raw ``description`` field with Milvus's own analyzer
(what a collection without kira's terms offers). Then it runs answers_real_photos' metrics on both
knowledge bases.

Usage: python -m benchmarks.suites.milvus_lexical_agreement [--encoder mobilenet_v2] [--variants dual_path,full]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.suites import answers_real_photos as photos_bench

K = 10


def documents_of(kb, ids) -> list[str]:
    rows = kb.chunks([int(i) for i in ids])
    return [rows[int(i)].doc_id for i in ids if int(i) in rows]


def overlap(a: list[str], b: list[str]) -> float:
    if not a and not b:
        return 1.0
    return len(set(a) & set(b)) / max(len(a), len(b))


def agreement(embedded, milvus, questions: list[str]) -> dict[str, float]:
    from kira.knowledge_base.milvus.index import lexical_search

    ours, theirs = milvus.lexical(), embedded.lexical()
    rows = {"kira_terms": [], "raw_description": []}
    same_order = 0
    for q in questions:
        want = documents_of(embedded, theirs.search(q, K).ids)
        got = documents_of(milvus, ours.search(q, K).ids)
        same_order += got == want
        rows["kira_terms"].append(overlap(got, want))
        raw_ids, _ = lexical_search(milvus.storage.collection, q, K, levels=["document", "passage"])
        rows["raw_description"].append(overlap(documents_of(milvus, raw_ids), want))
    return {"questions": len(questions), "kira_terms_overlap": float(np.mean(rows["kira_terms"])),
            "kira_terms_same_order": same_order / max(len(questions), 1),
            "raw_description_overlap": float(np.mean(rows["raw_description"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default="mobilenet_v2")
    parser.add_argument("--variants", default="dual_path,full")
    args = parser.parse_args()
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    from PIL import Image

    images = photos_bench.photos()
    ids = photos_bench.anonymise(sorted(images))
    tmp = Path(tempfile.mkdtemp(prefix="kira-lexical-agreement-"))
    folder = tmp / "photos"
    folder.mkdir()
    for name, image in images.items():
        Image.fromarray(image).save(folder / f"{ids[name]}.jpg", quality=92)
    models = load_default(image_encoder=args.encoder)
    # both built here, by this code, from the same files (answers_real_photos' cache may hold an older build)
    embedded = KnowledgeBase.create(tmp / "embedded", models=models)
    milvus = KnowledgeBase.create(tmp / "milvus", models=models, backend="milvus")
    try:
        for name, kb in (("embedded", embedded), ("Milvus Lite", milvus)):
            t0 = time.perf_counter()
            kb.ingest(folder, progress=False)
            print(f"{name} ingest of {len(kb)} photos: {time.perf_counter() - t0:.1f} s")
        questions = [q for q, _ in photos_bench.PRESENT] + photos_bench.ABSENT
        found = agreement(embedded, milvus, questions)
        print(f"\nLexical top-{K} agreement with kira's BM25 over {found['questions']} questions: overlap "
              f"{found['kira_terms_overlap']:.3f}, same order {found['kira_terms_same_order']:.3f} (Milvus BM25 over "
              f"kira's terms); raw descriptions with Milvus's analyzer: overlap {found['raw_description_overlap']:.3f}\n")
        print("| backend | variant | rank1 | top3 | abstain(absent) | abstain(present) | names_top | ms/ask |\n"
              "|---|---|---|---|---|---|---|---|")
        variants = [v for v in args.variants.split(",") if v]
        for name, kb in (("embedded", embedded), ("milvus", milvus)):
            for variant, m in photos_bench.run(kb, images, ids, variants).items():
                print(f"| {name} | {variant} | {m['rank1'] / m['ranked']:.2f} | {m['top3'] / m['ranked']:.2f} | "
                      f"{m['abstain_absent'] / len(photos_bench.ABSENT):.2f} | "
                      f"{m['abstain_present'] / len(photos_bench.PRESENT):.2f} | "
                      f"{m['names'] / max(m['answered'], 1):.2f} | {m['ms']:.0f} |", flush=True)
    finally:
        embedded.close()
        milvus.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
