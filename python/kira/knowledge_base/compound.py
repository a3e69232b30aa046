"""One representation of a knowledge base's compound groups, and every read form derived from it.

Temporal sequences and multiview sets are stored as groups of documents
(`Store.groups`). `CompoundIndex.build` reads them once per commit and derives what the
pipeline reads: the core's `CompoundGroups` over document-chunk ids (compound expansion),
the kind of each member pair, each document chunk's partners, each document's compound
document (groups that share a document are one compound document, keyed by its smallest
doc id), each document's multiview set and each document's place in its temporal sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from kira import _core


@dataclass(frozen=True)
class CompoundIndex:
    """The compound groups of one commit (module docstring). Read-only after `build`."""

    core: Any  # kira._core.CompoundGroups over document-chunk ids
    kinds: Mapping[tuple[int, int], str]  # (a, b) document chunks of one group -> "temporal" | "multiview"
    partners: Mapping[int, frozenset[int]]  # document chunk -> the document chunks sharing a group with it
    compound_of: Mapping[str, str]  # doc id -> its compound document's key (documents in no group absent)
    view_set_of: Mapping[str, str]  # doc id -> its multiview set's id (sets of 2+)
    sequence_of: Mapping[str, tuple[str, int, int]]  # doc id -> (temporal sequence id, 1-based place, members)
    # for sequences of 2+; a document in two sequences: the one whose id sorts first

    @classmethod
    def build(cls, groups: Sequence[tuple[str, str, Sequence[str]]], doc_chunk: Mapping[str, int]) -> CompoundIndex:
        """From the stored groups ((kind, group id, doc ids in order), ...) and each doc id's document chunk id."""
        core = _core.CompoundGroups()
        kinds: dict[tuple[int, int], str] = {}
        partners: dict[int, set[int]] = {}
        for kind, _gid, docs in groups:
            members = [doc_chunk[d] for d in docs if d in doc_chunk]
            if len(members) < 2:
                continue
            (core.add_temporal if kind == "temporal" else core.add_multiview)(np.array(members, dtype=np.int64))
            for a in members:
                for b in members:
                    if a != b:
                        kinds.setdefault((a, b), kind)
                        partners.setdefault(a, set()).add(b)
        view_set = {d: gid for kind, gid, docs in groups if kind == "multiview" and len(docs) >= 2 for d in docs}
        sequence: dict[str, tuple[str, int, int]] = {}
        for kind, gid, docs in sorted(groups, key=lambda g: (g[0], g[1])):
            if kind == "temporal" and len(docs) >= 2:
                for place, d in enumerate(docs, 1):
                    sequence.setdefault(d, (gid, place, len(docs)))
        return cls(core, kinds, {d: frozenset(p) for d, p in partners.items()}, _compound_documents(groups), view_set,
                   sequence)


def _compound_documents(groups: Sequence[tuple[str, str, Sequence[str]]]) -> dict[str, str]:
    """Union-find over the groups of 2+: each document's compound document key (its smallest doc id)."""
    parent: dict[str, str] = {}

    def root(d: str) -> str:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for _kind, _gid, docs in groups:
        for d in docs if len(docs) >= 2 else ():
            parent.setdefault(d, d)
        for d in docs[1:] if len(docs) >= 2 else ():
            a, b = root(docs[0]), root(d)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {d: root(d) for d in parent}
