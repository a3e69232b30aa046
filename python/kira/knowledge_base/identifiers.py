"""The names a knowledge base gives its documents: what a question can name a subject by.

A question names a document when one of its words is a word of that document's id, of the
id of a group (temporal sequence or multiview set) it belongs to, or of one of its metadata
values that is a single token (a value with spaces is free text, not a name): "what does P017 show?" names the documents of sequence "P017"; "IMG_1005" names the
document whose id holds "1005". What counts is the knowledge base's own data, never the
spelling of a word: "covid19", "x86" or "4k" name nothing unless a document id, group id or
metadata value holds them, and a caption that mentions "P017" does not make it a name.

A word held by more than half of the documents (and by more than one) names no subject: it
is part of the naming scheme ("img" in IMG_1000 ... IMG_1042, "png" in file names), not a
name.

`IdentifierIndex.build` reads the fields once per commit (`KnowledgeBase.identifier_postings`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from kira.text.tokens import STOP_WORDS

_WORD = re.compile(r"\d{4}-\d{2}-\d{2}|[a-z0-9]+")
MAX_DOCUMENT_SHARE = 0.5
"""A word held by more than this share of the documents (and by more than one) names no subject."""


def name_words(text: str) -> set[str]:
    """The words of `text` as names are matched: lower-cased, ISO dates whole, stop words out."""
    return {w for w in _WORD.findall(str(text).lower()) if w not in STOP_WORDS}


@dataclass(frozen=True)
class IdentifierIndex:
    """{word: the document chunk ids whose names hold it} over one commit (module docstring)."""

    postings: Mapping[str, np.ndarray]  # word -> sorted int64 document chunk ids
    documents: int  # how many documents were read

    @classmethod
    def build(cls, names: Iterable[tuple[int, Iterable[str]]]) -> IdentifierIndex:
        """From (document chunk id, its names: doc id, group ids, metadata values) pairs."""
        held: dict[str, set[int]] = {}
        count = 0
        for chunk_id, texts in names:
            count += 1
            for word in set().union(*(name_words(t) for t in texts)):
                held.setdefault(word, set()).add(int(chunk_id))
        limit = max(1, int(MAX_DOCUMENT_SHARE * count))
        postings = {w: np.array(sorted(ids), dtype=np.int64) for w, ids in held.items() if len(ids) <= limit}
        return cls(postings, count)

    def named(self, text: str, *, allow: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """{word of `text`: the document chunk ids it names (ascending)}, for the words that name one;
        `allow` keeps only those chunk ids (None: all)."""
        out: dict[str, np.ndarray] = {}
        for word in sorted(name_words(text or "")):
            ids = self.postings.get(word)
            if ids is None:
                continue
            if allow is not None:
                ids = ids[np.isin(ids, np.asarray(allow, dtype=np.int64))]
            if len(ids):
                out[word] = ids
        return out


def identifier_index(kb: Any) -> IdentifierIndex:
    """The `IdentifierIndex` of `kb`'s documents: their ids, group ids and metadata values."""
    return rows_identifier_index(kb.storage.rows)


def rows_identifier_index(rows: Any) -> IdentifierIndex:
    """The `IdentifierIndex` of the documents of a storage's `rows` (`kira.knowledge_base.storage.StoredRows`)."""
    docs = rows.documents()
    chunk_of = rows.document_chunk_ids(list(docs))
    names: dict[str, list[str]] = {d: [d] for d in docs}
    for _kind, group_id, members in rows.groups():
        for d in members:
            if d in names:
                names[d].append(str(group_id))
    for d, row in docs.items():
        metadata = row.metadata if isinstance(row.metadata, Mapping) else {}
        names[d].extend(str(v) for v in metadata.values()
                        if isinstance(v, (str, int)) and not isinstance(v, bool) and len(str(v).split()) == 1)
    return IdentifierIndex.build((chunk_of[d], texts) for d, texts in names.items() if d in chunk_of)


__all__ = ["IdentifierIndex", "MAX_DOCUMENT_SHARE", "identifier_index", "name_words", "rows_identifier_index"]
