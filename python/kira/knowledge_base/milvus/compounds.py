"""Compound groups of a Milvus knowledge base, fetched per hit by filter: never all groups at once.

A document row stores its temporal / multiview memberships (``groups``: "kind:group id", with its
position in ``group_order``), in the terms collection beside the chunks (kira.knowledge_base.milvus.
lexical: document and passage rows only). `compounds_for` reads, for the documents a query found, the
groups they belong to (a primary-key ``get`` or a ``doc_id in [...]`` query), then those groups'
members (one ``array_contains_any(groups, [...])`` query), and again for groups the members bring
in, until no new group appears (so a compound document, which joins groups that share a document,
is whole); the result is the `kira.knowledge_base.compound.CompoundIndex` of those groups alone.
Expansion, partners, compound documents and view sets computed from it equal what the index of every
group gives for these documents (each is a function of the groups they reach), at a cost that grows
with the compounds found, not with the collection (on a server, which indexes the filter; Milvus Lite
scans the document rows per query).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable

from kira.knowledge_base.compound import CompoundIndex

log = logging.getLogger(__name__)

MAX_ROUNDS = 64  # group-closure rounds: a chain of groups longer than this is cut (logged)
QUERY_LIMIT = 16_384  # Milvus's largest query window


def _quoted(values: Iterable[Any]) -> str:
    return "[" + ", ".join(json.dumps(str(v)) for v in values) + "]"


def compounds_for(client: Any, collection: str, *, doc_ids: Iterable[str] = (), chunk_ids: Iterable[int] = (),
                  timeout: float = 10.0) -> CompoundIndex:
    """The `CompoundIndex` of every group the given documents (by doc id or by document chunk id) reach,
    read from Milvus by filter (module docstring). `collection`: the knowledge base's terms collection,
    which holds document rows only (kira.knowledge_base.milvus.lexical), or for a format-1 knowledge base
    its chunk collection."""
    docs, chunks = sorted({str(d) for d in doc_ids}), sorted({int(c) for c in chunk_ids})
    if not docs and not chunks:
        return CompoundIndex.build([], {})
    rows = []
    if chunks:  # by primary key: no scan, on Milvus Lite either
        rows += client.get(collection, ids=chunks, output_fields=["groups", "level"], timeout=timeout)
    if docs:
        rows += client.query(collection, filter=f'level == "document" and doc_id in {_quoted(docs)}',
                             output_fields=["groups", "level"], limit=QUERY_LIMIT, timeout=timeout)
    keys = {k for r in rows if r["level"] == "document" for k in r["groups"]}
    members: dict[str, dict[str, Any]] = {}  # doc id -> its document chunk row
    asked: set[str] = set()
    for round_ in range(MAX_ROUNDS + 1):
        new = sorted(keys - asked)
        if not new:
            break
        if round_ == MAX_ROUNDS:
            log.warning("%s: a compound document reaches past %d chained groups; reading the first %d rounds",
                        collection, MAX_ROUNDS, MAX_ROUNDS)
            break
        asked.update(new)
        for r in client.query(collection, filter=f'level == "document" and array_contains_any(groups, {_quoted(new)})',
                              output_fields=["doc_id", "groups", "group_order"], limit=QUERY_LIMIT, timeout=timeout):
            members[r["doc_id"]] = r
            keys.update(r["groups"])
    by_key: dict[str, list[tuple[float, str]]] = {}
    for doc, r in members.items():
        for key in r["groups"]:
            if key in asked:
                by_key.setdefault(key, []).append((float((r["group_order"] or {}).get(key, 0.0)), doc))
    groups = []
    for key in sorted(by_key):
        kind, gid = key.split(":", 1)
        groups.append((kind, gid, [d for _, d in sorted(by_key[key])]))
    return CompoundIndex.build(groups, {doc: int(r["id"]) for doc, r in members.items()})


__all__ = ["compounds_for"]
