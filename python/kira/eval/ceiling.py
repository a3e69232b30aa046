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

Neither uses a model; `answer_ceiling(ds)` takes well under a second per domain.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

import numpy as np

from kira.eval.dataset import QUESTION_KINDS, Document, DomainDataset
from kira.eval.metrics import answer_tokens, counts_f1

MAX_CLAUSES = 4
_CLAUSE_END = re.compile(r"(?<=[.;:,])\s+")


def document_clauses(doc: Document) -> list[str]:
    """The caption's clauses (split after . ; : and ,) followed by the tags."""
    return [c.strip() for c in _CLAUSE_END.split(doc.caption) if c.strip()] + [t for t in doc.tags if t.strip()]


def token_bound(reference: str, evidence_texts: Iterable[str]) -> float:
    """Best token F1 of an answer using only words that occur in `evidence_texts`."""
    return _token_bound(answer_tokens(reference), {t for text in evidence_texts for t in answer_tokens(text)})


def _token_bound(ref: list[str], vocab: set[str]) -> float:
    if not ref:
        return 1.0
    r = sum(t in vocab for t in ref) / len(ref)
    return 2 * r / (1 + r) if r else 0.0


def clause_oracle(reference: str, clauses: Iterable[str], max_clauses: int = MAX_CLAUSES) -> float:
    """Token F1 of the greedy best concatenation of up to `max_clauses` of `clauses`."""
    pool = [Counter(answer_tokens(c)) for c in dict.fromkeys(clauses)]
    return _clause_oracle(Counter(answer_tokens(reference)), pool, max_clauses)


def _clause_oracle(ref: Counter, clauses: Iterable[Counter], max_clauses: int = MAX_CLAUSES) -> float:
    if not ref:
        return 1.0
    pool = [c for c in clauses if c & ref]
    chosen: Counter = Counter()
    best = 0.0
    for _ in range(max_clauses):
        if not pool:
            break
        f1, i = max((counts_f1(chosen + c, ref), i) for i, c in enumerate(pool))
        if f1 <= best:
            break
        best, chosen = f1, chosen + pool.pop(i)
    return best


def answer_ceiling(ds: DomainDataset) -> dict[str, dict[str, float]]:
    """Mean token bound and clause oracle per question kind and over all questions:
    {"retrieval": {"token_bound": .., "clause_oracle": ..}, ..., "all": {...}}."""
    # each document's clauses are tokenised once: a class's documents serve many questions
    clauses = {d.doc_id: {c: Counter(answer_tokens(c)) for c in document_clauses(d)} for d in ds.documents}
    by_label: dict[str, list[str]] = {}
    for d in ds.documents:
        by_label.setdefault(d.label, []).append(d.doc_id)
    rows: dict[str, list[tuple[float, float]]] = {}
    for q in ds.questions:
        relevant = dict.fromkeys(by_label.get(q.label, []))
        relevant.update(dict.fromkeys(i for i in q.relevant_doc_ids if i in clauses))
        pool = {text: tokens for doc in relevant for text, tokens in clauses[doc].items()}  # distinct clause texts
        ref = answer_tokens(q.answer)
        vocab = {t for tokens in pool.values() for t in tokens}
        rows.setdefault(q.kind, []).append((_token_bound(ref, vocab), _clause_oracle(Counter(ref), pool.values())))
    out = {}
    for kind in [k for k in QUESTION_KINDS if k in rows] + ["all"]:
        values = np.array(rows[kind] if kind != "all" else [v for vs in rows.values() for v in vs], dtype=float)
        out[kind] = {"token_bound": float(values[:, 0].mean()) if len(values) else float("nan"),
                     "clause_oracle": float(values[:, 1].mean()) if len(values) else float("nan")}
    return out


__all__ = ["MAX_CLAUSES", "answer_ceiling", "clause_oracle", "document_clauses", "token_bound"]
