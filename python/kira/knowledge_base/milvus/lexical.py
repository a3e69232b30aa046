"""Lexical search and names on a Milvus knowledge base, answered by Milvus: nothing is read whole.

A knowledge base of format 2 keeps, beside its chunk collection, ``<collection>__terms``: one row per
document and passage chunk (the chunks kira's lexical index holds), under the chunk's id, written
with the chunk (kira.knowledge_base.milvus.writes calls `upsert_terms` / `delete_terms`):

* ``lexical``: the terms kira's own BM25 index gives the chunk (`kira.knowledge_base.lexical.
  lexical_terms` of its description, doc id and metadata values: lower-cased, stop words out, lightly
  stemmed, negated terms marked), as words Milvus's standard analyzer keeps whole ("not:crack" is
  stored "not_crack", the date "2021-04-09" "2021_04_09"). A BM25 function derives its sparse vector
  (``lexical_bm25``, k1 1.2 and b 0.75 as kira's), so `MilvusLexical.search` is kira's BM25 run by
  Milvus over kira's terms. The rows live apart from the chunk collection because BM25's document
  count and average length are the collection's: region and patch chunks (22 of 23 chunks of a photo)
  would count as empty documents there.
* ``names``: the words a question may name the chunk's document by (`kira.knowledge_base.identifiers.
  name_words` of its doc id, group ids and single-token metadata values), on document chunks;
  `MilvusLexical.named` finds each question word's documents with ``text_match``.
* ``groups`` / ``group_order``: the document's temporal and multiview memberships, as its chunks hold
  them, so the compound groups of a query's hits are fetched from document rows alone
  (kira.knowledge_base.milvus.compounds), not from all 23 chunks of each image.

`specificity` (the question's largest normalised idf) counts each term's rows with ``text_match``.
Per question this costs one BM25 search plus one count per distinct term; the kira process holds no
index, so opening and the first ask do not grow with the collection.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from kira.knowledge_base.identifiers import MAX_DOCUMENT_SHARE, name_words, whole_id_named
from kira.knowledge_base.lexical import (BM25_B, BM25_K1, QUERY_FRAME_WORDS, LexicalHits, indexed_text,
                                        lexical_terms)

MAX_TERMS_CHARS = 65_535  # Milvus's VARCHAR limit, in bytes: the analysed fields are cut to it
INDEXED_LEVELS = ("document", "passage")  # the levels kira's lexical index holds
_NOT_WORD = re.compile(r"\W")


def stored_word(term: str) -> str:
    """An index term as one word of Milvus's standard analyzer (``\\w+``): other characters become '_'."""
    return _NOT_WORD.sub("_", term)


def _fit(words: Iterable[str]) -> str:
    text = " ".join(words)
    if len(text.encode("utf-8")) <= MAX_TERMS_CHARS:
        return text
    return text.encode("utf-8")[:MAX_TERMS_CHARS].decode("utf-8", "ignore").rsplit(" ", 1)[0]


def lexical_field(level: str, description: str, doc_id: str, metadata: Mapping[str, Any] | None) -> str:
    """The ``lexical`` value of a chunk: kira's BM25 terms of its description, doc id and metadata values
    (document and passage chunks; "" at other levels, which the lexical index leaves out)."""
    if level not in INDEXED_LEVELS:
        return ""
    return _fit(stored_word(t) for t in lexical_terms(indexed_text(description, doc_id, dict(metadata or {}))))


def names_field(level: str, doc_id: str, group_keys: Iterable[str], metadata: Mapping[str, Any] | None) -> str:
    """The ``names`` value of a chunk: the name words of its document (doc id, group ids, single-token
    metadata values; kira.knowledge_base.identifiers) on a document chunk, "" on others."""
    if level != "document":
        return ""
    texts = [str(doc_id)] + [str(key).split(":", 1)[-1] for key in group_keys]
    values = metadata if isinstance(metadata, Mapping) else {}
    texts += [str(v) for v in values.values()
              if isinstance(v, (str, int)) and not isinstance(v, bool) and len(str(v).split()) == 1]
    return _fit(sorted({stored_word(w) for t in texts for w in name_words(t)}))


def terms_name(collection: str) -> str:
    """The terms collection beside chunk collection `collection` (module docstring)."""
    return f"{collection}__terms"


def terms_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The terms rows of chunk rows (kira.knowledge_base.milvus.writes.to_row): document and passage chunks."""
    return [{"id": int(r["id"]), "doc_id": r["doc_id"], "level": r["level"],
             "lexical": lexical_field(r["level"], r["description"], r["doc_id"], r["metadata"]),
             "names": names_field(r["level"], r["doc_id"], r["groups"], r["metadata"]),
             "groups": r["groups"], "group_order": r["group_order"]}
            for r in rows if r["level"] in INDEXED_LEVELS]


def upsert_terms(collection: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write the terms rows of these chunk rows (nothing for a collection without terms, format 1)."""
    if not collection.config.kira_terms:
        return
    terms = terms_rows(rows)
    if terms:
        collection.client.upsert(terms_name(collection.name), terms, timeout=collection.config.timeout)


def delete_terms(collection: Any, filter: str = "", *, ids: Sequence[int] = ()) -> None:
    """Delete terms rows by a filter over ``id`` / ``doc_id`` / ``level``, or by chunk ids."""
    if not collection.config.kira_terms or not (filter or len(ids)):
        return
    if filter:
        collection.client.delete(terms_name(collection.name), filter=filter)
    else:
        collection.client.delete(terms_name(collection.name), ids=[int(i) for i in ids])


class MilvusLexical:
    """kira's lexical index answered by Milvus (module docstring): ``search``, ``specificity``, ``named``
    and ``idf``, as `kira.knowledge_base.lexical.LexicalIndex` answers them, over one commit.

    `client` / `collection`: the pymilvus client and the terms collection's name; `resolve_allow` turns
    a search's ``allow`` array into (ids or None, levels or None) (the knowledge base's level arrays
    become a level filter, not an id list). Counts are cached per question term until `forget`.
    """

    def __init__(self, client: Any, collection: str, *, resolve_allow: Callable[[np.ndarray], tuple[Any, Any]],
                 timeout: float = 10.0) -> None:
        self.client, self.collection = client, collection
        self._resolve_allow = resolve_allow
        self.timeout = float(timeout)
        self._counts: dict[str, int] = {}

    def forget(self) -> None:
        """Drop the cached counts (another commit changed the collection)."""
        self._counts.clear()

    def _count(self, filter: str) -> int:
        if filter not in self._counts:
            rows = self.client.query(self.collection, filter=filter, output_fields=["count(*)"], timeout=self.timeout)
            self._counts[filter] = int(rows[0]["count(*)"]) if rows else 0
        return self._counts[filter]

    def __len__(self) -> int:
        """Chunks holding terms (document and passage chunks): every row of the terms collection."""
        return self._count("")

    def _filter(self, allow: np.ndarray | None, levels: Sequence[str]) -> str | None:
        """The filter for chunks at `levels` within `allow` (None: nothing may be returned)."""
        parts = [_levels(levels)]
        if allow is not None:
            ids, named_levels = self._resolve_allow(allow)
            if named_levels is not None:
                keep = [level for level in levels if level in set(named_levels)]
                if not keep:
                    return None
                parts = [_levels(keep)]
            if ids is not None:
                ids = np.unique(np.asarray(ids, dtype=np.int64))
                if not len(ids):
                    return None
                parts.append("id in [" + ", ".join(str(int(i)) for i in ids) + "]")
        return " and ".join(parts)

    def search(self, text: str, k: int, *, allow: np.ndarray | None = None) -> LexicalHits:
        """The `k` best chunks for `text` by BM25 over kira's terms (only chunks sharing a term; ties by chunk
        id). `allow`: chunk ids that may be returned (None: all). Raises ValueError for k < 1."""
        if k < 1:
            raise ValueError(f"k must be >= 1; got {k}")
        empty = LexicalHits(np.zeros(0, np.int64), np.zeros(0, np.float32))
        words = sorted({stored_word(t) for t in lexical_terms(text or "") if t not in QUERY_FRAME_WORDS})
        flt = self._filter(allow, INDEXED_LEVELS)
        if not words or flt is None:
            return empty
        hits = self.client.search(self.collection, data=[" ".join(words)], anns_field="lexical_bm25", limit=int(k),
                                  filter=flt, output_fields=[], search_params={"metric_type": "BM25"},
                                  timeout=self.timeout)[0]
        # Milvus Lite 3.2 reports BM25 scores negated; a server reports them as they are
        pairs = sorted(((abs(float(h["distance"])), int(h["id"])) for h in hits), key=lambda p: (-p[0], p[1]))
        pairs = [p for p in pairs if p[0] > 0][:k]
        return LexicalHits(np.array([i for _, i in pairs], dtype=np.int64),
                           np.array([s for s, _ in pairs], dtype=np.float32))

    def document_frequency(self, term: str) -> int:
        """Document and passage chunks holding the index term `term` (one ``text_match`` count)."""
        return self._count(f"text_match(lexical, '{stored_word(term)}')")

    def idf(self, term: str) -> float:
        """BM25 idf of an index term (already passed through `lexical_terms`); 0.0 for an unknown term."""
        df = self.document_frequency(term)
        if df == 0:
            return 0.0
        return math.log(1.0 + (len(self) - df + 0.5) / (df + 0.5))

    def specificity(self, text: str) -> float:
        """Largest idf among `text`'s known terms, divided by the idf of a single-document term; in [0, 1]."""
        n = len(self)
        if n == 0:
            return 0.0
        terms = [t for t in set(lexical_terms(text or "")) if t not in QUERY_FRAME_WORDS]
        best = max((self.idf(t) for t in terms), default=0.0)
        top = math.log(1.0 + (n - 0.5) / 1.5)
        return float(min(best / top, 1.0)) if top > 0 else 0.0

    def named(self, text: str, *, allow: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """{word of `text`: the document chunk ids (ascending) it names}, as kira.knowledge_base.identifiers'
        `IdentifierIndex.named`: a word held by more than half of the documents (and more than one) names
        none unless it is one group's name (`_group_named`), and one that more documents' terms hold than it
        names names only through a whole id. One ``text_match`` query per word, reading at most that many ids,
        and for a word that names some, one count."""
        out: dict[str, np.ndarray] = {}
        question = name_words(text or "")
        if not question:
            return out
        documents = self._count("") - self._count('level == "passage"')  # Lite counts a filter by reading its rows
        limit = max(1, int(MAX_DOCUMENT_SHARE * documents))
        for word in sorted(question):
            rows = self.client.query(self.collection, filter=f"level == \"document\" and text_match(names, "
                                     f"'{stored_word(word)}')", output_fields=["id", "doc_id", "groups"],
                                     limit=limit + 1, timeout=self.timeout)
            if rows and len(rows) > limit:  # the naming scheme, unless the word is one group's name
                rows = self._group_named(word, rows[0])
            if not rows:
                continue
            if self._describes_more(word, len(rows)):  # an id needs another word of the question to be whole
                rows = [r for r in rows if _ids_words(r) & (question - {word})
                        and whole_id_named(word, self._distinct_ids(r, limit), question)]
            ids = np.array(sorted(int(r["id"]) for r in rows), dtype=np.int64)
            if allow is not None:
                ids = ids[np.isin(ids, np.asarray(allow, dtype=np.int64))]
            if len(ids):
                out[word] = ids
        return out

    def _group_named(self, word: str, row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The document rows of the one group whose id holds `word` when exactly its members hold the word
        (`IdentifierIndex.build`'s group names): two counts and the members' rows (at most `QUERY_LIMIT`: a
        larger group's word names nothing here); [] otherwise."""
        import json

        from kira.knowledge_base.milvus.compounds import QUERY_LIMIT

        holding = self._count(f"level == \"document\" and text_match(names, '{stored_word(word)}')")
        for key in row.get("groups") or ():
            if word not in name_words(str(key).split(":", 1)[-1]):
                continue
            group = f'level == "document" and array_contains(groups, {json.dumps(str(key))})'
            size = self._count(group)
            if size == holding and size <= QUERY_LIMIT:
                rows: list[Mapping[str, Any]] = self.client.query(
                    self.collection, filter=group, output_fields=["id", "doc_id", "groups"], limit=size,
                    timeout=self.timeout)
                return rows
        return []

    def _describes_more(self, word: str, named: int) -> bool:
        """Whether more documents hold `word` in their terms without naming it than the `named` it names
        (`IdentifierIndex.describes_more`): one ``text_match`` count."""
        terms = lexical_terms(word)
        if len(terms) != 1:
            return False
        return self._count(f"level == \"document\" and text_match(lexical, '{stored_word(terms[0])}') and "
                           f"not text_match(names, '{stored_word(word)}')") > named

    def _distinct_ids(self, row: Mapping[str, Any], limit: int) -> tuple[frozenset[str], ...]:
        """The distinctive words (held by 1 to `limit` documents) of each id of a document row: its doc id and
        group ids (`IdentifierIndex.ids_of`); one cached count per word."""
        return tuple(frozenset(w for w in name_words(t)
                               if 0 < self._count(f"level == \"document\" and text_match(names, '{stored_word(w)}')")
                               <= limit) for t in _ids(row))


def _ids(row: Mapping[str, Any]) -> list[str]:
    """A document row's ids: its doc id and the ids of its groups."""
    return [str(row["doc_id"])] + [str(key).split(":", 1)[-1] for key in (row.get("groups") or ())]


def _ids_words(row: Mapping[str, Any]) -> set[str]:
    return set().union(*(name_words(t) for t in _ids(row)))


def _levels(levels: Sequence[str]) -> str:
    return "level in [" + ", ".join(f'"{level}"' for level in levels) + "]"


__all__ = ["INDEXED_LEVELS", "MilvusLexical", "delete_terms", "lexical_field", "names_field", "stored_word",
           "terms_name", "terms_rows", "upsert_terms"]
