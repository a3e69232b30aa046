"""How much domain correctness an answer built from the knowledge base's own text can reach.

DomainVQA-R scores answers by token F1 against an expert-worded reference, but a
faithful answer may only say what its evidence says. Two figures per question bound
what any such answer can score, from the text (captions and tags) of the documents
relevant to it (R_p, as precision counts them: its class's documents plus the ones it
needs; a multi-hop answer may draw on the other fields of the same slide):

- token bound: the F1 of the best bag of evidence tokens, precision 1 and recall = the
  share of the reference's content tokens that occur in that text, 2r / (1 + r). No
  answer made only of those words scores higher.
- clause oracle: the F1 of the best answer an oracle assembles greedily from up to
  `MAX_CLAUSES` whole clauses of that text (captions split at . ; : and ,), knowing the
  reference. An extractive generator that picks clauses perfectly lands about here.

Neither uses a model; `answer_ceiling(ds)` takes seconds.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

import numpy as np

from kira.eval.dataset import QUESTION_KINDS, Document, DomainDataset, Question
from kira.eval.metrics import answer_tokens

MAX_CLAUSES = 4
_CLAUSE_END = re.compile(r"(?<=[.;:,])\s+")


def document_clauses(doc: Document) -> list[str]:
    """The caption's clauses (split after . ; : and ,) followed by the tags."""
    return [c.strip() for c in _CLAUSE_END.split(doc.caption) if c.strip()] + [t for t in doc.tags if t.strip()]


def _f1(pred: Counter, ref: Counter) -> float:
    common = sum((pred & ref).values())
    if common == 0:
        return 0.0
    p, r = common / sum(pred.values()), common / sum(ref.values())
    return 2 * p * r / (p + r)


def token_bound(reference: str, evidence_texts: Iterable[str]) -> float:
    """Best token F1 of an answer using only words that occur in `evidence_texts`."""
    ref = answer_tokens(reference)
    if not ref:
        return 1.0
    vocab = {t for text in evidence_texts for t in answer_tokens(text)}
    r = sum(t in vocab for t in ref) / len(ref)
    return 2 * r / (1 + r) if r else 0.0


def clause_oracle(reference: str, clauses: Iterable[str], max_clauses: int = MAX_CLAUSES) -> float:
    """Token F1 of the greedy best concatenation of up to `max_clauses` of `clauses`."""
    ref = Counter(answer_tokens(reference))
    if not ref:
        return 1.0
    pool = []
    for clause in dict.fromkeys(clauses):
        tokens = Counter(answer_tokens(clause))
        if tokens & ref:
            pool.append(tokens)
    chosen: Counter = Counter()
    best = 0.0
    for _ in range(max_clauses):
        scored = [(_f1(chosen + c, ref), i) for i, c in enumerate(pool)]
        if not scored:
            break
        f1, i = max(scored)
        if f1 <= best:
            break
        best, chosen = f1, chosen + pool.pop(i)
    return best


def _relevant(q: Question, by_label: dict[str, list[Document]], by_id: dict[str, Document]) -> list[Document]:
    docs = {d.doc_id: d for d in by_label.get(q.label, [])}
    docs.update((i, by_id[i]) for i in q.relevant_doc_ids if i in by_id)
    return list(docs.values())


def answer_ceiling(ds: DomainDataset) -> dict[str, dict[str, float]]:
    """Mean token bound and clause oracle per question kind and over all questions:
    {"retrieval": {"token_bound": .., "clause_oracle": ..}, ..., "all": {...}}."""
    by_id = {d.doc_id: d for d in ds.documents}
    by_label: dict[str, list[Document]] = {}
    for d in ds.documents:
        by_label.setdefault(d.label, []).append(d)
    rows: dict[str, list[tuple[float, float]]] = {}
    for q in ds.questions:
        docs = _relevant(q, by_label, by_id)
        clauses = [c for d in docs for c in document_clauses(d)]
        rows.setdefault(q.kind, []).append((token_bound(q.answer, clauses), clause_oracle(q.answer, clauses)))
    out = {}
    for kind in [k for k in QUESTION_KINDS if k in rows] + ["all"]:
        values = np.array(rows[kind] if kind != "all" else [v for vs in rows.values() for v in vs], dtype=float)
        out[kind] = {"token_bound": float(values[:, 0].mean()) if len(values) else float("nan"),
                     "clause_oracle": float(values[:, 1].mean()) if len(values) else float("nan")}
    return out


__all__ = ["MAX_CLAUSES", "answer_ceiling", "clause_oracle", "document_clauses", "token_bound"]
