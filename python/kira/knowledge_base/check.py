"""`kira check KB`: verify a knowledge base's database, its index files and their agreement.

What is checked, in order:

1. the database: SQLite's own ``PRAGMA quick_check`` and foreign keys, the schema version;
2. every stored vector: the right byte length, finite, not all zeros;
3. the index files: present, readable (the core verifies their checksums), of the
   dimension the manifest names, and the manifest's generation and id digests against
   the database;
4. agreement: the ids in each index against the chunk ids in the database, and each
   indexed vector against the stored vector it was made from (cosine >= `AGREE_COSINE`
   after the domain adapter): a page of the database changed behind kira's back, which
   still parses, shows up here;
5. leftovers of an interrupted save (``*.index.tmp-*``).

Each finding says what ``--repair`` would do. Repair (`check(path, repair=True)`, which
takes the writer lock) rebuilds the index files from the stored vectors, leaving out the
vectors that are damaged (their documents are named: add them again), and removes
leftovers. It never changes the database: what the database lost is not recoverable from
the indexes, which are a cache of it.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kira.knowledge_base.store import DB_NAME, Store

log = logging.getLogger(__name__)

AGREE_COSINE = 0.99
"""An indexed vector agrees with its stored one when their cosine is at least this (the i8
encoding alone keeps it above 0.999)."""
_BATCH = 4096


@dataclass
class Finding:
    """One thing that is wrong: where, what, and what `--repair` does about it."""

    where: str
    problem: str
    repair: str


@dataclass
class CheckReport:
    """What `check` found (`findings`, empty when all agrees), what it looked at (`checked`),
    and whether it repaired."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    checked: dict[str, Any] = field(default_factory=dict)
    repaired: bool = False

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, where: str, problem: str, repair: str) -> None:
        self.findings.append(Finding(where, problem, repair))

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "repaired": self.repaired, "checked": self.checked,
                "findings": [asdict(f) for f in self.findings]}

    def to_text(self) -> str:
        lines = [f"knowledge base {self.path}"]
        lines += [f"  checked {k}: {v}" for k, v in self.checked.items()]
        if self.ok:
            lines.append("  everything agrees")
        for f in self.findings:
            lines.append(f"  PROBLEM {f.where}: {f.problem}")
            lines.append(f"    {'repaired' if self.repaired else 'repair would'}: {f.repair}")
        return "\n".join(lines)


def check(path: str | os.PathLike, *, repair: bool = False) -> CheckReport:
    """Verify the knowledge base at `path` (see the module doc); with `repair`, rebuild its
    index files from the database afterwards when anything disagreed.

    Returns a `CheckReport`. Raises ValueError when `path` is not a knowledge base, and (with
    `repair`) when another process has it open for writing.
    """
    from kira.knowledge_base.kb import KnowledgeBase

    path = Path(path)
    if not (path / DB_NAME).is_file():
        raise ValueError(f"{path} is not a kira knowledge base (no {DB_NAME}); build one with `kira ingest {path} FOLDER`")
    report = CheckReport(str(path))
    store = Store(path, read_only=True)
    try:
        if not _check_database(store, report):
            return report  # the database itself is damaged: nothing else can be trusted
        dims = json.loads(store.get_meta("dims", "null") or "null")
        if dims is None:
            report.checked["indexes"] = "none yet (no image added)"
            return report
        damaged = _check_vectors(store, dims, report)
    finally:
        store.close()
    kb = KnowledgeBase.open(path, models=None, read_only=True)
    try:
        _check_indexes(kb, damaged, report)
    finally:
        kb.close()
    _check_leftovers(path, report)
    if repair and not report.ok:
        _repair(path)
        report.repaired = True
    return report


def _check_database(store: Store, report: CheckReport) -> bool:
    try:
        problems = store.quick_check(20)
        keys = store.foreign_key_problems()
    except sqlite3.DatabaseError as exc:
        problems, keys = [str(exc)], []
    if problems != ["ok"]:
        report.add(DB_NAME, "SQLite integrity check failed: " + "; ".join(problems[:5]),
                   "none from the index files (they are a cache of the database): restore kira.sqlite from a backup")
        return False
    if keys:
        report.add(DB_NAME, f"{len(keys)} row(s) point at rows that do not exist (first: table {keys[0][0]}, "
                            f"row {keys[0][1]}, missing {keys[0][2]})",
                   "none automatic: remove the documents concerned and add them again")
    report.checked["database"] = f"integrity ok, schema version {store.schema_version()}, generation {store.generation()}"
    return True


def _check_vectors(store: Store, dims: dict[str, int], report: CheckReport) -> dict[str, dict[int, str]]:
    """Every stored vector readable, finite and non-zero; returns {space: {chunk id: why}}."""
    damaged: dict[str, dict[int, str]] = {}
    for space in ("visual", "text"):
        ids = store.chunk_ids(space=space)
        bad: dict[int, str] = {}
        for start in range(0, len(ids), _BATCH):
            bad.update(store.usable_vectors(space, ids[start : start + _BATCH], dims[space])[2])
        damaged[space] = bad
        report.checked[f"stored {space} vectors"] = len(ids)
        if bad:
            docs = {r.doc_id for r in store.chunks(list(bad)).values()}
            report.add(f"{DB_NAME} ({space} vectors)",
                       f"{len(bad)} stored vector(s) are damaged: "
                       + ", ".join(f"chunk {c} ({why})" for c, why in sorted(bad.items())[:10]),
                       "leave them out of the index; add the documents again to restore them: "
                       + ", ".join(sorted(docs)[:10]))
    return damaged


def _check_indexes(kb: Any, damaged: dict[str, dict[int, str]], report: CheckReport) -> None:
    vectors = kb.vectors
    repair = "rebuild the index file from the stored vectors"
    if kb.repair is not None and not kb.repair.clean:
        # opening had to fix the files in memory: missing or unreadable files are a finding; files
        # behind the database are what a deferred checkpoint leaves by design (kira.knowledge_base.vectors)
        for space in ("visual", "text"):
            if kb.repair.rebuilt[space]:
                report.add(f"{space}.index", "missing, unreadable or of the wrong dimension", repair)
            elif kb.repair.added[space] or kb.repair.removed[space]:
                report.checked[f"{space}.index behind the database"] = (
                    f"{kb.repair.added[space]} row(s) to add, {kb.repair.removed[space]} to remove on the next "
                    "checkpoint (routine)")
    for space in ("visual", "text"):
        index = kb.index(space)
        db_ids = kb.store.chunk_ids(space=space)
        expected = np.setdiff1d(db_ids, np.fromiter(damaged[space], dtype=np.int64, count=len(damaged[space])))
        held = np.sort(np.asarray(index.ids(), dtype=np.int64))
        if not np.array_equal(held, expected):
            report.add(f"{space}.index", f"holds {len(held)} ids, the database {len(expected)} usable ones", repair)
            continue
        disagree = []
        for start in range(0, len(held), _BATCH):
            part = held[start : start + _BATCH]
            found, raw = kb.store.stored_vectors(space, part, vectors.dims[space])
            stored = vectors.prepare(space, raw)
            stored = stored / np.linalg.norm(stored, axis=1, keepdims=True)
            indexed = np.asarray(index.get_vectors(found), dtype=np.float32)
            indexed = indexed / np.maximum(np.linalg.norm(indexed, axis=1, keepdims=True), 1e-12)
            cosine = np.einsum("ij,ij->i", stored, indexed)
            disagree += found[cosine < AGREE_COSINE].tolist()
        report.checked[f"{space} index rows"] = len(held)
        if disagree:
            docs = {r.doc_id for r in kb.store.chunks(disagree).values()}
            report.add(f"{space}.index", f"{len(disagree)} indexed vector(s) differ from the stored ones "
                                         f"(chunks {disagree[:10]}; documents {sorted(docs)[:10]}): the database "
                                         "or the index file was changed outside kira",
                       "re-index those chunks from the stored vectors (the database is the source of truth; "
                       "if it was the database that was tampered with, restore it from a backup instead)")


def _check_leftovers(path: Path, report: CheckReport) -> None:
    left = sorted(p.name for p in path.glob("*.index.tmp-*"))
    if left:
        report.add(str(path), f"{len(left)} temporary file(s) of an interrupted save: {', '.join(left[:5])}",
                   "delete them (an open for writing does the same)")


def _repair(path: Path) -> None:
    """Rebuild both index files from the stored vectors (damaged ones left out) and save them."""
    from kira.knowledge_base.kb import KnowledgeBase
    from kira.knowledge_base.vectors import make_index

    kb = KnowledgeBase.open(path, models=None)  # the writer lock: refused while another process writes
    try:
        vectors = kb.vectors
        assert vectors is not None
        for space in ("visual", "text"):
            vectors.indexes[space] = make_index(vectors.kind, vectors.index_dims[space])
            vectors._synced.pop(space, None)
            vectors._sync(kb.store, space)
        vectors.save(kb.store.generation())
        log.info("rebuilt the index files of %s from the database", path)
    finally:
        kb.close()
