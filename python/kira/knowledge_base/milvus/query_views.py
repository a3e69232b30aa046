"""What a query reads of a Milvus knowledge base, answered in Milvus rather than read whole into the process.

`MilvusQueryViews` is a base class of `kira.knowledge_base.milvus.storage.MilvusStorage`: the optional
capabilities of kira.knowledge_base.storage that a Milvus storage answers itself. The level filter
(`level_ids`: searched with them as ``allow``, an index sends ``level in [...]``) and the per-document
grouping of a search (`document_groups`: Milvus groups on ``doc_chunk``) run in Milvus; so do the lexical
search (`lexical`: Milvus's BM25 over kira's terms), the names a question uses (`identifier_postings`)
and the compound groups of a query's hits (`compounds_for`), over ``<name>__terms``
(kira.knowledge_base.milvus.lexical, .compounds). A knowledge base of format 1 (no ``__terms``) answers
the lexical search and the names from rows read here. What it fetched is kept until the next commit or
write (`_forget`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from kira.knowledge_base.milvus.rows import MilvusRows

if TYPE_CHECKING:
    from kira.knowledge_base.compound import CompoundIndex


class MilvusQueryViews:
    """The query capabilities of `kira.knowledge_base.milvus.storage.MilvusStorage` (module docstring), over its
    ``collection``, vector indexes and ``rows``; the storage's ``__init__`` sets the caches these keep."""

    rows: MilvusRows
    collection: Any
    _indexes: dict[str, Any]
    _doc_chunk: dict[int, int]  # chunk id -> document chunk id, of the ids asked about since a commit
    _lexical: Any  # this commit's lexical index (MilvusLexical, or format 1: an in-process one)
    _names: Any  # format 1: this commit's IdentifierIndex

    def level_ids(self, levels: Sequence[str]) -> np.ndarray:
        """Chunk ids at `levels`; searched with them as ``allow``, an index sends ``level in [...]``."""
        ids = self.rows.chunk_ids(levels=levels)
        for index in self._indexes.values():
            index.name_allow(ids, tuple(levels))
        return ids

    def document_chunk_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document chunk id of each chunk id (-1 unknown), fetched for these ids only."""
        ids = np.asarray(chunk_ids, dtype=np.int64).reshape(-1)
        known = self._doc_chunk
        missing = [int(i) for i in np.unique(ids) if int(i) not in known]
        if missing:
            found = {int(r["id"]): int(r["doc_chunk"]) for r in self.rows.query_ids(missing, ["doc_chunk"])}
            known.update({i: found.get(i, -1) for i in missing})
        return np.array([known[int(i)] for i in ids], dtype=np.int64)

    def document_groups(self) -> Any:
        """`groups=` for this collection's searches: Milvus groups on ``doc_chunk``."""
        from kira.knowledge_base.milvus.index import DocumentGroups

        count = (lambda: self.collection.count()) if self.collection is not None else (lambda: 0)
        return DocumentGroups(group_of=self.document_chunk_of, count=count)

    def _forget(self) -> None:
        self._doc_chunk, self._lexical, self._names = {}, None, None

    def _kira_terms(self) -> bool:
        return self.collection is not None and self.collection.config.kira_terms

    def lexical(self) -> Any:
        """This commit's lexical index: `MilvusLexical` (Milvus's BM25 over kira's terms in ``__terms``), or for
        a format-1 knowledge base kira's `LexicalIndex` built here from the document and passage rows."""
        if self._lexical is None:
            if self._kira_terms():
                from kira.knowledge_base.milvus.lexical import MilvusLexical
                from kira.knowledge_base.milvus.lexical import terms_name

                col = self.collection
                self._lexical = MilvusLexical(col.client, terms_name(col.name), timeout=col.config.timeout,
                                              resolve_allow=self._indexes["text"].resolve_allow)
            else:
                from kira.knowledge_base.lexical import LexicalIndex, indexed_text

                rows = self.rows.lexical_rows(0, None)
                self._lexical = LexicalIndex.build([int(r[0]) for r in rows], [indexed_text(*r[1:]) for r in rows])
        return self._lexical

    def identifier_postings(self, text: str, *, allow: np.ndarray | None = None) -> Mapping[str, np.ndarray]:
        """{word of `text`: the document chunk ids it names}: one ``text_match`` query per word (format 1: the
        documents read once per commit, kira.knowledge_base.identifiers)."""
        named: Mapping[str, np.ndarray]
        if self._kira_terms():
            named = self.lexical().named(text, allow=allow)
            return named
        if self._names is None:
            from kira.knowledge_base.identifiers import rows_identifier_index

            self._names = rows_identifier_index(self.rows)
        named = self._names.named(text, allow=allow, holding=self.lexical().chunks_holding)
        return named

    def compounds_for(self, *, doc_ids: Iterable[str] = (), chunk_ids: Iterable[int] = ()) -> CompoundIndex:
        """The `CompoundIndex` of the groups these documents reach, fetched by filter from ``__terms``'s document
        rows (format 1: from the chunk collection; kira.knowledge_base.milvus.compounds)."""
        from kira.knowledge_base.compound import CompoundIndex
        from kira.knowledge_base.milvus.compounds import compounds_for
        from kira.knowledge_base.milvus.lexical import terms_name

        col = self.collection
        if col is None:
            return CompoundIndex.build([], {})
        rows = terms_name(col.name) if self._kira_terms() else col.name
        return compounds_for(col.client, rows, doc_ids=doc_ids, chunk_ids=chunk_ids, timeout=col.config.timeout)


__all__ = ["MilvusQueryViews"]
