"""ReAG's critic: keep an evidence item only if P(relevant | question, item) > threshold (0.1).

Two critics share one filtering rule (`filter_by_probability`):

- `SimilarityCritic(text_encoder)` (the default; no language model needed) maps the
  question and what the item shows (`shown_text`) to

      P(relevant) = sigmoid(slope * (cos(v_q, v_s) - midpoint) + overlap_weight * A(q, s))

  with cos the sentence-encoder cosine and A(q, s) the share of the question's content
  tokens found (stemmed) in the summary (kira.reasoning.verifier.token_alignment).
  Calibration (all-MiniLM-L6-v2). The constants were first fitted on four synthetic domains
  (kira.eval.calibration_data) and then checked on real photos, never DomainVQA-R: on the 20
  captioned scikit-image / scikit-learn photos of benchmarks/suites/real_photos.py a question's cosine
  with its own photo's caption is at least 0.28 (median 0.59), with the other 19 captions median
  0.11 (95th percentile 0.35). A logistic fit of "own caption" there gives slope 11.6, midpoint
  0.57, overlap_weight 1.9; keeping every caption above 0.1 for its question would need midpoint
  0.42 ("metal money" for "old coins lying on a table", cosine 0.28). Both were run through the
  pipeline (benchmarks/suites/real_photos.py, mobilenet_v2): the critic keeps the asked photo in all three
  (recall 1.00, precision 0.76 / 0.51 / 0.59 at 0.57 / 0.42 / 0.45), but 0.57 and 0.42 each lose one
  uncaptioned question from the grounded top 3 (0.60 against 0.65). So slope 15, midpoint 0.45 and
  overlap_weight 2, inside the real data's range, are kept (`GroundingConfig`).

What an item is judged by is what it SHOWS (`shown_text`): the user's caption, tags and
one-token metadata values, the image classifier's labels, the words an OCR reader found, a
passage's text. How an image looks (brightness, colours, texture, salient regions: the
default describer's measurements in its summary) says nothing about whether it answers a
question, and its long statistics pull the cosine of a relevant item's summary down ("a cup
of coffee" against "labels: espresso; A medium-brightness, high-contrast colour image ...
dominated by orange (54%)" scores P 0.08, against "espresso" well above 0.1). An item built
outside a knowledge base (no ``described_by`` in its provenance) is judged by its summary. An
image item that shows nothing the critic can read (no caption, tags, labels or text: most
uncaptioned scans) cannot be judged by a text critic: it gets P = 0.5 and is kept (as the
LMCritic keeps an unclear reply), so the critic never drops what it cannot read. An item
that shows only what an image classifier guessed is judged as far as the classifier was
sure: P = c x P_text + (1 - c) x 0.5 with c its top label's probability (`shown_certainty`),
so a photo of an astronaut labelled "bobsled" at p 0.3 is not dropped on that guess, while a
user's caption, tags or read text count fully (c = 1).
- `LMCritic(lm)` asks a `LanguageModel` "is this passage relevant? Yes/No". With an LM
  that exposes ``yes_no_logprobs(prompt) -> (logp_yes, logp_no)`` it uses
  P(Yes) = softmax over the two; otherwise it reads the completion: "yes" -> 0.9,
  "no" -> 0.05, anything else -> 0.5 (an unclear answer never drops evidence).

What happens when everything falls at or below the threshold: the critic keeps the first
item (the retrieval's best: with nothing judged relevant, the retrieval's own order is the
better guess than the least irrelevant-looking item), sets ``fallback=True`` and says so in
``note`` (and logs a warning), so the card shows that the critic found nothing relevant.

Calibration belongs to a text encoder: `SimilarityCritic.calibrated` is True only when its
encoder is the one its constants were fitted on (`CALIBRATED_ENCODER`); the pipeline's
critic stage never drops the top fused result with an uncalibrated critic. An empty question (an image-only query) skips the
critic: everything is kept with P = 1 and a note.
"""

from __future__ import annotations

import logging
import math
from typing import Callable, Sequence

import numpy as np

from kira.config import GroundingConfig
from kira.models.protocols import LanguageModel, TextEncoder
from kira.reasoning.protocols import CriticDecision
from kira.reasoning.shown import shown
from kira.reasoning.types import EvidenceItem
from kira.reasoning.verifier import token_alignment

log = logging.getLogger(__name__)



def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def filter_by_probability(
    items: Sequence[EvidenceItem], probabilities: Sequence[float], threshold: float
) -> CriticDecision:
    """Split `items` into kept (P > threshold) and dropped, keeping the best one if none pass.

    Raises ValueError when the lengths differ or a probability is outside [0, 1].
    """
    items = list(items)
    probs = [float(p) for p in probabilities]
    if len(probs) != len(items):
        raise ValueError(f"{len(probs)} probabilities for {len(items)} items")
    if any(not (0.0 <= p <= 1.0) for p in probs):
        raise ValueError(f"probabilities must be in [0, 1]; got {probs}")
    by_id = {item.chunk_id: p for item, p in zip(items, probs)}
    kept = [item for item, p in zip(items, probs) if p > threshold]
    dropped = [item for item, p in zip(items, probs) if p <= threshold]
    fallback, note = False, ""
    if items and not kept:
        kept = [items[0]]
        dropped = items[1:]
        fallback = True
        note = (
            f"no evidence scored P(relevant) > {threshold:g} (best {max(probs):.3f}); "
            f"kept the retrieval's first item, chunk {items[0].chunk_id}"
        )
        log.warning("critic: %s", note)
    return CriticDecision(
        kept=tuple(kept), dropped=tuple(dropped), probabilities=by_id, threshold=float(threshold),
        fallback=fallback, note=note,
    )


UNJUDGED = 0.5
"""P(relevant) of an item that shows nothing a text critic can read: kept, neither relevant nor not."""


def shown_text(item: EvidenceItem) -> str:
    """What an evidence item shows, as one text (`kira.reasoning.shown`: caption or passage, tags, classifier
    labels, text read from the image, metadata; "" for a knowledge-base image with none of these; the summary
    for hand-built evidence)."""
    return shown(item).content_text()


def shown_certainty(item: EvidenceItem) -> float:
    """How far what `item` shows can be trusted, 0-1 (`kira.reasoning.shown.Shown.certainty`); 1 for hand-built
    evidence, whose text is all there is to judge."""
    view = shown(item)
    return 1.0 if "described_by" not in (item.provenance or {}) else view.certainty


def _skip(items: Sequence[EvidenceItem], threshold: float) -> CriticDecision:
    return CriticDecision(
        kept=tuple(items), dropped=(), probabilities={i.chunk_id: 1.0 for i in items}, threshold=float(threshold),
        note="no question text (image-only query): critic skipped, all evidence kept",
    )


CALIBRATED_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
"""The text encoder the SimilarityCritic's default constants were fitted on."""


class SimilarityCritic:
    """Default critic: calibrated logistic over sentence cosine and keyword overlap (module docstring).

    Parameters: text_encoder (a `TextEncoder`), config (`GroundingConfig`, for the
    threshold and, by default, the logistic's constants), slope / midpoint / overlap_weight
    (override the config's critic_slope / critic_midpoint / critic_overlap_weight).
    """

    name = "similarity"

    def __init__(
        self,
        text_encoder: TextEncoder,
        config: GroundingConfig | None = None,
        *,
        slope: float | None = None,
        midpoint: float | None = None,
        overlap_weight: float | None = None,
    ) -> None:
        self.encoder = text_encoder
        self.config = c = config or GroundingConfig()
        self.slope = float(c.critic_slope if slope is None else slope)
        self.midpoint = float(c.critic_midpoint if midpoint is None else midpoint)
        self.overlap_weight = float(c.critic_overlap_weight if overlap_weight is None else overlap_weight)
        self._cache: dict[str, np.ndarray] = {}

    @property
    def calibrated(self) -> bool:
        """Whether the logistic's constants were fitted for this critic's text encoder (`CALIBRATED_ENCODER`)."""
        return getattr(getattr(self.encoder, "config", None), "name", None) == CALIBRATED_ENCODER

    def _embed(self, texts: list[str]) -> np.ndarray:
        # Summaries recur across questions: cache their vectors (bounded; cleared when full).
        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            vectors = np.asarray(self.encoder.encode(todo), dtype=np.float32)
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            if len(self._cache) + len(todo) > 8192:
                self._cache.clear()
            self._cache.update(zip(todo, vectors))
        return np.stack([self._cache[t] for t in texts])

    def probability_from_scores(self, cosine: float, overlap: float) -> float:
        """P(relevant) from a precomputed cosine and keyword overlap (what the latency benchmark times)."""
        return _sigmoid(self.slope * (cosine - self.midpoint) + self.overlap_weight * overlap)

    def probabilities(self, question: str, items: Sequence[EvidenceItem], *,
                      item_vectors: np.ndarray | None = None, question_vector: np.ndarray | None = None) -> list[float]:
        """P(relevant) for what each item shows (`shown_text`) given `question` (1.0 each for an empty
        question; `UNJUDGED` for an item that shows nothing readable).

        item_vectors: the vectors of the items' shown texts when they are already known (unit rows, one per
        item, from this critic's encoder; a row of zeros or NaN means unknown).
        question_vector: `question`'s vector from this critic's encoder when already known (the query's own
        encoding), so an ask encodes nothing here.
        """
        if not items:
            return []
        if not (question or "").strip():
            return [1.0] * len(items)
        if question_vector is not None:
            q = np.asarray(question_vector, dtype=np.float32).reshape(-1)
            q = q / max(float(np.linalg.norm(q)), 1e-12)
        else:
            q = self._embed([question])[0]
        known = np.zeros(len(items), bool)
        if item_vectors is not None:
            item_vectors = np.asarray(item_vectors, dtype=np.float32)
            if item_vectors.shape != (len(items), q.shape[0]):
                raise ValueError(f"item_vectors has shape {item_vectors.shape}; expected ({len(items)}, {q.shape[0]})")
            known = np.isfinite(item_vectors).all(axis=1) & (np.abs(item_vectors).sum(axis=1) > 0)
        texts = [shown_text(item) for item in items]
        readable = np.array([bool(t.strip()) for t in texts], bool)
        vectors = np.zeros((len(items), q.shape[0]), np.float32)
        if item_vectors is not None and known.any():  # known is all False without item_vectors
            vectors[known] = item_vectors[known]
        todo = ~known & readable
        if todo.any():
            vectors[todo] = self._embed([t for t, k in zip(texts, todo) if k])
        cosines = vectors @ q
        out = []
        for c, text, k, r, item in zip(cosines, texts, known, readable, items):
            if not (k or r):
                out.append(UNJUDGED)
                continue
            sure = shown_certainty(item)
            judged = self.probability_from_scores(float(c), token_alignment(question, [text]))
            out.append(sure * judged + (1.0 - sure) * UNJUDGED)
        return out

    def filter(self, question: str, items: Sequence[EvidenceItem], threshold: float | None = None, *,
               item_vectors: np.ndarray | None = None, question_vector: np.ndarray | None = None) -> CriticDecision:
        """Keep items with P(relevant) > threshold (default ``config.critic_threshold``, ReAG's 0.1);
        item_vectors and question_vector as in `probabilities`."""
        threshold = self.config.critic_threshold if threshold is None else float(threshold)
        if not (question or "").strip():
            return _skip(items, threshold)
        probabilities = self.probabilities(question, items, item_vectors=item_vectors, question_vector=question_vector)
        return filter_by_probability(items, probabilities, threshold)


RELEVANCE_PROMPT = (
    "You judge whether a passage helps answer a question.\n"
    "Question: {question}\n"
    "Passage: {passage}\n"
    "Is the passage relevant to answering the question? Answer Yes or No.\n"
    "Answer:"
)


class LMCritic:
    """ReAG's critic over a `LanguageModel`: P("Yes") to a relevance prompt (module docstring).

    Parameters: lm (a `LanguageModel`; optionally with ``yes_no_logprobs(prompt)``),
    config (`GroundingConfig`), prompt (a format string with {question} and {passage}).
    """

    name = "lm"

    def __init__(self, lm: LanguageModel, config: GroundingConfig | None = None, *, prompt: str = RELEVANCE_PROMPT) -> None:
        if "{question}" not in prompt or "{passage}" not in prompt:
            raise ValueError("prompt must contain {question} and {passage}")
        self.lm = lm
        self.config = config or GroundingConfig()
        self.prompt = prompt

    def probability(self, question: str, passage: str) -> float:
        """P(relevant) for one passage."""
        prompt = self.prompt.format(question=question, passage=passage)
        scorer: Callable[[str], Sequence[float]] | None = getattr(self.lm, "yes_no_logprobs", None)
        if callable(scorer):
            logp_yes, logp_no = (float(v) for v in scorer(prompt))
            top = max(logp_yes, logp_no)
            yes, no = math.exp(logp_yes - top), math.exp(logp_no - top)
            return yes / (yes + no)
        reply = self.lm.complete(prompt, max_new_tokens=3).strip().lower()
        if reply.startswith("yes"):
            return 0.9
        if reply.startswith("no"):
            return 0.05
        return 0.5

    def probabilities(self, question: str, items: Sequence[EvidenceItem]) -> list[float]:
        """P(relevant) for what each item shows (`shown_text`; 1.0 each for an empty question, `UNJUDGED` for
        an item that shows nothing readable)."""
        if not (question or "").strip():
            return [1.0] * len(items)
        out = []
        for item in items:
            text, sure = shown_text(item), shown_certainty(item)
            out.append(sure * self.probability(question, text) + (1.0 - sure) * UNJUDGED if text.strip() else UNJUDGED)
        return out

    def filter(self, question: str, items: Sequence[EvidenceItem], threshold: float | None = None) -> CriticDecision:
        """Keep items with P(relevant) > threshold (default ``config.critic_threshold``)."""
        threshold = self.config.critic_threshold if threshold is None else float(threshold)
        if not (question or "").strip():
            return _skip(items, threshold)
        return filter_by_probability(items, self.probabilities(question, items), threshold)
