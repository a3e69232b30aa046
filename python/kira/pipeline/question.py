"""Question analysis: what several stages need to know about a question, as one seam.

The fusion stage leads with the documents the question names, the critic keeps them, and
the subject stage answers about them alone. `QuestionAnalysis` finds those once per ask.

* `NamedDocuments` (the default): a question word that the knowledge base holds as a name
  (a word of a document id, of a sequence or multiview group id, or of a metadata value:
  `KnowledgeBase.identifier_postings`, kira.knowledge_base.identifiers) names the documents
  carrying it. The knowledge base's data decides, not the word's spelling: "covid19" or
  "h100" names nothing unless a document is named so. A subject (a document with its compound-group partners)
  whose named identifiers are a strict subset of another subject's is a coincidence, not
  the subject: "site S047 on 2019-05-08" names S047, not another site flown that day.
* `NoAnalysis`: names nothing (every stage then treats the question as plain text).
"""

from __future__ import annotations

import numpy as np

from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.query_state import QuestionAnalysis, QuestionFacts


class NoAnalysis:
    """Finds nothing: no document is named."""

    def analyze(self, question: str, kb: KnowledgeBaseLike, allow: np.ndarray | None) -> QuestionFacts:
        return QuestionFacts()


class NamedDocuments:
    """The documents a question names by identifier (module docstring)."""

    def analyze(self, question: str, kb: KnowledgeBaseLike, allow: np.ndarray | None) -> QuestionFacts:
        if not question:
            return QuestionFacts()
        postings = dict(kb.identifier_postings(question, allow=allow))
        if not postings:
            return QuestionFacts()
        return QuestionFacts(named_chunks=_named_subjects(kb, postings), named_terms=tuple(sorted(postings)))


def _named_subjects(kb: KnowledgeBaseLike, postings: dict[str, np.ndarray]) -> np.ndarray:
    """The matched chunk ids whose subject's named identifiers no other subject's strictly include."""
    chunks = np.unique(np.concatenate(list(postings.values())))
    doc_of = dict(zip(chunks.tolist(), kb.document_chunk_of(chunks).tolist()))
    held: dict[int, set[str]] = {}  # document chunk (or the chunk itself, outside any document) -> terms
    for term, ids in postings.items():
        for cid in ids.tolist():
            held.setdefault(doc_of[cid] if doc_of[cid] >= 0 else cid, set()).add(term)
    partners = kb.compounds_for(chunk_ids=held).partners  # the groups of these documents alone (per hit on Milvus)
    subject = {d: frozenset(terms.union(*(held.get(p, ()) for p in partners.get(d, ())))) for d, terms in held.items()}
    distinct = set(subject.values())
    named = {d for d, terms in subject.items() if not any(terms < other for other in distinct)}
    keep = [cid for cid in chunks.tolist() if (doc_of[cid] if doc_of[cid] >= 0 else cid) in named]
    return np.asarray(keep, dtype=np.int64)


__all__ = ["NamedDocuments", "NoAnalysis", "QuestionAnalysis"]
