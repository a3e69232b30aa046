"""`kira check` on a Milvus-backed knowledge base (`kira.knowledge_base.milvus.storage`).

What is checked:

1. it opens: its settings, stored config, collection schema and dimensions (as
   `MilvusStorage.open` checks them), and its domain profile;
2. the counts: document records, chunks per level, the generation;
3. agreement of the document records with the chunks: a chunk whose ``doc_id`` has no
   document record is an orphan (a write interrupted between the chunks and the record):
   searches could return it, yet `remove()` cannot delete it. A record without its
   document-level chunk cannot be found by a search;
4. every stored vector of a chunk that has one: finite and of unit norm, as kira writes
   them (`kira.knowledge_base.milvus.writes`): anything else was written outside kira;
5. ``<name>__terms`` agrees with the chunks, and a format-1 knowledge base (none) is named
   (kira.knowledge_base.milvus.check_terms).

Repair (`check_milvus(..., repair=True)`) deletes the orphan chunks, rewrites the terms rows from
the chunks (on format 1: builds ``__terms``, the upgrade to format 2), then checks again.
Damaged vectors and records without chunks are not repairable from Milvus alone (it is the
only copy): the report names the documents to remove and add again.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import numpy as np

from kira.knowledge_base.check_report import CheckReport
from kira.knowledge_base.milvus.check_terms import check_terms, repair_terms

log = logging.getLogger(__name__)

UNIT_TOLERANCE = 1e-3
"""A stored vector is unit-norm when |norm - 1| is within this (float32 rounding leaves ~1e-7)."""
_BATCH = 1024


def check_milvus(path_or_name: str | os.PathLike[str], *, repair: bool = False, uri: str | None = None,
                 token: str = "") -> CheckReport:
    """Verify the Milvus-backed knowledge base `path_or_name` (a directory holding Milvus Lite, or with
    `uri` its name there); with `repair`, delete its orphan chunks and check again (`CheckReport.remaining`).

    Raises ValueError when it is no kira knowledge base, ConnectionError naming the uri when no Milvus
    answers, ImportError naming ``kira[milvus]``.
    """
    report = _verify(path_or_name, uri, token)
    if repair and not report.ok:
        _repair(path_or_name, uri, token, report)
        report.repaired = True
        report.remaining = _verify(path_or_name, uri, token).findings
    return report


def _open(path_or_name: str | os.PathLike[str], uri: str | None, token: str, *, read_only: bool) -> Any:
    from kira.knowledge_base.milvus.storage import MilvusStorage

    return MilvusStorage.open(path_or_name, uri=uri, token=token, read_only=read_only)


def _profile(storage: Any) -> Any:
    from kira.profile import DomainProfile

    stored = storage.get_setting("profile")
    return DomainProfile.from_dict(json.loads(stored)) if stored else DomainProfile()


def _verify(path_or_name: str | os.PathLike[str], uri: str | None, token: str) -> CheckReport:
    kb = _open(path_or_name, uri, token, read_only=True)
    where = os.fspath(path_or_name) if uri is None else f"{kb.name} at {kb.uri}"
    report = CheckReport(where)
    try:
        report.checked["backend"] = f"milvus ({kb.uri}, collection {kb.name})"
        try:
            profile = _profile(kb)
        except (ValueError, TypeError) as exc:
            report.add("profile", f"the stored domain profile is not valid: {exc}",
                       "none automatic: store a valid one with `kira ingest KB FOLDER --profile FILE`")
        else:
            report.checked["profile"] = "empty" if profile.empty else "valid"
        documents = {key[4:] for key, _ in kb.records.prefixed("doc:", values=False)}
        report.checked["document records"] = len(documents)
        report.checked["generation"] = kb.rows.generation()
        if kb.collection is None:
            report.checked["chunks"] = "none yet (no image added)"
            return report
        _check_chunks(kb, documents, report)
        check_terms(kb, report)
    finally:
        kb.close()
    return report


def _check_chunks(kb: Any, documents: set[str], report: CheckReport) -> None:
    """Counts, orphans, records without chunks and the stored vectors, reading the chunks in batches."""
    col = kb.collection
    levels: dict[str, int] = {}
    orphans: dict[int, str] = {}
    with_chunk: set[str] = set()
    damaged: dict[int, tuple[str, str]] = {}  # chunk id -> (doc id, why)
    fields = ["doc_id", "level", "has_visual", "has_text", "visual", "text"]
    it = col.client.query_iterator(col.name, batch_size=_BATCH, filter="id >= 0", output_fields=fields)
    try:
        while True:
            rows = it.next()
            if not rows:
                break
            for row in rows:
                cid, doc = int(row["id"]), row["doc_id"]
                levels[row["level"]] = levels.get(row["level"], 0) + 1
                if doc not in documents:
                    orphans[cid] = doc
                elif row["level"] == "document":
                    with_chunk.add(doc)
                for space in ("visual", "text"):
                    if row[f"has_{space}"]:
                        why = _vector_problem(row[space])
                        if why:
                            damaged[cid] = (doc, f"{space} vector {why}")
    finally:
        it.close()
    report.checked["chunks"] = ", ".join(f"{k} {v}" for k, v in sorted(levels.items())) or "none"
    report.checked["stored vectors"] = "finite and unit-norm" if not damaged else f"{len(damaged)} damaged"
    if orphans:
        ids = sorted(orphans)
        report.add("chunks", f"{len(orphans)} chunk(s) belong to no document record (a write interrupted between "
                             f"the chunks and the record): chunks {ids[:10]} of {sorted(set(orphans.values()))[:10]}; "
                             "searches can return them and remove() cannot delete them",
                   "delete those chunks (add their images again to have the documents)")
    missing = sorted(documents - with_chunk)
    if missing:
        report.add("document records", f"{len(missing)} document record(s) have no document-level chunk: "
                                       f"{missing[:10]}; searches cannot find them",
                   "none automatic: remove those documents (KnowledgeBase.remove) and add them again")
    if damaged:
        docs = sorted({d for d, _ in damaged.values()})
        report.add("chunks (vectors)", f"{len(damaged)} stored vector(s) are damaged: "
                                       + ", ".join(f"chunk {c} ({why})" for c, (_, why) in sorted(damaged.items())[:10]),
                   "none automatic (Milvus holds the only copy): remove these documents and add them again: "
                   + ", ".join(docs[:10]))


def _vector_problem(vector: Any) -> str | None:
    """What is wrong with one stored vector (kira writes them finite and unit-norm), or None."""
    v = np.asarray(vector, dtype=np.float64).reshape(-1)
    if not np.isfinite(v).all():
        return "has NaN or inf values"
    norm = float(np.sqrt(v @ v))
    if abs(norm - 1.0) > UNIT_TOLERANCE:
        return f"has norm {norm:.3g}, not 1 (kira stores unit vectors): written outside kira"
    return None


def _repair(path_or_name: str | os.PathLike[str], uri: str | None, token: str, report: CheckReport) -> None:
    """Delete the orphan chunks, make ``__terms`` agree with the chunks (format 1: build it), as `_verify` reported,
    and publish the change to readers."""
    from kira.knowledge_base.milvus.writes import delete_chunks

    wheres = {f.where for f in report.findings}
    if not wheres & {"chunks", "terms", "format"}:
        return
    kb = _open(path_or_name, uri, token, read_only=False)  # WriterLeaseHeld while another process writes
    try:
        if "chunks" in wheres:
            documents = {key[4:] for key, _ in kb.records.prefixed("doc:", values=False)}
            orphans = [int(r["id"]) for r in kb.rows.query_all("id >= 0", ["doc_id"]) if r["doc_id"] not in documents]
            if orphans:
                delete_chunks(kb.collection, orphans)
                kb.note_external_writes()
                log.warning("deleted %d orphan chunk(s) of %s", len(orphans), kb.name)
        if wheres & {"terms", "format"}:
            repair_terms(kb)
        kb.commit()  # flushed and published to readers
    finally:
        kb.close()
