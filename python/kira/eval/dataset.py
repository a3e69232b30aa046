"""DomainVQA-R's data model: documents, questions, one dataset per domain, and the builder.

The KIRA paper evaluates on DomainVQA-R, procedurally generated images in four domains,
and never released the data. `build_domainvqa` regenerates it here, seeded, from the
generators in `kira.eval.domainvqa` (x-ray, circuits, satellite, histopathology).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

QuestionKind = Literal["retrieval", "visual", "multihop"]
QUESTION_KINDS: tuple[str, ...] = ("retrieval", "visual", "multihop")
DOMAINS: tuple[str, ...] = ("xray", "circuits", "satellite", "histopathology")


@dataclass(frozen=True, eq=False)
class Document:
    """One knowledge-base image with its user-supplied text and its ground truth."""

    doc_id: str  # unique across the whole benchmark, e.g. "xray-P007-pa-t0"
    domain: str
    image: np.ndarray = field(repr=False)  # uint8 (h, w, 3)
    caption: str  # what the user would have typed; may or may not name the label
    label: str  # the class the document belongs to (e.g. "pneumonia")
    attributes: dict[str, str]  # further ground truth (view, side, timepoint, subtype ...)
    tags: tuple[str, ...] = ()  # user tags (never the label itself)
    group: str | None = None  # patient / design / tile / slide this image belongs to


@dataclass(frozen=True, eq=False)
class Question:
    """A question with an expert-style answer and the documents that answer it."""

    qid: str
    domain: str
    kind: QuestionKind
    text: str
    answer: str  # the ground-truth answer domain correctness is scored against
    relevant_doc_ids: tuple[str, ...]  # every document that counts as relevant evidence
    label: str  # the class the answer rests on
    query_image: np.ndarray | None = field(default=None, repr=False)  # held out, never in the KB


@dataclass(frozen=True, eq=False)
class DomainDataset:
    """Everything one domain contributes: documents, questions, concept bank, compound groups."""

    name: str
    documents: tuple[Document, ...]
    questions: tuple[Question, ...]
    concept_bank: tuple[str, ...]  # domain concepts for query expansion
    labels: tuple[str, ...]  # the label set, in a fixed order
    temporal_groups: tuple[tuple[str, ...], ...] = ()  # doc ids of one sequence, in time order
    multiview_groups: tuple[tuple[str, ...], ...] = ()  # doc ids showing one subject from several views
    description: str = ""

    def document(self, doc_id: str) -> Document:
        """The document with this id; KeyError when there is none."""
        for doc in self.documents:
            if doc.doc_id == doc_id:
                return doc
        raise KeyError(doc_id)

    def summary(self) -> dict[str, Any]:
        """Counts per label and per question kind, for reports."""
        per_label = {lab: sum(d.label == lab for d in self.documents) for lab in self.labels}
        per_kind = {k: sum(q.kind == k for q in self.questions) for k in QUESTION_KINDS}
        return {
            "documents": len(self.documents),
            "questions": len(self.questions),
            "per_label": per_label,
            "per_kind": per_kind,
            "temporal_groups": len(self.temporal_groups),
            "multiview_groups": len(self.multiview_groups),
        }


@dataclass(frozen=True)
class BuildSize:
    """How many documents and questions a domain generator makes."""

    documents: int
    questions: int

    @classmethod
    def default(cls, small: bool) -> BuildSize:
        return cls(24, 12) if small else cls(200, 100)


def build_domainvqa(
    seed: int = 0, small: bool = False, domains: Sequence[str] | None = None
) -> dict[str, DomainDataset]:
    """Build DomainVQA-R.

    Parameters: `seed` fixes every random choice (same seed -> identical pixels and
    text); `small` builds the CI size (24 documents, 12 questions per domain) instead
    of the default (200 documents, 100 questions per domain); `domains` picks a subset
    of DOMAINS (default all four, in that order).
    Returns {domain name: DomainDataset}.
    Raises ValueError for an unknown domain name.
    """
    from kira.eval.domainvqa import GENERATORS

    chosen = tuple(domains) if domains else DOMAINS
    unknown = [d for d in chosen if d not in GENERATORS]
    if unknown:
        raise ValueError(f"unknown DomainVQA-R domains {unknown}; choose from {list(DOMAINS)}")
    size = BuildSize.default(small)
    out: dict[str, DomainDataset] = {}
    for name in chosen:
        domain_seed = int(np.random.SeedSequence([seed, DOMAINS.index(name)]).generate_state(1)[0])
        out[name] = GENERATORS[name](domain_seed, size)
    return out
