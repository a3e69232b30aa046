"""Does any evidence answer the question? Relevance, confidence and abstention.

A retriever always returns *something*: the nearest items of a knowledge base that holds no
brick wall are still "nearest" to "a brick wall". Whether the evidence is relevant is judged
on what it SHOWS (kira.reasoning.shown: caption, passage, tags, classifier labels, OCR text,
metadata; its looks only when the question asks about appearance), never on retrieval
scores, whose scale depends on the image encoder.

For each evidence item i with content text t_i and the question q (text encoder unit vectors):

    c_i      = cos(q, t_i)
    z_i      = (c_i - median_p cos(p, t_i)) / max(spread_p, MIN_SPREAD)
    r_i      = sigmoid((z_i - abstain_z) / Z_SCALE)         (0.5 at the abstention point)
    r_i      = max(r_i, LEXICAL_RELEVANCE) when every content word of q is in t_i

where q is the question (less its appearance words when it also names a thing: "a red sports
car" is judged as "sports car"), t_i is what item i shows, or, for a question whose every content
word asks about appearance
("a dark image"), what it shows and how it looks (kira.reasoning.shown); p runs over `PROBES`
(`APPEARANCE_PROBES` for such a question), everyday English phrases standing in for "other questions" and
spread_p is the probes' inter-quartile range / 1.349 (a robust standard deviation). z_i says
how far the question's match with what item i shows stands above other questions' matches with
it, so the same rule holds for a caption, a list of ImageNet labels or OCR words, whatever
model retrieved the item. The answer's relevance r is the best r_i; the evidence is
irrelevant (the answer abstains) when r < 0.5.

A question with no content words ("what does this show?") asks about the query image or
the subject it names: the items its identifier names, or a query image, make the evidence
relevant by construction, and r is None (nothing to measure). So does a question about a query
image whose words match nothing the evidence shows ("what land cover does this tile show?"): the
evidence is what the image matches; a query image never makes the answer abstain.

``support`` says how sure the best item's source is: 1 for what a person wrote (caption,
passage, tags) or OCR read; for an item known only by its classifier labels, the label's
probability. ``confidence = r * support``, times the share of claims the verifier did not flag when
it ran (kira.pipeline's Verify stage); docs/reasoning.md has the calibration data.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from kira.reasoning.sentences import GENERIC_QUESTION_WORDS
from kira.reasoning.shown import Shown, asks_about_appearance, shown
from kira.text.tokens import content_tokens, stem
from kira.reasoning.types import EvidencePack

log = logging.getLogger(__name__)

PROBES: tuple[str, ...] = tuple(
    """a person; a group of people; a face; a child; a dog; a cat; a bird; a horse; a fish; an insect;
    a car; a bicycle; a boat; an aeroplane; a train; a road; a street at night; a city; a house; a bridge;
    a room; a kitchen; a chair; a table; a bed; a computer; a phone; a clock; a book; a page of text;
    a chart; a map; a drawing; food on a plate; a drink; fruit; a flower; a tree; a forest; grass;
    a mountain; a beach; the sea; a river; the sky; snow; a rock; a tool; a machine; a musical instrument;
    a ball; clothes; a shoe; a bottle; a box; a window""".replace("\n", " ").split(";")
)
"""Everyday English phrases: the "other questions" a question's match is compared with."""

APPEARANCE_PROBES: tuple[str, ...] = (
    "a dark image", "a bright image", "a colourful image", "a greyscale image", "a red image", "a blue image",
    "a green image", "a yellow image", "a brown image", "a smooth image", "a highly textured image",
    "a high-contrast image", "a low-contrast image", "vertical structures", "horizontal structures", "a white image",
)
"""The other questions a question about appearance alone ("a dark image") is compared with."""

ABSTAIN_Z = 3.0  # z at which r = 0.5: benchmarks/studies/calibrate_relevance.py, docs/reasoning.md
Z_SCALE = 1.0  # z units per logit of r
MIN_SPREAD = 0.03  # cosine units: the least spread of the probes' cosines used as the scale
LEXICAL_RELEVANCE = 0.9  # r when the evidence holds every content word of the question
MAX_ITEMS = 8  # items judged (best first)
LOW_CONFIDENCE = 0.5  # below this, cards open with a low-confidence banner


@dataclass(frozen=True)
class Relevance:
    """How far the evidence answers the question.

    relevant: False when nothing in the evidence matches (the answer abstains).
    score: r in [0, 1] (None when the question has nothing to measure: see the module docstring).
    support: how sure the best item's source is, in [0, 1].
    best: the evidence number of the best-matching item (None without evidence).
    standout: z of the best item (None when not measured).
    basis: "text", "identifier", "image", "appearance" or "none".
    items: (evidence number, r_i) of every item judged, so a claim can be checked against what it cites.
    lexical: whether the best item holds every content word of the question.
    """

    relevant: bool
    score: float | None
    support: float = 1.0
    best: int | None = None
    standout: float | None = None
    basis: str = "text"
    items: tuple[tuple[int, float], ...] = ()
    lexical: bool = False

    @property
    def confidence(self) -> float | None:
        """score * support, or None when unmeasured."""
        return None if self.score is None else round(float(self.score) * float(self.support), 3)


def question_words(question: str) -> list[str]:
    """The question's content words that say what it is about (framing words like 'find', 'photo' removed)."""
    generic = {stem(w) for w in GENERIC_QUESTION_WORDS}
    return [t for t in content_tokens(question or "") if t not in GENERIC_QUESTION_WORDS and stem(t) not in generic]


def source_support(view: Shown) -> float:
    """1 for what a person wrote or OCR read; the top label's probability for a label-only item; 0 if nothing."""
    return view.certainty


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


class RelevanceJudge:
    """Judges a pack's relevance to a question (module docstring).

    Parameters: encoder (a `TextEncoder`: ``encode(list[str]) -> (n, d)``), abstain_z (the
    z at which r = 0.5), probes (the comparison phrases), appearance_words (extra words
    that ask about appearance, e.g. a profile's). Thread safety: caches probe vectors under
    the GIL; safe to share if the encoder is.
    """

    def __init__(self, encoder: Any, *, abstain_z: float = ABSTAIN_Z, probes: Sequence[str] = PROBES,
                 appearance_words: Sequence[str] = ()) -> None:
        if not probes:
            raise ValueError("RelevanceJudge needs at least one probe phrase")
        self.encoder = encoder
        self.abstain_z = float(abstain_z)
        self.probes = tuple(p.strip() for p in probes if p.strip())
        self.appearance_words = tuple(appearance_words)
        self._probe_vectors: np.ndarray | None = None
        self._appearance_vectors: np.ndarray | None = None

    def _unit(self, texts: Sequence[str]) -> np.ndarray:
        v = np.asarray(self.encoder.encode(list(texts)), dtype=np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    def probe_vectors(self, appearance: bool = False) -> np.ndarray:
        """The unit vectors of the probes (of `APPEARANCE_PROBES` for an appearance question), encoded once."""
        if self._probe_vectors is None:
            self._probe_vectors = self._unit(self.probes)
            self._appearance_vectors = self._unit(APPEARANCE_PROBES)
        return self._appearance_vectors if appearance else self._probe_vectors

    def standouts(self, question: str, texts: Sequence[str], *, question_vector: np.ndarray | None = None,
                  known: Mapping[str, np.ndarray] | None = None, appearance: bool = False) -> np.ndarray:
        """z of `question` against each text (module docstring); shape (len(texts),). `question_vector` and
        `known` ({text: vector}) are this encoder's vectors already computed; the rest is encoded."""
        known = dict(known or {})
        if question_vector is not None:
            known[question] = np.asarray(question_vector, np.float32)
        todo = [t for t in dict.fromkeys([question, *texts]) if t not in known]
        if todo:
            known.update(zip(todo, self._unit(todo)))
        vectors = np.stack([np.asarray(known[t], np.float32) for t in [question, *texts]])
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        q, t = vectors[0], vectors[1:]
        cos = t @ q
        probe = self.probe_vectors(appearance) @ t.T  # (probes, texts)
        centre = np.median(probe, axis=0)
        q75, q25 = np.percentile(probe, [75, 25], axis=0)
        spread = np.maximum((q75 - q25) / 1.349, MIN_SPREAD)
        return (cos - centre) / spread

    def judge(self, question: str, pack: EvidencePack, *, image_query: bool = False,
              question_vector: np.ndarray | None = None, known: Mapping[str, np.ndarray] | None = None) -> Relevance:
        """The `Relevance` of `pack`'s items to `question` (module docstring); `question_vector`, `known` as in
        `standouts`."""
        items = list(pack.items)[:MAX_ITEMS]
        if not items:
            return Relevance(relevant=False, score=0.0, support=0.0, best=None, basis="none")
        words = question_words(question)
        named = next((i for i in items if "identifier" in i.paths), None)
        if named is not None or not words:
            # "what does P017 show?", an image-only query: about the subject it names or the query image
            best = named or items[0]
            basis = "identifier" if named is not None else ("image" if image_query else "none")
            return Relevance(relevant=bool(named is not None or image_query), score=None,
                             support=source_support(shown(best)), best=best.number, basis=basis)
        # a question only about looks ("a dark image") is judged on the items' looks; one that also names a
        # thing ("a red blossom") on what the items show: a red espresso photo does not show a blossom
        extra = {w.lower() for w in self.appearance_words}
        appearance = all(asks_about_appearance(w, self.appearance_words) or w in extra for w in words)
        views = [shown(i) for i in items]
        texts = [". ".join(t for t in (view.content_text(), view.looks_text()) if t) if appearance
                 else view.content_text() for view in views]
        if not appearance:  # "a red sports car" is judged as "sports car": a red flower does not show one
            things = [w for w in words if not asks_about_appearance(w, self.appearance_words) and w not in extra]
            if len(things) < len(words):
                question, words, question_vector = " ".join(things), things, None
        judged = [n for n, t in enumerate(texts) if t]
        if not judged:  # nothing recorded says what any item shows
            if image_query:
                return Relevance(relevant=True, score=None, support=0.0, best=items[0].number, basis="image")
            return Relevance(relevant=False, score=0.0, support=0.0, best=items[0].number, basis="none")
        z = self.standouts(question, [texts[n] for n in judged], question_vector=question_vector, known=known,
                           appearance=appearance)
        q_stems = {stem(w) for w in words}
        scores, lexical = [], []
        for k, n in enumerate(judged):
            r = _sigmoid((float(z[k]) - self.abstain_z) / Z_SCALE)
            t_stems = {stem(t) for t in content_tokens(texts[n])}
            lexical.append(bool(q_stems) and q_stems <= t_stems)
            scores.append(max(r, LEXICAL_RELEVANCE) if lexical[-1] else r)
        k = int(np.argmax(scores))
        n = judged[k]
        basis = "appearance" if appearance else "text"
        score = round(float(scores[k]), 3)
        log.debug("relevance of %r: z %s", question, np.round(z, 2).tolist())
        per_item = tuple((items[m].number, round(float(r), 3)) for m, r in zip(judged, scores))
        if image_query and score < 0.5:
            # a question about the query image ("what land cover does this tile show?") is answered from what
            # the image matches; its words measure nothing here, so the answer does not abstain and has no score
            return Relevance(relevant=True, score=None, support=source_support(views[0]) or 1.0,
                             best=items[0].number, basis="image")
        return Relevance(relevant=score >= 0.5, score=score, support=source_support(views[n]) or 1.0,
                         best=items[n].number, standout=round(float(z[k]), 3), basis=basis, items=per_item,
                         lexical=lexical[k])


__all__ = ["ABSTAIN_Z", "APPEARANCE_PROBES", "LOW_CONFIDENCE", "PROBES", "Relevance", "RelevanceJudge", "question_words", "source_support"]
