"""`kira check` of ``<name>__terms``: its rows agree with the chunks, and `--repair` makes them (format 1 -> 2).

Every document and passage chunk has one terms row under its id (kira.knowledge_base.milvus.lexical),
holding what `terms_rows` makes of the chunk: a terms row without its chunk (left by a removal cut
short, or written outside kira) makes a lexical search return an id no chunk answers; a chunk
without its row (a write cut short) is never found by a lexical search or by name; a row whose
terms differ from its chunk's ranks it by words it does not hold. The check reads the chunks and
the rows in batches (memory bounded whatever the collection's size); the repair writes the missing
and differing rows from the chunks and deletes the rest.

A knowledge base of format 1 has no ``__terms``: lexical search and names are answered from rows read
into the kira process at every commit (what does not scale). The check names it, and the repair is
the upgrade: it creates ``__terms``, fills it from the chunks and records format 2
(`upgrade_terms`; docs/scale.md).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterator

from kira.knowledge_base.milvus.lexical import INDEXED_LEVELS, terms_name, terms_rows

log = logging.getLogger(__name__)

_BATCH = 1024
CHUNK_FIELDS = ["doc_id", "level", "description", "metadata", "groups", "group_order"]
TERMS_FIELDS = ["doc_id", "level", "lexical", "names", "groups", "group_order"]


def _batches(client: Any, collection: str, filter: str, fields: list[str]) -> Iterator[list[dict[str, Any]]]:
    it = client.query_iterator(collection, batch_size=_BATCH, filter=filter, output_fields=fields)
    try:
        while True:
            rows = it.next()
            if not rows:
                return
            yield rows
    finally:
        it.close()


def _same(stored: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(_canonical(stored.get(f)) == _canonical(expected.get(f)) for f in TERMS_FIELDS)


def _canonical(value: Any) -> str:
    return json.dumps(list(value) if isinstance(value, (list, tuple)) else value, sort_keys=True, default=str)


def compare_terms(storage: Any) -> dict[str, list[int]]:
    """{"missing": chunk ids without their terms row, "differing": rows whose terms differ from their chunk's,
    "extra": terms rows without a document or passage chunk}, each sorted. Reads both collections in batches."""
    col = storage.collection
    client, terms = col.client, terms_name(col.name)
    levels = "level in [" + ", ".join(f'"{level}"' for level in INDEXED_LEVELS) + "]"
    missing: list[int] = []
    differing: list[int] = []
    for rows in _batches(client, col.name, levels, CHUNK_FIELDS):
        expected = {int(r["id"]): r for r in terms_rows(rows)}
        stored = {int(r["id"]): r for r in client.get(terms, ids=list(expected), output_fields=TERMS_FIELDS)}
        missing += [i for i in expected if i not in stored]
        differing += [i for i in expected if i in stored and not _same(stored[i], expected[i])]
    extra: list[int] = []
    for rows in _batches(client, terms, "id >= 0", ["level"]):
        ids = [int(r["id"]) for r in rows]
        found = {int(r["id"]): r["level"] for r in client.get(col.name, ids=ids, output_fields=["level"])}
        extra += [i for i in ids if found.get(i) not in INDEXED_LEVELS]
    return {"missing": sorted(missing), "differing": sorted(differing), "extra": sorted(extra)}


def check_terms(storage: Any, report: Any) -> None:
    """Add to `report` (a CheckReport) what is wrong with ``__terms`` (module docstring); a format-1 knowledge base
    is named with its upgrade."""
    col = storage.collection
    if not col.config.kira_terms:
        report.add("format", f"format 1: no {terms_name(col.name)} collection, so lexical search and names are "
                             "answered from rows read into the kira process at every commit (its memory and open "
                             "time grow with the collection)",
                   f"kira check --repair builds {terms_name(col.name)} from the chunks (the upgrade to format 2; "
                   "answers keep their ranking)")
        return
    found = compare_terms(storage)
    report.checked["terms rows"] = "agree with the chunks" if not any(found.values()) else "disagree"
    what = {"missing": "document or passage chunk(s) have no terms row: lexical search and names never find them",
            "differing": "terms row(s) differ from their chunk's terms: lexical search ranks those chunks by other "
                         "words",
            "extra": "terms row(s) belong to no document or passage chunk: lexical search can return ids no chunk "
                     "answers"}
    for kind, ids in found.items():
        if ids:
            report.add("terms", f"{len(ids)} {what[kind]} (chunk ids {ids[:10]})",
                       "kira check --repair rewrites the terms rows from the chunks")


def repair_terms(storage: Any) -> dict[str, int]:
    """Make ``__terms`` agree with the chunks (on a writable storage): write the missing and differing rows from
    their chunks, delete the extra ones; a format-1 knowledge base is upgraded first (`upgrade_terms`). Returns
    how many rows of each kind were repaired. The caller commits."""
    if not storage.collection.config.kira_terms:
        return {"built": upgrade_terms(storage)}
    found = compare_terms(storage)
    col = storage.collection
    rewrite = found["missing"] + found["differing"]
    for start in range(0, len(rewrite), _BATCH):
        ids = rewrite[start:start + _BATCH]
        rows = terms_rows(col.client.get(col.name, ids=ids, output_fields=CHUNK_FIELDS))
        col.client.upsert(terms_name(col.name), rows, timeout=col.config.timeout)
    if found["extra"]:
        col.client.delete(terms_name(col.name), ids=found["extra"])
    if rewrite or found["extra"]:
        storage.note_external_writes()
        log.warning("%s: rewrote %d terms row(s) from their chunks and deleted %d without a chunk", storage.where,
                    len(rewrite), len(found["extra"]))
    return {k: len(v) for k, v in found.items()}


def upgrade_terms(storage: Any) -> int:
    """Format 1 -> 2 in place: create ``__terms``, fill it from the document and passage chunks (in batches) and
    record format 2, so lexical search and names run in Milvus. Returns the rows written. The caller commits."""
    from kira.knowledge_base.milvus.schema import create_terms_collection
    from kira.knowledge_base.milvus.storage import FORMAT

    col = storage.collection
    client, terms = col.client, terms_name(col.name)
    if not client.has_collection(terms):
        create_terms_collection(client, terms)
    levels = "level in [" + ", ".join(f'"{level}"' for level in INDEXED_LEVELS) + "]"
    written = 0
    for rows in _batches(client, col.name, levels, CHUNK_FIELDS):
        made = terms_rows(rows)
        client.upsert(terms, made, timeout=col.config.timeout)
        written += len(made)
    client.flush(terms)
    storage.settings["format"] = FORMAT
    storage.records.put({"setting:kira": json.dumps(storage.settings)})
    storage.open_spaces(json.loads(storage.get_setting("dims", "null") or "null"), create=False)  # now with terms
    storage.note_external_writes()
    log.warning("%s: built %s from %d chunk(s): upgraded to format %d", storage.where, terms, written, FORMAT)
    return written


__all__ = ["check_terms", "compare_terms", "repair_terms", "upgrade_terms"]
