"""Compound groups of a Milvus knowledge base, fetched per hit by filter: never all groups at once.

A document chunk stores its temporal / multiview memberships (``groups``: "kind:group id", with its
position in ``group_order``). `compounds_for` reads, for the documents a query found, the groups they
belong to (one ``id in [...]`` / ``doc_id in [...]`` query), then those groups' members (one
``array_contains_any(groups, [...])`` query), and again for groups the members bring in, until no
new group appears (so a compound document, which joins groups that share a document, is whole); the
result is the `kira.knowledge_base.compound.CompoundIndex` of those groups alone. Expansion, partners,
compound documents and view sets computed from it equal what the index of every group gives for these
documents (each is a function of the groups they reach), at a cost that grows with the compounds found,
not with the collection.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from kira.knowledge_base.compound import CompoundIndex

MAX_ROUNDS = 64  # group-closure rounds: a chain of groups longer than this is cut (logged by the caller)
QUERY_LIMIT = 16_384  # Milvus's largest query window


def _quoted(values: Iterable[Any]) -> str:
    return "[" + ", ".join(json.dumps(str(v)) for v in values) + "]"


def compounds_for(client: Any, collection: str, *, doc_ids: Iterable[str] = (), chunk_ids: Iterable[int] = (),
                  timeout: float = 10.0) -> CompoundIndex:
    """The `CompoundIndex` of every group the given documents (by doc id or by document chunk id) reach,
    read from Milvus by filter (module docstring)."""
    docs, chunks = sorted({str(d) for d in doc_ids}), sorted({int(c) for c in chunk_ids})
    seeds: list[str] = []
    if docs:
        seeds.append(f"doc_id in {_quoted(docs)}")
    if chunks:
        seeds.append("id in [" + ", ".join(map(str, chunks)) + "]")
    if not seeds:
        return CompoundIndex.build([], {})
    rows = client.query(collection, filter=f'level == "document" and ({" or ".join(seeds)}) '
                        "and array_length(groups) > 0", output_fields=["groups"], limit=QUERY_LIMIT, timeout=timeout)
    keys = {k for r in rows for k in r["groups"]}
    members: dict[str, dict[str, Any]] = {}  # doc id -> its document chunk row
    asked: set[str] = set()
    for _ in range(MAX_ROUNDS):
        new = sorted(keys - asked)
        if not new:
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
