"""`kira check KB` of an embedded knowledge base: verify its database, its index files and their agreement.

What is checked, in order:

0. the settings files: ``config.json`` present and a kira configuration, ``profile.json`` a
   valid domain profile (a missing or broken one is never replaced by defaults in silence);
1. the database: SQLite's own ``PRAGMA quick_check`` and foreign keys, the schema version;
2. every stored vector: the right byte length, finite, not all zeros, a norm float32 can
   square, and (schema 4 on) the same bytes as the digest written with its chunk: a vector
   rewritten inside the database is found here, before a repair could copy it into an index.
   Chunks stored before kira wrote digests have none; the report says how many;
3. the index files: present, readable (the core verifies their checksums), of the
   dimension the manifest names, and the manifest's generation and id digests against
   the database;
4. agreement: the ids in each index against the chunk ids in the database, and each
   indexed vector against the stored vector it was made from (cosine >= `AGREE_COSINE`
   after the domain adapter): a page of the database changed behind kira's back, which
   still parses, shows up here;
5. leftovers of an interrupted save (``*.index.tmp-*``).

Each finding says what ``--repair`` would do. Repair (`check_embedded(path, repair=True)`, which
takes the writer lock) rebuilds the index files from the stored vectors, leaving out the
vectors that are damaged (their documents are named: add them again), removes leftovers and
writes a missing ``config.json`` with the default constants (saying so). It never changes
the database: what the database lost is not recoverable from the indexes, which are a cache
of it. Then it checks again: `CheckReport.remaining` holds what repair could not fix.

`kira.knowledge_base.check.check` picks this or the Milvus check (`kira.knowledge_base.milvus.check`).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path

import numpy as np

from kira.knowledge_base.check_report import CheckReport
from kira.knowledge_base.embedded.files import CONFIG_FILE, PROFILE_FILE, read_config_text
from kira.knowledge_base.embedded.storage import EmbeddedStorage
from kira.knowledge_base.embedded.store import DB_NAME, Store


log = logging.getLogger(__name__)

AGREE_COSINE = 0.99
"""An indexed vector agrees with its stored one when their cosine is at least this (the i8
encoding alone keeps it above 0.999)."""
_BATCH = 4096
QUICK_CHECK_PAGES = 65536
"""`database_problem` reads a database of at most this many pages whole (256 MB at SQLite's 4 KB
pages): SQLite's quick_check reads every page."""


def check_embedded(path: str | os.PathLike[str], *, repair: bool = False) -> CheckReport:
    """Verify the embedded knowledge base at `path` (module docstring); with `repair`, fix what disagreed, then
    check again. Raises ValueError when `path` holds no database, or (with `repair`) when another process has it
    open for writing."""
    path = Path(path)
    if not (path / DB_NAME).is_file():
        raise ValueError(f"{path} is not a kira knowledge base (no {DB_NAME}); build one with `kira ingest {path} FOLDER`")
    report = _verify(path)
    if repair and not report.ok:
        _repair(path, report)
        report.repaired = True
        report.remaining = _verify(path).findings
    return report


def _verify(path: Path) -> CheckReport:
    report = CheckReport(str(path))
    settings_ok = _check_settings(path, report)
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
    if not settings_ok:
        report.checked["indexes"] = f"not checked: fix {CONFIG_FILE} first"
        return report
    kb = EmbeddedStorage.open(path, read_only=True)
    try:
        _check_indexes(kb, damaged, report)
    finally:
        kb.close()
    _check_leftovers(path, report)
    return report


def _check_settings(path: Path, report: CheckReport) -> bool:
    """config.json present and readable, profile.json valid; returns whether the config can be read."""
    from kira.profile import DomainProfile

    ok = True
    if not (path / CONFIG_FILE).is_file():
        report.add(CONFIG_FILE, "missing: the constants this knowledge base answers with are unknown",
                   f"write the default constants to {CONFIG_FILE} (restore the original from a backup instead "
                   "if it was not built with the defaults)")
        ok = False
    else:
        try:
            read_config_text(path / CONFIG_FILE)
        except ValueError as exc:
            report.add(CONFIG_FILE, str(exc), f"none automatic: restore {CONFIG_FILE} from a backup, or delete it "
                                              "and run `kira check --repair` to write the default constants")
            ok = False
    if (path / PROFILE_FILE).is_file():
        try:
            profile = DomainProfile.load(path / PROFILE_FILE)
        except (ValueError, TypeError) as exc:
            report.add(PROFILE_FILE, f"not a valid domain profile: {exc}",
                       "none automatic: fix the file (docs/profiles.md), or replace it with "
                       f"`kira ingest {path} FOLDER --profile FILE`")
        else:
            report.checked["profile"] = "empty" if profile.empty else "valid"
    return ok


def database_problem(path: str | os.PathLike[str], *, max_pages: int | None = None) -> str | None:
    """What is wrong with the database of the embedded knowledge base at `path`, in a sentence with
    the fix, or None when SQLite's ``quick_check`` finds it sound. A database of more than
    `max_pages` pages (default `QUICK_CHECK_PAGES`) is not read whole (None; `kira check` reads
    it): the one-shot commands (`kira ask`, `kira card`) call this before answering."""
    max_pages = QUICK_CHECK_PAGES if max_pages is None else max_pages
    store = Store(Path(path), read_only=True)
    try:
        pages = int(store.conn.execute("PRAGMA page_count").fetchone()[0])
        if pages > max_pages:
            log.info("%s has %d pages: not verified before answering (run `kira check`)", path, pages)
            return None
        try:
            problems = store.quick_check(5)
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
    finally:
        store.close()
    if problems == ["ok"]:
        return None
    said = "; ".join(line.strip() for p in problems for line in p.splitlines() if line.strip() and "***" not in line)
    said = said if len(said) <= 200 else said[:200] + "..."
    return (f"the knowledge base's database {Path(path) / DB_NAME} is damaged (SQLite: {said}); "
            f"its answers cannot be trusted. Run `kira check {path}` and restore {DB_NAME} from a backup")


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
    """Every stored vector readable, finite, of a sane norm and as its digest says; returns
    {space: {chunk id: why}}."""
    with_digest, without = store.digest_counts()
    if not store.has_digests():
        report.checked["vector digests"] = (f"absent (schema {store.schema_version()}: the database predates them; "
                                            "vectors are checked for sanity only)")
    elif without:
        report.checked["vector digests"] = (f"{with_digest} chunk(s) verified; absent for {without} stored before "
                                            "kira wrote them (checked for sanity only)")
    else:
        report.checked["vector digests"] = f"{with_digest} chunk(s) verified"
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
                       "leave them out of the index (repair does); to restore them, remove these documents "
                       "and add them again: " + ", ".join(sorted(docs)[:10]))
    return damaged


def _check_indexes(kb: EmbeddedStorage, damaged: dict[str, dict[int, str]], report: CheckReport) -> None:
    vectors = kb.spaces
    assert vectors is not None
    repair = "rebuild the index file from the stored vectors"
    if kb.repair is not None and not kb.repair.clean:
        # opening had to fix the files in memory: missing or unreadable files are a finding; files
        # behind the database are what a deferred checkpoint leaves by design (kira.knowledge_base.embedded.vectors)
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


def _repair(path: Path, report: CheckReport) -> None:
    """Write a missing config.json with the defaults; rebuild both index files from the stored vectors
    (damaged ones left out) and save them, when the database and the config can be read."""
    from kira.config import KiraConfig
    from kira.atomic import write_json_atomic
    from kira.knowledge_base.embedded.vectors import make_index

    wheres = {f.where for f in report.findings}
    if CONFIG_FILE in wheres and not (path / CONFIG_FILE).exists():
        write_json_atomic(path / CONFIG_FILE, KiraConfig().to_dict())
        log.warning("wrote the default constants to %s", path / CONFIG_FILE)
    if "database" not in report.checked:
        return  # a damaged database: the index files cannot be rebuilt from it
    try:
        kb = EmbeddedStorage.open(path)  # the writer lock: refused while another process writes
    except ValueError as exc:
        if "open for writing" in str(exc):
            raise
        log.warning("could not open %s to rebuild its index files: %s", path, exc)
        return
    try:
        vectors = kb.spaces
        if vectors is None:
            return
        for space in ("visual", "text"):
            vectors.indexes[space] = make_index(vectors.kind, vectors.index_dims[space])
            vectors._synced.pop(space, None)
            vectors._sync(kb.store, space)
        vectors.save(kb.store.generation())
        log.info("rebuilt the index files of %s from the database", path)
    finally:
        kb.close()
