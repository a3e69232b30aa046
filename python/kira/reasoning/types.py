"""Stage 4 data: the evidence a generator sees, the claims it makes, the answer it gives.

All four are frozen dataclasses. The pipeline builds `EvidenceItem`s (one per retrieved
chunk, numbered from 1 in the order the generator should read them) and wraps them in an
`EvidencePack`; a `Generator` turns the pack into an `Answer` whose `Claim`s cite
`[Evidence N]`; the `GroundingVerifier` returns a copy of the answer with the claim
scores filled in.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

LEVELS = ("document", "region", "patch", "passage")
"""Chunk levels an evidence item can come from (stage 1's hierarchy plus text passages)."""

_CITATION_MARK = re.compile(r"\s*\[Evidence\s+\d+(?:\s*(?:,|and|&)\s*\d+)*\]", re.IGNORECASE)


SHOWN_BY_QUERY_IMAGE = "clear_match"
"""The path that marks the document a query image clearly shows (kira.query_state.RetrievalPath.CLEAR_MATCH)."""
NAMED_BY_QUESTION = "identifier"
"""The path that marks a document the question names (kira.query_state.RetrievalPath.IDENTIFIER)."""


@dataclass(frozen=True)
class EvidenceItem:
    """One retrieved chunk as the generator sees it.

    Parameters
    ----------
    number: 1-based position in the pack; the generator cites it as ``[Evidence N]``.
        0 means "not numbered yet": `EvidencePack.from_items` numbers items 1..N.
    chunk_id: the knowledge base's chunk id.
    doc_id: the document the chunk belongs to.
    level: one of `LEVELS` ("document", "region", "patch", "passage").
    score: the retrieval score after fusion / re-ranking (higher is better; any scale).
    paths: retrieval paths that produced it, e.g. ("visual", "text", "fine", "hop2",
        "temporal", "multiview", "expansion", "analogy": a recorded change lent by
        kira.pipeline.change, "measured": a change kira.pipeline.measured_change measured
        in the subject's own images, "read": a view whose text is only bookkeeping, read from
        its image by kira.pipeline.view_reading, ``provenance["read"]``).
    summary: the chunk's text description (caption, tags, measurable attributes, passage).
    provenance: free-form facts about where it came from (source, caption, tags,
        metadata, ...). ``provenance["caption"]`` / ``["label"]`` / ``["tags"]`` are read
        by the template generator when present.
    box: (x0, y0, x1, y1) pixel box in the document image for region/patch chunks.
    thumbnail: uint8 RGB (h, w, 3) preview, <= 160 px a side, for HTML cards; the box,
        if any, is given in the coordinates of the *original* image and
        ``provenance["image_size"] = (width, height)`` lets renderers scale it.

    Raises ValueError on a negative number, an unknown level, a malformed box or thumbnail.
    """

    number: int
    chunk_id: int
    doc_id: str
    level: str
    score: float
    paths: tuple[str, ...] = ()
    summary: str = ""
    provenance: Mapping[str, Any] = field(default_factory=dict, hash=False)
    box: tuple[int, int, int, int] | None = None
    thumbnail: np.ndarray | None = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if int(self.number) < 0:
            raise ValueError(f"EvidenceItem.number must be >= 1 (it is cited as [Evidence N]), or 0 for not yet numbered; got {self.number}")
        if self.level not in LEVELS:
            raise ValueError(f"EvidenceItem.level must be one of {LEVELS}; got {self.level!r}")
        object.__setattr__(self, "number", int(self.number))
        object.__setattr__(self, "chunk_id", int(self.chunk_id))
        object.__setattr__(self, "doc_id", str(self.doc_id))
        object.__setattr__(self, "score", float(self.score))
        object.__setattr__(self, "paths", tuple(str(p) for p in self.paths))
        object.__setattr__(self, "summary", str(self.summary))
        if self.box is not None:
            box = tuple(int(v) for v in self.box)
            if len(box) != 4 or box[2] < box[0] or box[3] < box[1]:
                raise ValueError(f"EvidenceItem.box must be (x0, y0, x1, y1) with x1 >= x0, y1 >= y0; got {self.box}")
            object.__setattr__(self, "box", box)
        if self.thumbnail is not None:
            thumb = np.asarray(self.thumbnail)
            if thumb.dtype != np.uint8 or thumb.ndim != 3 or thumb.shape[2] != 3:
                raise ValueError(
                    "EvidenceItem.thumbnail must be uint8 RGB (h, w, 3); "
                    f"got dtype {thumb.dtype}, shape {thumb.shape} (use kira.images.load_image)"
                )
            object.__setattr__(self, "thumbnail", thumb)

    @property
    def shown_by_query_image(self) -> bool:
        """Whether the query image clearly shows this item's document (a copy, crop or mirror of it): the
        retrieval path `SHOWN_BY_QUERY_IMAGE` led it."""
        return SHOWN_BY_QUERY_IMAGE in self.paths

    @property
    def named_by_question(self) -> bool:
        """Whether the question names this item's document (the retrieval path `NAMED_BY_QUESTION` led it)."""
        return NAMED_BY_QUESTION in self.paths

    def render(self) -> str:
        """The block a generator reads: ``[Evidence N] (doc=..., level=..., score=..., paths=...) summary``.

        An unnumbered item (number 0) starts with ``[not numbered]``.
        """
        paths = "+".join(self.paths) if self.paths else "-"
        summary = " ".join(self.summary.split()) or "(no description)"
        tag = f"[Evidence {self.number}]" if self.number else "[not numbered]"
        return (
            f"{tag} (doc={self.doc_id}, level={self.level}, "
            f"score={self.score:.3f}, paths={paths}) {summary}"
        )


@dataclass(frozen=True)
class EvidencePack:
    """The ordered evidence handed to a generator, plus what the critic dropped.

    ``items`` are numbered (>= 1); numbers must be unique (they need not be contiguous, but
    `from_items` numbers them 1..N). ``dropped`` holds items the critic removed; they are
    shown on the rationale card and are never citable. When the question names a subject
    (what a compound document groups: one person, one design, one site), ``items`` are that
    subject's evidence and ``similar`` the evidence about other subjects, numbered after
    ``items``: it may be cited only by the answer's similar-case claims (`Answer.similar`),
    never by a claim about the subject (kira.reasoning.subject). ``subject`` names it.
    ``matches`` says, for the items the relevance verdict judged, how far what each shows matches the
    question (its r_i in [0, 1], kira.reasoning.relevance; 0.5 and above answers it): the Generate stage
    sets it, a generator weighs each item's vote by it, and cards show it. Empty when nothing was judged.
    ``shared`` holds the question's words (stems, kira.text.tokens.stem) that most records of the knowledge base
    hold ('scan' in an archive of scans): they say which domain the question is about, not what it asks, so no
    statement answers the question by holding them alone (kira.grounding.unheld_words; the Generate stage sets it).
    """

    question: str
    items: tuple[EvidenceItem, ...] = ()
    dropped: tuple[EvidenceItem, ...] = ()
    similar: tuple[EvidenceItem, ...] = ()
    subject: str = ""
    matches: Mapping[int, float] = field(default_factory=dict, hash=False)
    of_similar_cases: bool = False  # the similar cases of a pack (`similar_pack`): none is "the closest match"
    shared: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "question", "" if self.question is None else str(self.question))
        object.__setattr__(self, "items", tuple(self.items))
        object.__setattr__(self, "dropped", tuple(self.dropped))
        object.__setattr__(self, "similar", tuple(self.similar))
        numbers = [item.number for item in (*self.items, *self.similar)]
        if any(n < 1 for n in numbers):
            raise ValueError(f"EvidencePack items must be numbered from 1 (use EvidencePack.from_items); got {numbers}")
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"EvidencePack item numbers must be unique; got {numbers}")
        matches = {int(n): float(r) for n, r in dict(self.matches or {}).items()}
        if any(not 0.0 <= r <= 1.0 for r in matches.values()) or not set(matches) <= {i.number for i in self.items}:
            raise ValueError(f"EvidencePack matches must map item numbers to [0, 1]; got {matches} for items "
                             f"{[i.number for i in self.items]}")
        object.__setattr__(self, "matches", matches)
        object.__setattr__(self, "shared", frozenset(str(w) for w in self.shared or ()))

    @classmethod
    def from_items(
        cls, question: str | None, items: Sequence[EvidenceItem], dropped: Sequence[EvidenceItem] = (),
        *, similar: Sequence[EvidenceItem] = (), subject: str = "",
    ) -> EvidencePack:
        """A pack whose items are renumbered 1..N in the given order (best first), then the similar
        cases N+1..M. Dropped items keep whatever numbers they had; they cannot be cited.
        """
        numbered = tuple(dataclasses.replace(item, number=i) for i, item in enumerate(items, start=1))
        others = tuple(dataclasses.replace(item, number=i) for i, item in enumerate(similar, start=len(numbered) + 1))
        return cls(question="" if question is None else question, items=numbered, dropped=tuple(dropped),
                   similar=others, subject=subject)

    def similar_pack(self) -> EvidencePack:
        """The similar cases as a pack of their own (their numbers kept), for a generator to word apart."""
        return EvidencePack(self.question, items=self.similar, of_similar_cases=True, shared=self.shared)

    @property
    def numbers(self) -> tuple[int, ...]:
        """The citable evidence numbers, in pack order."""
        return tuple(item.number for item in self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[EvidenceItem]:
        return iter(self.items)

    def has(self, number: int) -> bool:
        """Whether ``[Evidence number]`` refers to an item in this pack."""
        return any(item.number == number for item in self.items)

    def by_number(self, number: int) -> EvidenceItem:
        """The item cited as ``[Evidence number]`` (a similar case too). Raises KeyError if the pack has none."""
        for item in (*self.items, *self.similar):
            if item.number == number:
                return item
        raise KeyError(f"no [Evidence {number}] in this pack (it has {list(self.numbers)})")

    def render(self) -> str:
        """The ordered ``[Evidence N] (doc, level, score, paths) summary`` blocks, one per line.

        An empty pack renders as the empty string.
        """
        return "\n".join(item.render() for item in self.items)


@dataclass(frozen=True)
class Claim:
    """One sentence of an answer and the evidence it cites.

    ``s_sim``, ``s_attn`` and ``grounding`` are None until a `GroundingVerifier` fills
    them; ``grounding = w_sim * s_sim + w_attn * s_attn`` and ``hallucination_risk`` is
    True when it falls below the configured threshold. ``invalid_citations`` records
    numbers the generator cited that are not in the pack (they are removed from
    ``citations`` and count as "cites nothing" for grounding). ``lead`` is where the sentence
    opens by naming what it is about, not by stating it ("garden_may (garden-survey, 1 of 2)"
    before ": A lawn with young trees", kira.reasoning.sequence_answer): ``text`` starts with it,
    and the verifier checks the ``statement`` after it.
    """

    text: str
    citations: tuple[int, ...] = ()
    s_sim: float | None = None
    s_attn: float | None = None
    grounding: float | None = None
    hallucination_risk: bool = False
    invalid_citations: tuple[int, ...] = ()
    lead: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "citations", tuple(int(c) for c in self.citations))
        object.__setattr__(self, "invalid_citations", tuple(int(c) for c in self.invalid_citations))
        if self.lead and not self.text.startswith(self.lead):
            raise ValueError(f"Claim.lead must open Claim.text; got lead {self.lead!r} for text {self.text!r}")

    @property
    def plain_text(self) -> str:
        """The sentence with its ``[Evidence N]`` markers removed."""
        return strip_citation_marks(self.text)

    @property
    def statement(self) -> str:
        """What the sentence states: `plain_text` after its ``lead`` (and the colon that follows it)."""
        plain = self.plain_text
        if self.lead and plain.startswith(self.lead):
            return plain[len(self.lead):].lstrip(" :")
        return plain


@dataclass(frozen=True)
class Answer:
    """What a generator returns: the answer text, its reasoning trace, its claims.

    ``text`` is the answer shown to the user, with ``[Evidence N]`` markers inline;
    ``reasoning`` is the explicit trace written before it (ReAG), one step per entry;
    ``claims`` are the answer's sentences with their citations; ``similar`` the sentences about
    similar cases (other subjects than the one asked about), shown apart. ``grounding`` is the
    mean claim grounding once verified (None before; None too for an answer with no
    claims). ``generator`` names what produced it. ``confidence`` (0-1, None when unmeasured) is how
    far the evidence supports an answer at all, and ``abstained`` True when nothing in the evidence
    is relevant to the question (kira.reasoning.relevance; docs/reasoning.md).
    """

    text: str
    reasoning: tuple[str, ...] = ()
    claims: tuple[Claim, ...] = ()
    grounding: float | None = None
    generator: str = ""
    similar: tuple[Claim, ...] = ()  # what similar cases (other subjects) show, labelled apart in `text`
    confidence: float | None = None  # 0-1: how far the evidence supports an answer (docs/reasoning.md)
    abstained: bool = False  # True when no evidence is relevant: the text says so and names the closest items

    def __post_init__(self) -> None:
        object.__setattr__(self, "reasoning", tuple(str(r) for r in self.reasoning))
        object.__setattr__(self, "claims", tuple(self.claims))
        object.__setattr__(self, "similar", tuple(self.similar))

    @property
    def citations(self) -> tuple[int, ...]:
        """Sorted unique evidence numbers cited by any claim (about the subject or a similar case)."""
        return tuple(sorted({n for claim in (*self.claims, *self.similar) for n in claim.citations}))

    @property
    def plain_text(self) -> str:
        """The answer text without ``[Evidence N]`` markers (what answer-correctness metrics compare)."""
        return strip_citation_marks(self.text)

    @property
    def flagged(self) -> tuple[Claim, ...]:
        """Claims the verifier marked as hallucination risks."""
        return tuple(claim for claim in self.claims if claim.hallucination_risk)


def strip_citation_marks(text: str) -> str:
    """`text` with every ``[Evidence N]`` / ``[Evidence 1, 3]`` marker removed and spaces tidied."""
    stripped = _CITATION_MARK.sub("", text)
    stripped = re.sub(r"\s+([.,;:!?])", r"\1", stripped)
    return " ".join(stripped.split())
