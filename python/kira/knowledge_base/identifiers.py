"""The names a knowledge base gives its documents: what a question can name a subject by.

A question names a document when one of its words is a word of that document's id, of the
id of a group (temporal sequence or multiview set) it belongs to, or of one of its metadata
values that is a single token (a value with spaces is free text, not a name): "what does P017 show?" names the documents of sequence "P017"; "IMG_1005" names the
document whose id holds "1005". What counts is the knowledge base's own data, never the
spelling of a word: "covid19", "x86" or "4k" name nothing unless a document id, group id or
metadata value holds them, and a caption that mentions "P017" does not make it a name.

A word held by more than half of the documents (and by more than one) names no subject: it
is part of the naming scheme ("img" in IMG_1000 ... IMG_1042, "png" in file names), not a
name. But a word that exactly one group's members hold, through that group's id, is the
group's name however many documents it has: in a knowledge base of three photos, two of them
in sequence "breakfast-log", "the breakfast-log" names those two.

A word the knowledge base uses more to describe documents than to name them is a word of
the language first: with ids "led_circuit" and "voltage_divider" and captions that speak of
circuits, "a circuit with a battery" is about circuits, not about led_circuit. Such a word
names a document only through an id (doc id or group id) whose every distinctive word (two
at least) the question holds: "the led circuit" names led_circuit. A word describes a
document when that document's indexed text (`kira.knowledge_base.lexical`: its description,
caption, tags, labels and metadata) holds it and none of its names does; the count is over
documents, as the naming count is.

`IdentifierIndex.build` reads the fields once per commit (`KnowledgeBase.identifier_postings`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

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
    ids_of: Mapping[int, tuple[frozenset[str], ...]] = field(default_factory=dict)
    """document chunk id -> the distinctive words (those in `postings`) of each of its ids (doc id, group ids)"""
    document_chunks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted: every one read

    @classmethod
    def build(cls, names: Iterable[tuple[int, Iterable[str], Iterable[str]]]) -> IdentifierIndex:
        """From (document chunk id, its ids: doc id then group ids, its one-token metadata values) triples."""
        held: dict[str, set[int]] = {}
        ids: dict[int, list[set[str]]] = {}
        members: dict[str, set[int]] = {}  # group id -> its document chunks
        count = 0
        for chunk_id, own_ids, values in names:
            count += 1
            own_ids = list(own_ids)
            words = [name_words(t) for t in own_ids]
            ids[int(chunk_id)] = words
            for group_id in own_ids[1:]:
                members.setdefault(str(group_id), set()).add(int(chunk_id))
            for word in set().union(*words, *(name_words(t) for t in values)):
                held.setdefault(word, set()).add(int(chunk_id))
        limit = max(1, int(MAX_DOCUMENT_SHARE * count))
        group_names = {w for g, m in members.items() for w in name_words(g) if held.get(w) == m}
        postings = {w: np.array(sorted(c), dtype=np.int64) for w, c in held.items()
                    if len(c) <= limit or w in group_names}
        ids_of = {c: tuple(frozenset(w for w in words if w in postings) for words in own) for c, own in ids.items()}
        return cls(postings, count, ids_of, np.array(sorted(ids_of), dtype=np.int64))

    def named(self, text: str, *, allow: np.ndarray | None = None,
              holding: Callable[[str], np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """{word of `text`: the document chunk ids it names (ascending)}, for the words that name one;
        `allow` keeps only those chunk ids (None: all). `holding(word)`: the chunk ids whose indexed text holds
        the word (`LexicalIndex.chunks_holding`); with it, a word that describes more documents than it names
        names only through a whole id (module docstring). None: every name word names."""
        out: dict[str, np.ndarray] = {}
        words = name_words(text or "")
        for word in sorted(words):
            ids = self.postings.get(word)
            if ids is None:
                continue
            if holding is not None and self.describes_more(word, ids, holding(word)):
                ids = np.array([c for c in ids.tolist() if whole_id_named(word, self.ids_of.get(c, ()), words)],
                               dtype=np.int64)
            if allow is not None:
                ids = ids[np.isin(ids, np.asarray(allow, dtype=np.int64))]
            if len(ids):
                out[word] = ids
        return out

    def describes_more(self, word: str, named: np.ndarray, holding: np.ndarray) -> bool:
        """Whether more documents hold `word` in their text without being named by it than it names."""
        holding = np.asarray(holding, dtype=np.int64)
        described = np.setdiff1d(np.intersect1d(holding, self.document_chunks, assume_unique=True), named)
        return len(described) > len(named)


def whole_id_named(word: str, ids: Iterable[frozenset[str]], question_words: set[str]) -> bool:
    """Whether one of a document's ids (its distinctive words) holds `word` and at least one more word, every one
    of them in the question (module docstring)."""
    return any(word in own and len(own) >= 2 and own <= question_words for own in ids)


def identifier_index(kb: Any) -> IdentifierIndex:
    """The `IdentifierIndex` of `kb`'s documents: their ids, group ids and metadata values."""
    return rows_identifier_index(kb.storage.rows)


def rows_identifier_index(rows: Any) -> IdentifierIndex:
    """The `IdentifierIndex` of the documents of a storage's `rows` (`kira.knowledge_base.storage.StoredRows`)."""
    docs = rows.documents()
    chunk_of = rows.document_chunk_ids(list(docs))
    ids: dict[str, list[str]] = {d: [d] for d in docs}
    for _kind, group_id, members in rows.groups():
        for d in members:
            if d in ids:
                ids[d].append(str(group_id))
    values: dict[str, list[str]] = {}
    for d, row in docs.items():
        metadata = row.metadata if isinstance(row.metadata, Mapping) else {}
        values[d] = [str(v) for v in metadata.values()
                     if isinstance(v, (str, int)) and not isinstance(v, bool) and len(str(v).split()) == 1]
    return IdentifierIndex.build((chunk_of[d], own, values[d]) for d, own in ids.items() if d in chunk_of)


__all__ = ["IdentifierIndex", "MAX_DOCUMENT_SHARE", "identifier_index", "name_words", "rows_identifier_index",
           "whole_id_named"]
