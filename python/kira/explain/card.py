"""The retrieval rationale card: everything needed to see why an answer was given.

The pipeline builds one `RationaleCard` per answer; `to_text()`, `to_json()` and
`to_html()` render it (kira.explain.render_text / render_json / render_html). Every
optional piece may be missing (no query image, no hops, no critic, an empty pack):
renderers say "none" rather than fail.

Explainability completeness (DomainVQA-R) is `completeness()`: the fraction of
`REQUIRED_FIELDS` that are present and non-empty, by the rules in `FIELD_RULES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from kira.reasoning.protocols import CriticDecision
from kira.reasoning.types import Answer, EvidenceItem, EvidencePack


@dataclass
class RationaleCard:
    """One answer's rationale.

    Parameters
    ----------
    question: the question text (None or "" for an image-only query).
    answer: the (verified) `Answer`.
    pack: the `EvidencePack` the generator saw (``pack.dropped``: what the critic removed).
    variant: the ablation variant that produced it (kira.pipeline.VARIANTS).
    query_image: uint8 RGB thumbnail of the query image, or None.
    expansions: query-expansion texts used (hypotheses and concepts), in order.
    hops: one dict per retrieval hop: ``{"hop": int (1-based), "ids": [chunk ids],
        "confidence": float}`` (extra keys are kept and shown; core Hop objects with
        ``.ids`` / ``.confidence`` are converted, padding ids < 0 dropped).
    stop_reason: why hopping stopped ("confidence" | "max_hops" | "no_new"), or None.
    critic: ``{"kept": [chunk ids] or count, "dropped": [chunk ids] or count,
        "threshold": float, ...}`` (see `critic_summary`; a `CriticDecision` is
        converted), or None when no critic ran.
    timings: stage name -> milliseconds.
    config: a summary of the settings that produced the answer (JSON-able values).
    near: evidence numbers whose classifier label is near the question though below `MATCH` (the answer
        is then given with low confidence: ``Relevance.near``).
    unheld: the question's words no record of the knowledge base holds, when the evidence matches it by
        meaning alone inside a domain (``Relevance.unheld``, kira.grounding.unheld_words); "" otherwise.
    """

    question: str | None
    answer: Answer
    pack: EvidencePack
    variant: str = "full"
    query_image: np.ndarray | None = None
    expansions: list[str] = field(default_factory=list)
    hops: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    critic: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    near: tuple[int, ...] = ()
    unheld: str = ""

    def __post_init__(self) -> None:
        # Accept the pipeline's raw objects too: a CriticDecision, hop objects with attributes.
        if isinstance(self.critic, CriticDecision):
            self.critic = critic_summary(self.critic)
        self.hops = [hop_dict(h, n) for n, h in enumerate(self.hops or [], start=1)]
        self.expansions = [str(e) for e in (self.expansions or [])]
        self.timings = dict(self.timings or {})
        self.config = dict(self.config or {})
        self.near = tuple(int(n) for n in self.near or ())
        if self.query_image is not None:
            image = np.asarray(self.query_image)
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise ValueError(f"query_image must be uint8 RGB (h, w, 3); got {image.dtype} {image.shape}")
            self.query_image = image

    @property
    def matches(self) -> Mapping[int, float]:
        """Evidence number -> how far what that item shows matches the question (`EvidencePack.matches`: the
        relevance verdict's r_i; 0.5 and above answers it); items not judged are absent. The retrieval
        ``score`` ranks items; this says whether they answer."""
        return self.pack.matches

    def completeness(self) -> float:
        """Fraction of `REQUIRED_FIELDS` present and non-empty (1.0 = fully explained)."""
        return sum(1 for name in REQUIRED_FIELDS if FIELD_RULES[name](self)) / len(REQUIRED_FIELDS)

    def missing_fields(self) -> list[str]:
        """The `REQUIRED_FIELDS` this card lacks, in order."""
        return [name for name in REQUIRED_FIELDS if not FIELD_RULES[name](self)]

    def to_text(self) -> str:
        """A plain-text card for terminals (kira.explain.render_text)."""
        from kira.explain.render_text import to_text

        return to_text(self)

    def to_dict(self) -> dict[str, Any]:
        """The card as JSON-able data following kira.explain.render_json.JSON_SCHEMA."""
        from kira.explain.render_json import to_dict

        return to_dict(self)

    def to_json(self, *, indent: int | None = 2) -> str:
        """The card as JSON with ``schema_version`` (kira.explain.render_json)."""
        from kira.explain.render_json import to_json

        return to_json(self, indent=indent)

    def to_html(self) -> str:
        """A self-contained HTML page (inline CSS, base64 thumbnails with boxes drawn)."""
        from kira.explain.render_html import to_html

        return to_html(self)


MATCH = 0.5
"""An item whose match with the question (`RationaleCard.matches`) is at least this answers it
(kira.reasoning.relevance.Relevance.matches)."""


def notice(card: RationaleCard) -> tuple[str, str]:
    """What a card opens with: ("nomatch", the abstention text) when nothing in the evidence matched,
    ("low", a warning) when the answer's confidence is below `LOW_CONFIDENCE`, else ("", "")."""
    from kira.reasoning.relevance import LOW_CONFIDENCE

    answer = card.answer
    if answer.abstained:
        return "nomatch", answer.plain_text
    if answer.confidence is not None and answer.confidence < LOW_CONFIDENCE:
        if card.unheld:
            from kira.reasoning.field_answer import quoted_list

            said = quoted_list(card.unheld.split(), conjunction="or")
            return "low", (f"Low confidence ({answer.confidence:.2f}): no record in this knowledge base mentions "
                           f"{said}; the evidence below matches the question by meaning only, which inside one "
                           "domain says little. Check it before relying on the answer.")
        return "low", (f"Low confidence ({answer.confidence:.2f}): the evidence only partly matches the question; "
                       "check the evidence below before relying on the answer.")
    return "", ""


def match_label(card: RationaleCard, item: EvidenceItem) -> str:
    """What a reader needs beside evidence `item`, where a retrieval score only ranks items.

    For a question the relevance verdict judged (`card.matches`): "matches the question 0.98", "partly
    matches the question (0.31: a classifier label near it)", "does not match the question", or "not judged:
    nothing recorded says what it shows". For a query image the verdict did not measure: "the query image
    shows this image (a copy, crop or mirror)" for the document it clearly shows (kira.retrieval.anchoring),
    else "looks like the query image (cosine 0.61)" from the best raw cosine of the paths that found it (its
    scale is the image encoder's). "" when nothing was measured."""
    if card.matches:
        r = card.matches.get(int(item.number))
        if r is None:
            return "not judged: nothing recorded says what it shows"
        if r >= MATCH:
            return f"matches the question by meaning only {r:.2f}" if card.unheld else f"matches the question {r:.2f}"
        if int(item.number) in card.near:
            return f"partly matches the question ({r:.2f}: a classifier label near it)"
        return "does not match the question"
    if card.query_image is None:
        return ""
    if item.shown_by_query_image:
        return "the query image shows this image (a copy, crop or mirror)"
    cosine = (item.provenance or {}).get("cosine")
    return f"looks like the query image (cosine {float(cosine):.2f})" if isinstance(cosine, (int, float)) else ""


def match_kind(label: str) -> str:
    """"yes", "part" or "no" for a `match_label` ("" for none): how a renderer marks it."""
    if not label:
        return ""
    if label.startswith("matches the question by meaning only"):  # inside a domain that says little
        return "part"
    if label.startswith(("matches", "the query image shows")):
        return "yes"
    return "part" if label.startswith("partly") else "no"


def confidence_line(card: RationaleCard) -> str:
    """How the answer's confidence reads under it ("" without one). For an abstention it is the confidence
    that the closest item matches, and says so: a bare "confidence 0.23" under "nothing matches" reads as
    doubt about the abstention itself."""
    confidence = card.answer.confidence
    if confidence is None:
        return ""
    if card.answer.abstained:
        return f"confidence that the closest item matches: {confidence:.2f}"
    return f"confidence {confidence:.2f}"


def hop_dict(hop: object, position: int) -> dict[str, Any]:
    """A hop as ``{"hop", "ids", "confidence", ...}`` from a dict or an object with ``.ids`` / ``.confidence``."""
    if isinstance(hop, dict):
        out = dict(hop)
    else:
        out = {"ids": getattr(hop, "ids", []), "confidence": getattr(hop, "confidence", None)}
    out.setdefault("hop", position)
    out["ids"] = [int(i) for i in np.asarray(out.get("ids", []), dtype=np.int64).ravel() if int(i) >= 0]
    conf = out.get("confidence")
    out["confidence"] = None if conf is None else float(conf)
    return out


def critic_summary(decision: CriticDecision) -> dict[str, Any]:
    """The ``critic`` entry of a card from a `CriticDecision`.

    Returns ``{"kept": [chunk ids], "dropped": [chunk ids], "threshold": float,
    "probabilities": {chunk id (str): P(relevant)}, "fallback": bool, "note": str}``.
    """
    return {
        "kept": [item.chunk_id for item in decision.kept],
        "dropped": [item.chunk_id for item in decision.dropped],
        "threshold": float(decision.threshold),
        "probabilities": {str(k): float(v) for k, v in decision.probabilities.items()},
        "fallback": bool(decision.fallback),
        "note": decision.note,
    }


def _has_query(card: RationaleCard) -> bool:
    return bool((card.question or "").strip()) or card.query_image is not None


def _has_hop_chain(card: RationaleCard) -> bool:
    return bool(card.hops) and bool(card.stop_reason)


FIELD_RULES: dict[str, Callable[[RationaleCard], bool]] = {
    # what was asked: question text or a query image
    "query": _has_query,
    "answer": lambda c: bool(c.answer.text.strip()),
    # the explicit reasoning trace written before the answer
    "reasoning": lambda c: bool(c.answer.reasoning),
    # the evidence itself, each with its provenance
    "evidence": lambda c: len(c.pack.items) > 0,
    "provenance": lambda c: len(c.pack.items) > 0 and all(bool(i.doc_id) and bool(i.summary) for i in c.pack.items),
    # every claim cites evidence
    "citations": lambda c: bool(c.answer.claims) and all(claim.citations for claim in c.answer.claims),
    # retrieval scores and the paths that found each item
    "retrieval_paths": lambda c: len(c.pack.items) > 0 and all(i.paths for i in c.pack.items),
    # grounding scores filled in by the verifier
    "grounding": lambda c: bool(c.answer.claims) and all(claim.grounding is not None for claim in c.answer.claims),
    # the critic's decision
    "critic": lambda c: c.critic is not None,
    # the hop chain and why it stopped
    "hop_chain": _has_hop_chain,
    "timings": lambda c: bool(c.timings),
}

REQUIRED_FIELDS: tuple[str, ...] = tuple(FIELD_RULES)
"""What a complete rationale card explains; see `FIELD_RULES` for each field's test."""
