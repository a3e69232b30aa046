"""The typed records stages pass each other: retrieval paths, rankings, query vectors, the fused list.

Every search's result list is a `Ranking` tagged with the `RetrievalPath` it came from; the
rankings of one query are one `Rankings` record with a field per path, so a stage reads
``state.rankings.lexical`` rather than searching a list for a path name, and `fuse` reads them
in one fixed order (`Rankings.in_fusion_order`). The fused list (`Fused`) records, besides every
chunk's paths for the evidence provenance, which chunks lead it and why (`Fused.leaders`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Mapping

import numpy as np


class RetrievalPath(StrEnum):
    """Where a chunk of the fused list came from. The values are what evidence provenance and traces show."""

    VISUAL = "visual"  # path A: the query image, or the question in image space
    TEXT = "text"  # path B: the question's sentence vector against the description index
    EXPANSION = "expansion"  # path B: a captioner hypothesis or profile concept
    LEXICAL = "lexical"  # path B: BM25 over document texts
    FINE = "fine"  # ReAG fine-grained: a query crop against region and patch chunks
    FEEDBACK = "feedback"  # pseudo-relevance feedback: the mean of the surest documents
    HOP = "hop"  # residual multi-hop retrieval (labelled "hop2", "hop3", ... by `Ranking.label`)
    IDENTIFIER = "identifier"  # leads: a document the question names
    CLEAR_MATCH = "clear_match"  # leads: the document a query image clearly shows
    RERANK = "rerank"  # re-scored by the cross-encoder
    TEMPORAL = "temporal"  # joined as a member of a retrieved document's temporal sequence
    MULTIVIEW = "multiview"  # joined as a member of a retrieved document's multiview set


@dataclass(frozen=True)
class Ranking:
    """One search's result list (best first) and its weight in fusion."""

    path: RetrievalPath
    ids: np.ndarray  # int64, -1 padding removed
    scores: np.ndarray  # float32 cosine scores
    weight: float
    query: str = ""  # what was searched (for the trace)
    cosine: bool = True  # scores are cosines (False: BM25 scores, not comparable across paths)
    vector: np.ndarray | None = None  # the query vector, where one was searched with
    hop: int = 0  # which residual hop (path HOP only)

    @property
    def label(self) -> str:
        """The path as evidence provenance names it: "hop2" for the second hop, else the path's value."""
        return f"{RetrievalPath.HOP}{self.hop}" if self.path == RetrievalPath.HOP else str(self.path)

    def restricted(self, keep: np.ndarray, scale: float) -> Ranking:
        """This ranking with only the entries `keep` (a boolean mask) selects, at `scale` x its weight."""
        return dataclasses.replace(self, ids=self.ids[keep], scores=self.scores[keep], weight=self.weight * scale)


@dataclass(frozen=True)
class Rankings:
    """Every search's result list for one query, a field per path.

    image: path A with the query image (or a raw visual vector given in its place).
    question_in_image: path A with the question embedded in image space.
    text: path B's dense rankings: the question's sentence vector, then each expansion.
    """

    image: Ranking | None = None
    question_in_image: Ranking | None = None
    text: tuple[Ranking, ...] = ()
    lexical: Ranking | None = None
    fine: Ranking | None = None
    feedback: Ranking | None = None
    hops: tuple[Ranking, ...] = ()

    def in_fusion_order(self) -> tuple[Ranking, ...]:
        """The rankings in the one order fusion and the trace read them."""
        single = (self.image, self.question_in_image)
        tail = (self.lexical, self.fine, self.feedback)
        return (*(r for r in single if r is not None), *self.text, *(r for r in tail if r is not None), *self.hops)

    def __bool__(self) -> bool:
        return bool(self.in_fusion_order())


@dataclass
class QueryVectors:
    """Everything the question and image turn into before any search."""

    question: str
    image_vector: np.ndarray | None = None  # in the visual index's space
    text_in_image: np.ndarray | None = None  # question in the visual index's space
    text_in_image_from_bridge: bool = False  # text_in_image came from the KB's fitted bridge (no CLIP text tower)
    bridge_skill: float | None = None  # that bridge's held-out skill, 0 (chance) - 1 (None: not measured)
    text_vector: np.ndarray | None = None  # question (or image caption) in text space
    text_query: str = ""  # what text_vector encodes
    text_from_caption: bool = False  # text_vector describes the query image (no question)
    notes: tuple[str, ...] = ()

    def embeds_question(self, question: str) -> np.ndarray | None:
        """The sentence vector of `question` when this encoding holds exactly it (not an image's description)."""
        if self.text_vector is not None and self.text_query == question and not self.text_from_caption:
            return self.text_vector
        return None


@dataclass
class Fused:
    """The fused candidate list: ids best first, normalised scores (top = 1), paths per id.

    leaders: for the paths that lead the list (IDENTIFIER, CLEAR_MATCH), the chunks they put in front.
    """

    ids: np.ndarray
    scores: np.ndarray
    paths: dict[int, list[str]]
    cosine: dict[int, float]
    leaders: Mapping[RetrievalPath, np.ndarray] = field(default_factory=dict)

    def led_by(self, path: RetrievalPath) -> np.ndarray:
        """The chunk ids `path` put at the front of the list (sorted; empty when none)."""
        return self.leaders.get(path, np.zeros(0, np.int64))

    def copy(self) -> Fused:
        """A deep copy, for the helpers that change one in place."""
        return Fused(self.ids.copy(), self.scores.copy(), {k: list(v) for k, v in self.paths.items()},
                     dict(self.cosine), dict(self.leaders))


def empty_fused() -> Fused:
    """A fused list with nothing in it."""
    return Fused(np.zeros(0, np.int64), np.zeros(0, np.float32), {}, {})


__all__ = ["Fused", "QueryVectors", "Ranking", "Rankings", "RetrievalPath", "empty_fused"]
