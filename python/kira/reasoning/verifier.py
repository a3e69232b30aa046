"""The grounding verifier (KIRA stage 4): score every claim against the evidence it cites.

For a claim c citing evidence set E (numbers present in the pack):

    s(c)      = w_sim * s_sim(c) + w_attn * s_attn(c)          (KIRA: 0.5 / 0.5)
    s_sim(c)  = clip((max_{e in E} max_{x in P(e)} cos(v_c, v_x) - sim_floor) / (1 - sim_floor), 0, 1)
    s_attn(c) = clip((A(c, E) - attn_floor) / (1 - attn_floor), 0, 1)
    A(c, E)   = |{t in T(c) : stem(t) in stems(T(E))}| / |T(c)|

where v_x is the text encoder's unit embedding of x (claim text without its citation
markers; evidence text), P(e) the summary of e and each of its sentences / ";" parts
(`summary_pieces`: a claim restating one sentence of a long summary that also lists
tags and measurable attributes is compared with that sentence), T(x) the content tokens of x (lower-cased words with
stop-words and framing words like "shows"/"evidence" removed; see
kira.text.tokens), and stems(T(E)) the light-stemmed content tokens of all
cited summaries together. A(c, E) is a hard token alignment: the share of the claim's
content tokens that some cited evidence token attends to (matches after stemming).
A claim citing nothing, or only numbers absent from the pack, scores s_sim = s_attn = 0.
Claims with s < threshold (KIRA: 0.3) get ``hallucination_risk = True``, and so do claims with
s_sim = 0 (no closer in meaning to their evidence than unrelated text) unless every one of their
content tokens, and at least two, occur in the evidence: "Labels [Evidence 1]." (one word of a
field name) is not grounded, "There are no roads." restating a long summary's clause is (on the
planted-claim set this flags 2 of 60 supported claims). A claim made only of field names
(`FIELD_NAMES`: "Labels.") states nothing and is never grounded. P(e) also holds, for an image nobody captioned, the sentence its
fields make (`fields_text`, kira.reasoning.field_answer: classifier labels, tags, text read,
metadata, looks); the answer's
``grounding`` is the mean claim score (None for an answer with no claims).

Why the floors (calibration). With raw cosine and raw A the paper's formula cannot
separate supported from unsupported claims at 0.3: all-MiniLM-L6-v2 gives sentences
from the *same domain* that state different findings a cosine of 0.32 median (0.58 at
the 95th percentile), and such claims share the domain's generic words (the kind
of image, the view) with the evidence, so s ~ 0.4 for claims the evidence does not support.
Rescaling each signal from its empirical unrelated-pair level to [0, 1] (sim_floor 0.5
for the cosine, attn_floor 0.15 for the alignment) keeps the formula and threshold and
makes them separate: on the planted-claim test in tests/reasoning/test_reasoning_verifier.py
(kira.eval.calibration_data: four domains, 60 supported claims, 289 unsupported
ones about other findings, made-up facts, other domains, or citing the wrong item) it
flags 96.9% of unsupported and 3.3% of supported claims (95.5% and 0% before the s_sim = 0 rule; the raw
formula: 72.3% and 0%).
Checked on real data (never DomainVQA-R): over the 20 one-line captions of the scikit-image /
scikit-learn photos of benchmarks/suites/real_photos.py, captions of different photos have cosine median
0.15 (95th percentile 0.37, max 0.60) and token alignment median 0.00 (95th percentile 0.17), so
both floors sit at or above the unrelated level of real captions too; a caption cited as evidence
for another photo's caption (a wrong citation) is flagged in all 380 pairs.
Soft alignment by MiniLM word-embedding cosine was tried and dropped: unmatched words
of supported and unsupported claims have the same cosine distribution (median 0.37
against 0.41). Pass sim_floor=0, attn_floor=0 for the uncalibrated formula.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Mapping, Sequence

import numpy as np

from kira.config import GroundingConfig
from kira.models.protocols import TextEncoder
from kira.text.pieces import appearance_parts, summary_pieces
from kira.text.tokens import content_tokens, stem
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack

log = logging.getLogger(__name__)

FIELD_NAMES = frozenset("label labels tag tags caption captions text metadata description descriptions".split())
"""Names of evidence fields: a claim of nothing but these names a field and states nothing."""


def _pieces(item: EvidenceItem, looks: bool) -> list[str]:
    """P(e): the pieces of `item`'s summary and of its fields' sentence; without `looks`, less the pieces that only
    say how an image looks (its describer's measurements: kira.text.pieces.appearance_parts) and less the whole
    summary where it holds such measurements (its other parts are pieces of their own; ingest does not store it)."""
    fields = fields_text(item, looks=looks)
    pieces = summary_pieces(item.summary)
    if not looks:
        caption = (item.provenance or {}).get("caption")
        measured = {part.strip(" ;.") for part in appearance_parts(item.summary, caption if isinstance(caption, str) else None)}
        if measured:
            kept = [p for p in pieces if p.strip(" ;.") not in measured and p.strip() != item.summary.strip()]
            pieces = kept or pieces  # a summary of nothing but measurements is still compared with
    return list(dict.fromkeys([*pieces, *summary_pieces(fields)]))


def about_looks(question: str | None, claims: Sequence[Claim], extra_words: Sequence[str] = ()) -> bool:
    """Whether the question or any claim uses a word about how an image looks (kira.reasoning.shown); True
    without a question (the caller did not say what was asked)."""
    from kira.reasoning.shown import asks_about_appearance

    if question is None:
        return True
    return any(asks_about_appearance(t, extra_words) for t in (question, *(c.plain_text for c in claims)))


def fields_text(item: EvidenceItem, *, looks: bool = True) -> str:
    """What the fields of an image nobody captioned record, as the sentence kira.reasoning.field_answer
    writes from them ("IMG_1001 has no caption; the image classifier labels it 'espresso' (p 0.99)"); ""
    for a captioned or hand-built item. A claim written from the fields is checked against them as well as
    against the summary (a claim naming only a field, "Labels", is caught by `FIELD_NAMES`)."""
    from kira.reasoning.field_answer import item_sentence
    from kira.reasoning.shown import shown

    view = shown(item)
    if view.human_text or "described_by" not in (item.provenance or {}):
        return ""
    return item_sentence(item, appearance=looks, lead="{doc}")


def token_alignment(claim: str, evidence: Sequence[str]) -> float:
    """A(c, E): share of the claim's content tokens whose stem occurs among the evidence's content tokens.

    0.0 when the claim has no content tokens or `evidence` is empty.
    """
    tokens = [stem(t) for t in content_tokens(claim)]
    if not tokens or not evidence:
        return 0.0
    available = {stem(t) for text in evidence for t in content_tokens(text)}
    return sum(1 for t in tokens if t in available) / len(tokens)


def _rescale(value: float, floor: float) -> float:
    return float(np.clip((value - floor) / (1.0 - floor), 0.0, 1.0))


class GroundingVerifier:
    """Scores each claim s = w_sim * s_sim + w_attn * s_attn and flags s < threshold (see module docstring).

    Parameters
    ----------
    text_encoder: a `TextEncoder` (the stack's sentence encoder, MiniLM by default).
    config: `GroundingConfig` (weights 0.5 / 0.5, threshold 0.3).
    sim_floor, attn_floor: calibration floors in [0, 1) (default: the config's
        verifier_sim_floor / verifier_attn_floor); 0 gives the raw formula.

    Thread safety: `verify` keeps no state beyond an embedding cache guarded by the GIL;
    safe to share between threads if the encoder is.
    """

    def __init__(
        self,
        text_encoder: TextEncoder,
        config: GroundingConfig | None = None,
        *,
        sim_floor: float | None = None,
        attn_floor: float | None = None,
    ) -> None:
        self.config = config or GroundingConfig()
        sim_floor = self.config.verifier_sim_floor if sim_floor is None else sim_floor
        attn_floor = self.config.verifier_attn_floor if attn_floor is None else attn_floor
        if not 0.0 <= sim_floor < 1.0 or not 0.0 <= attn_floor < 1.0:
            raise ValueError(f"sim_floor and attn_floor must be in [0, 1); got {sim_floor}, {attn_floor}")
        self.encoder = text_encoder
        self.sim_floor = float(sim_floor)
        self.attn_floor = float(attn_floor)
        self._cache: dict[str, np.ndarray] = {}

    def _embed(self, texts: Sequence[str], known: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """{text: unit vector} for `texts`: from the cache, else `known` (raw), else the encoder."""
        out = {t: self._cache[t] for t in texts if t in self._cache}
        if known:
            stored = [t for t in dict.fromkeys(texts) if t not in out and t in known]
            if stored:
                out.update(self._remember(stored, np.stack([np.asarray(known[t], dtype=np.float32) for t in stored])))
        todo = sorted({t for t in texts if t not in out})
        if todo:
            vectors = np.asarray(self.encoder.encode(todo), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(todo):
                raise ValueError(f"text encoder returned shape {vectors.shape} for {len(todo)} texts")
            out.update(self._remember(todo, vectors))
        return out

    def _remember(self, texts: Sequence[str], vectors: np.ndarray) -> dict[str, np.ndarray]:
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        if len(self._cache) + len(texts) > 4096:
            self._cache.clear()
        fresh = dict(zip(texts, vectors))
        self._cache.update(fresh)
        return fresh

    def score_claim(self, claim: Claim, pack: EvidencePack, *, known: Mapping[str, np.ndarray] | None = None,
                    question: str | None = None, appearance_words: Sequence[str] = ()) -> Claim:
        """`claim` with s_sim, s_attn, grounding and hallucination_risk filled in (a new Claim);
        `known`, `question`, `appearance_words` as in `verify`."""
        return self._score([claim], pack, known, looks=about_looks(question, [claim], appearance_words))[0]

    def _score(self, claims: Sequence[Claim], pack: EvidencePack,
               known: Mapping[str, np.ndarray] | None = None, *, looks: bool = True) -> list[Claim]:
        texts: list[str] = []
        pieces: dict[int, list[str]] = {}
        said: dict[int, str] = {}
        for claim in claims:
            texts.append(claim.statement)
            for n in claim.citations:
                if pack.has(n) and n not in pieces:
                    item = pack.by_number(n)
                    said[n] = " ".join(t for t in (item.summary, fields_text(item, looks=looks)) if t)
                    pieces[n] = _pieces(item, looks)
                    texts.extend(pieces[n])
        vectors = self._embed(texts, known) if texts else {}
        cfg = self.config
        scored: list[Claim] = []
        for claim in claims:
            valid = tuple(n for n in claim.citations if pack.has(n))
            invalid = tuple(dict.fromkeys((*claim.invalid_citations, *(n for n in claim.citations if not pack.has(n)))))
            summaries = [said[n] for n in valid]
            targets = [t for n in valid for t in pieces[n]]
            alignment = 0.0
            if targets and claim.statement.strip():
                v = vectors[claim.statement]
                cosine = max(float(v @ vectors[t]) for t in targets)
                s_sim = _rescale(cosine, self.sim_floor)
                alignment = token_alignment(claim.statement, summaries)
                s_attn = _rescale(alignment, self.attn_floor)
            else:
                s_sim = s_attn = 0.0
            s = cfg.verifier_sim_weight * s_sim + cfg.verifier_attn_weight * s_attn
            # s_sim 0: no closer in meaning to its evidence than unrelated text. Its words alone then ground it
            # only when all of them, and at least two, are the evidence's: "Labels [Evidence 1]" is not a finding
            words_only = alignment >= 1.0 and len(content_tokens(claim.statement)) >= 2
            tokens = content_tokens(claim.statement)
            states_nothing = bool(tokens) and all(t in FIELD_NAMES for t in tokens)  # "Labels [Evidence 1]."
            scored.append(
                dataclasses.replace(
                    claim,
                    citations=valid,
                    invalid_citations=invalid,
                    s_sim=s_sim,
                    s_attn=s_attn,
                    grounding=s,
                    hallucination_risk=(s < cfg.hallucination_threshold or (s_sim <= 0.0 and not words_only)
                                        or states_nothing),
                )
            )
        return scored

    def verify(self, answer: Answer, pack: EvidencePack, *, known: Mapping[str, np.ndarray] | None = None,
               question: str | None = None, appearance_words: Sequence[str] = ()) -> Answer:
        """A copy of `answer` with every claim scored and ``grounding`` = mean claim score.

        Citations to numbers not in `pack` move to ``invalid_citations`` (and ground
        nothing). An answer without claims comes back with ``grounding`` None.
        `known`: {text: raw vector} this verifier's encoder already gave for some texts (the
        knowledge base stores its evidence's pieces, `KnowledgeBase` text pieces); they are
        used instead of encoding those texts again, and everything else is encoded.
        `question`: what was asked; when neither it nor any claim is about how an image looks, the evidence's
        pieces that only measure its looks are left out (no claim draws on them, and they are not stored at
        ingest, so encoding them would be an ask's largest cost). None: every piece. `appearance_words`: the
        profile's words about looks, besides kira.reasoning.shown's.
        """
        claims = self._score(answer.claims, pack, known, looks=about_looks(question, answer.claims, appearance_words))
        grounding = float(np.mean([c.grounding for c in claims])) if claims else None
        flagged = sum(c.hallucination_risk for c in claims)
        if flagged:
            log.info("verifier flagged %d of %d claims as hallucination risks", flagged, len(claims))
        return dataclasses.replace(answer, claims=tuple(claims), grounding=grounding)
