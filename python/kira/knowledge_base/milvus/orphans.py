"""Chunks without a document on a Milvus-backed knowledge base: found, hidden from counts, removed.

Milvus has no transactions, so a batch is written in an order that a crash can cut short:
(1) a journal row ``pending:<first chunk id>`` in ``<name>__kb`` naming the batch's documents,
(2) their chunks, (3) their ``doc:`` records, (4) the journal row deleted
(`kira.knowledge_base.milvus.kb_writes.write_items`). A writer that dies between (2) and (3) leaves
*orphans*: chunks of a document that has no record. The journal names them, so the next
writer to open the knowledge base removes them before anything else (`recover`); `kira check`
can look for them everywhere (`find_orphans(storage, everywhere=True)`) and remove them
(`remove_orphans`). A document is counted (`len(kb)`) by its record, so an orphan is never
counted, and `remove(doc_id)` deletes chunks of an id that has no record.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable

log = logging.getLogger(__name__)

PENDING = "pending:"  # journal rows: "pending:<first chunk id>" -> JSON list of the batch's doc ids


def journal_key(first_chunk_id: int) -> str:
    """The journal row of a batch whose lowest chunk id is `first_chunk_id`."""
    return f"{PENDING}{int(first_chunk_id)}"


def _journals(storage: Any) -> dict[str, list[str]]:
    return {key: list(json.loads(value)) for key, value in storage.records.prefixed(PENDING)}


def _without_record(storage: Any, doc_ids: Iterable[str]) -> list[str]:
    wanted = list(dict.fromkeys(doc_ids))
    have = set(storage.records.get([f"doc:{d}" for d in wanted]))
    return [d for d in wanted if f"doc:{d}" not in have]


def _with_chunks(storage: Any, doc_ids: list[str]) -> list[str]:
    from kira.knowledge_base.milvus.records import quoted

    if not doc_ids or storage.collection is None:
        return []
    rows = storage.rows.query_all(f"doc_id in {quoted(doc_ids)}", ["doc_id"])
    found = {r["doc_id"] for r in rows}
    return [d for d in doc_ids if d in found]


def orphaned(storage: Any, doc_ids: Iterable[str]) -> list[str]:
    """Those of `doc_ids` that have chunks but no document record (in the order given)."""
    return _with_chunks(storage, _without_record(storage, doc_ids))


def find_orphans(storage: Any, *, everywhere: bool = False) -> list[str]:
    """Doc ids that have chunks in Milvus but no document record, sorted: those the journal names (a writer
    stopped mid-batch), and with `everywhere` any other (a scan of every chunk's doc id: what `kira check`
    runs; its cost grows with the collection)."""
    named = [d for docs in _journals(storage).values() for d in docs]
    orphans = set(_with_chunks(storage, _without_record(storage, named)))
    if everywhere and storage.collection is not None:
        chunk_docs = {r["doc_id"] for r in storage.rows.query_all("id >= 0", ["doc_id"])}
        recorded = {key[4:] for key, _ in storage.records.prefixed("doc:", values=False)}
        orphans |= chunk_docs - recorded
    return sorted(orphans)


def remove_orphans(storage: Any, doc_ids: Iterable[str] | None = None) -> list[str]:
    """Delete the chunks of orphaned documents (`doc_ids`, default `find_orphans(storage, everywhere=True)`; an id
    that has a record is left alone) and the journal rows; returns the doc ids whose chunks were deleted.
    Raises ValueError on a read-only knowledge base."""
    from kira.knowledge_base.milvus.writes import delete_documents

    if storage.read_only:
        raise ValueError(f"{storage.where} is open read-only; open it without read_only=True to remove orphans")
    journals = _journals(storage)
    wanted = find_orphans(storage, everywhere=True) if doc_ids is None else _without_record(storage, doc_ids)
    if wanted and storage.collection is not None:
        delete_documents(storage.collection, wanted)
        storage.note_external_writes()
        log.warning("%s: removed the chunks of %d document(s) a stopped writer left without a record: %s",
                    storage.name, len(wanted), ", ".join(wanted[:10]) + (" ..." if len(wanted) > 10 else ""))
    storage.records.delete(list(journals))
    return wanted


def recover(storage: Any) -> list[str]:
    """What a writer runs at open: remove the orphans the journal names (cheap: only journal rows are read).
    A read-only opener only logs them (`kira check --repair` or opening for writing removes them)."""
    journals = _journals(storage)
    if not journals:
        return []
    named = [d for docs in journals.values() for d in docs]
    if storage.read_only:
        orphans = _with_chunks(storage, _without_record(storage, named))
        if orphans:
            log.warning("%s: %d document(s) were being written when a writer stopped (%s); open it for writing "
                        "or run kira check --repair to remove their chunks", storage.name, len(orphans),
                        ", ".join(orphans[:10]))
        return []
    return remove_orphans(storage, named)


__all__ = ["PENDING", "find_orphans", "journal_key", "orphaned", "recover", "remove_orphans"]
