"""The verifier check: plant unsupported claims into real answers and count what gets flagged.

For every answer the full system gave on DomainVQA-R, the generator's own claims are
the *supported* set (each restates the evidence it cites). Two kinds of *planted* claim
are added, each citing the same evidence as the answer's first claim:

- ``other_label``: the ground-truth finding of a different class of the same domain
  (e.g. "cardiomegaly" planted into an answer whose evidence shows pneumonia), chosen
  from a class that none of the cited documents belongs to, so it really is unsupported;
- ``fabricated``: a specific, made-up fact from outside the domain.

Each answer is re-verified with `kira.reasoning.GroundingVerifier`; the report gives
the share of planted claims flagged (hallucination_risk) against the share of supported
claims flagged. KIRA's target: >= 95% of planted, <= 5% of supported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from kira.eval.dataset import DomainDataset, Question
from kira.reasoning.citations import format_citation
from kira.reasoning.types import Answer, Claim

FABRICATED = (
    "The patient was scanned with a 3 tesla MRI and a 4 cm hepatic mass was measured",
    "The document reports a stock price of 42 dollars for the third quarter",
    "A migratory bird colony of 3000 flamingos nests at this location every spring",
    "The specimen was sequenced and carries a BRCA2 frameshift mutation",
    "The device firmware version 7.2 crashed after the update on Tuesday",
    "The recipe calls for two cups of flour and baking at 180 degrees",
)


@dataclass
class PlantedReport:
    """Flag counts for planted (unsupported) and supported claims."""

    planted: int = 0
    planted_flagged: int = 0
    supported: int = 0
    supported_flagged: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [planted, flagged]
    misses: list[dict[str, Any]] = field(default_factory=list)  # a few planted claims that were not flagged

    @property
    def planted_flag_rate(self) -> float:
        return self.planted_flagged / self.planted if self.planted else float("nan")

    @property
    def supported_flag_rate(self) -> float:
        return self.supported_flagged / self.supported if self.supported else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {"planted": self.planted, "planted_flagged": self.planted_flagged,
                "planted_flag_rate": self.planted_flag_rate, "supported": self.supported,
                "supported_flagged": self.supported_flagged, "supported_flag_rate": self.supported_flag_rate,
                "by_kind": {k: {"planted": v[0], "flagged": v[1], "rate": v[1] / v[0] if v[0] else float("nan")}
                            for k, v in self.by_kind.items()},
                "misses": self.misses[:10]}


def _label_statement(ds: DomainDataset, label: str) -> str:
    """The ground-truth wording of a class's finding: its first retrieval question's answer."""
    for q in ds.questions:
        if q.label == label and q.kind == "retrieval":
            return q.answer.rstrip(".")
    for q in ds.questions:
        if q.label == label:
            return q.answer.rstrip(".")
    return label


def planted_claims_check(ds: DomainDataset, answered: Sequence[tuple[Question, Any]], verifier: Any, *,
                         seed: int = 0) -> PlantedReport:
    """Plant unsupported claims into each answered question's answer and re-verify.

    Parameters: `ds` the domain; `answered` (question, kira Result) pairs from the full
    system; `verifier` a GroundingVerifier (``verify(answer, pack) -> Answer``); `seed`
    for the choice of planted statements.
    Returns a PlantedReport. Answers without claims or citations contribute nothing.
    """
    rng = np.random.default_rng(seed)
    labels_of = {d.doc_id: d.label for d in ds.documents}
    statements = {lab: _label_statement(ds, lab) for lab in ds.labels}
    report = PlantedReport()
    for q, result in answered:
        pack = result.evidence
        claims = [c for c in result.answer.claims if c.citations]
        if not claims:
            continue
        cites = claims[0].citations
        cited_labels = set()
        for n in cites:
            try:
                cited_labels.add(labels_of.get(pack.by_number(n).doc_id))
            except KeyError:
                pass
        others = [lab for lab in ds.labels if lab not in cited_labels]
        planted: list[tuple[str, Claim]] = []
        mark = format_citation(cites)
        if others:
            lab = others[int(rng.integers(len(others)))]
            planted.append(("other_label", Claim(text=f"{statements[lab]} {mark}.", citations=cites)))
        fact = FABRICATED[int(rng.integers(len(FABRICATED)))]
        planted.append(("fabricated", Claim(text=f"{fact} {mark}.", citations=cites)))
        all_claims = tuple(claims) + tuple(c for _, c in planted)
        probe = Answer(text=" ".join(c.text for c in all_claims), reasoning=(), claims=all_claims,
                       generator="planted-check")
        verified = verifier.verify(probe, pack)
        for claim in verified.claims[: len(claims)]:
            report.supported += 1
            report.supported_flagged += int(claim.hallucination_risk)
        for (kind, _), claim in zip(planted, verified.claims[len(claims):]):
            report.planted += 1
            report.planted_flagged += int(claim.hallucination_risk)
            counts = report.by_kind.setdefault(kind, [0, 0])
            counts[0] += 1
            counts[1] += int(claim.hallucination_risk)
            if not claim.hallucination_risk:
                report.misses.append({"qid": q.qid, "kind": kind, "claim": claim.text,
                                      "grounding": claim.grounding})
    return report
