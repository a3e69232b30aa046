"""`kb.adapt`: few-shot adaptation of an embedded knowledge base from the user's labels, validated.

The labelled documents' stored raw visual vectors (document level) and, when the knowledge
base stores the patch level, their patch vectors are read from the database (nothing is
encoded again). `kira.adapt.validation` measures every method on held-out labels and chooses;
the chosen classifier is saved in ``fewshot/`` and its report in the meta table (`kira info`
shows it). A trained head (ProtoNet or projection) becomes the knowledge base's domain adapter
(the visual index is re-projected); when frozen or local is chosen, an adapter is removed, so
retrieval runs on the frozen vectors that validation found no worse.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

log = logging.getLogger(__name__)

REPORT_META = "adaptation"  # meta key: the last AdaptationReport as JSON
CLASSIFIER_DIR = "fewshot"  # the chosen FewShotClassifier (classifier.npz, its head beside it)
CLASSIFIER_FILE = "classifier.npz"


def labelled_vectors(kb: Any, doc_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray | None]:
    """(raw document vectors (n, dim), patch vectors (n, p, dim) or None) of `doc_ids` in `kb`.

    Patches are None when the knowledge base stores no patch level or the documents hold
    different numbers of patches. Raises ValueError naming documents that are not stored.
    """
    if kb.dims() is None:
        raise ValueError(f"{kb.path} holds no images yet; ingest the labelled images first")
    dim = int(kb.dims()["visual"])
    chunk_of = kb.store.document_chunk_ids(doc_ids)
    missing = [d for d in doc_ids if d not in chunk_of]
    if missing:
        raise ValueError(f"{len(missing)} labelled documents are not in {kb.path} (e.g. {missing[:3]}); "
                         "label only ingested documents (kb.documents() lists their ids)")
    features = kb.store.vectors("visual", [chunk_of[d] for d in doc_ids], dim)
    if "patch" not in kb.levels:
        return features, None
    # a document's chunks are written together, right after its document chunk: look only there
    span = 1 + kb.config.chunking.max_regions + kb.config.chunking.patch_grid ** 2
    by_doc: dict[str, list[int]] = {}
    for d in doc_ids:
        start = chunk_of[d]
        near = kb.store.chunk_ids(space="visual", levels=["patch"], after=start, upto=start + span)
        by_doc[d] = sorted(cid for cid, row in kb.store.chunks(near).items() if row.doc_id == d)
    sizes = {len(by_doc.get(d, [])) for d in doc_ids}
    if len(sizes) != 1 or 0 in sizes:
        log.info("labelled documents hold %s patch vectors: the local method is skipped", sorted(sizes))
        return features, None
    p = sizes.pop()
    flat = kb.store.vectors("visual", [cid for d in doc_ids for cid in by_doc[d]], dim)
    return features, flat.reshape(len(doc_ids), p, dim)


def adapt(kb: Any, labels: Mapping[str, Any], *, methods: Sequence[str] | None = None, seed: int | None = None,
          **validation: Any) -> Any:
    """Validate the few-shot methods on `labels` (doc id -> class), install the chosen one, return the report.

    See the module docstring; `methods` defaults to all of `kira.adapt.fewshot.METHODS`,
    `seed` to the knowledge base's config seed; `validation` goes to `kira.adapt.validation.validate`.
    Returns an AdaptationReport. Raises ValueError for a read-only knowledge base, fewer than two
    classes or documents that are not stored; ImportError naming the `export` extra when a
    trained method needs torch.
    """
    from kira.adapt.fewshot import METHODS, TRAINED
    from kira.adapt.validation import adapt_few_shot

    kb._writable()
    if not isinstance(labels, Mapping) or not labels:
        raise ValueError("labels must be a non-empty mapping of document id -> class name")
    doc_ids = [str(d) for d in labels]
    names = [str(labels[d]) for d in labels]
    features, patches = labelled_vectors(kb, doc_ids)
    seed = int(kb.config.seed if seed is None else seed)
    clf, report = adapt_few_shot(features, names, patches, methods=tuple(methods or METHODS),
                                 config=kb.config.adaptation, seed=seed, **validation)
    target = Path(kb.path) / CLASSIFIER_DIR
    tmp = Path(kb.path) / (CLASSIFIER_DIR + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    clf.save(tmp / CLASSIFIER_FILE)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    kb.store.set_meta(REPORT_META, report.to_json())
    if report.chosen in TRAINED:
        kb.set_adapter(clf.head)  # re-projects the visual index and commits
    elif kb.adapter is not None:
        kb.set_adapter(None)  # validation found the frozen vectors no worse: retrieval runs on them
    else:
        kb.commit()
    return report


def report_of(kb: Any) -> Any:
    """The knowledge base's last AdaptationReport, or None when `adapt` never ran."""
    from kira.adapt.validation import AdaptationReport

    raw = kb.store.get_meta(REPORT_META) or ""
    return AdaptationReport.from_dict(json.loads(raw)) if raw else None


def classify(kb: Any, doc_ids: Iterable[str]) -> list[str]:
    """The class the adapted classifier gives each stored document in `doc_ids`.

    Raises ValueError when `adapt` never ran or a document is not stored.
    """
    from kira.adapt.fewshot import FewShotClassifier

    file = Path(kb.path) / CLASSIFIER_DIR / CLASSIFIER_FILE
    if not file.is_file():
        raise ValueError(f"{kb.path} has no few-shot classifier; run kb.adapt(labels) first")
    clf = FewShotClassifier.load(file)
    ids = [str(d) for d in doc_ids]
    if not ids:
        return []
    features, patches = labelled_vectors(kb, ids)
    if clf.needs_patches and patches is None:
        raise ValueError("the chosen local method needs every document's patch vectors; these documents "
                         "hold none or different numbers of them")
    return clf.predict(features, patches)
