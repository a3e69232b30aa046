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
model retrieved the item. The best item is, among the items with r_i >= 0.5, the one whose
source is surest (the largest support_i, below: a caption before a classifier's guess, a label
of p 0.99 before one of p 0.38; within `SUREST_TIE` the first in retrieval order, which has
already weighed how near each is, of those that clearly match, r_i >= `CLEAR_MATCH`: a caption
just over the line, r 0.54, does not lead one that clearly matches, r 0.99); when no item has
r_i >= 0.5, the one with the largest r_i * support_i; the answer's relevance r is its r_i, and
the evidence is irrelevant (the answer abstains) when r < 0.5.

A question with no content words ("what does this show?") asks about the query image or
the subject it names: the items its identifier names, or a query image, make the evidence
relevant by construction, and r is None (nothing to measure). So does a question about a query
image whose words match nothing the evidence shows ("what land cover does this tile show?"): the
evidence is what the image matches; a query image never makes the answer abstain. The words it
measured and found unmatched stay in the verdict (`Relevance.unmatched`): a yes/no question
(kira.reasoning.question_form.asks_yes_no: "is this a dog?" about a photo of coffee) is then
answered with what the image's evidence shows, opened by a sentence saying that nothing
recorded about it matches 'dog' (kira.grounding.yes_no). (When the
query image clearly shows a stored document, the pipeline's Subject stage makes that document the
pack's items, so a cat elsewhere in the knowledge base does not answer "is there a cat?" about a
photo of coffee: kira.grounding.stages.)

Items known only by classifier labels. Without captions an image is known only by labels,
and the probes' z rewards a label of the same kind as the question ("an elephant" against
'Egyptian cat' stands 4.3 above everyday phrases: both are animals). Such an item is judged
against everything the classifier could have said as well:

    v_L = (cos(q, L) - median_V cos(q, l)) / max(spread_V, MIN_SPREAD)

with V the classifier's label vocabulary (the `vocabulary` the judge is given, encoded once per
process), spread_V its robust standard deviation and L the item's label that stands out most.
The item does not match (r_i is held under 0.5: NOT_A_MATCH, unless the label holds every word of
the question) when both

    v_L < LABEL_MATCH_Z   and   v_best - v_L >= NAMED_GAP_Z      v_best: V's name nearest the question

that is, when the classifier had a name for what was asked ('African elephant', 'fire engine')
and gave another. A question about a kind the classifier has no one name for ("an animal", "a
pet" against 'Egyptian cat': nearest names only 1.7-1.8 higher) is still judged by z alone.

Graded decision. A label set rarely names what a question asks ("a man with a camera"
against a photo labelled 'tripod'). When no item reaches r >= 0.5, an item known only by its
labels is still NEAR the question when v_L >= NEAR_LABEL_Z. The answer is then given with low confidence (``grade`` "low": the item
leads, the answer says what the classifier saw, confidence = r * support stays low); with no
near item it abstains (``grade`` "abstain", ``relevant`` False). Without a vocabulary (a stack
with no classifier, the pixel descriptor) neither rule applies. Both points were set on
benchmarks/suites/answers_real_photos.py's uncaptioned photos (docs/reasoning.md, never DomainVQA-R):
labels that name what was asked stand 4.1-12.5 above ('espresso' for "a cup of coffee", 'Egyptian
cat' for "a kitten", 'military uniform'); labels of the same kind where the classifier had the right
name stand 2.0-3.1 with that name 3.7-7.3 higher ('Egyptian cat' for "an elephant", 'motor scooter'
for "fire truck" or "a bicycle", 'moped' for "grass"); a near neighbour ('tripod' for "a man with a
camera") 5.9, while the labels of other photos retrieval put first stay at or below 4.3 ('military
uniform' for "a person in a space suit" 4.3, 'bubble' for "an ultrasound image" 4.0). A question
broader than one name but with a name close by ("a drink", "a hot drink" against 'espresso', the
vocabulary's 'beer bottle' and 'hotdog' 3.7-4.3 higher) is ruled out too: MiniLM does not know
espresso is a drink better than that.

``support`` says how sure the best item's source is: 1 for what a person wrote (caption,
passage, tags) or OCR read; for an item known only by its classifier labels, the label's
probability. ``confidence = r * support``, times the share of claims the verifier did not flag when
it ran (kira.pipeline's Verify stage), and at most `MEANING_ONLY` (under the banner point) when no record
of the knowledge base holds the question's distinctive words inside a domain whose records share words
(``unheld``: kira.grounding.unheld_words); docs/reasoning.md has the calibration data.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from kira.reasoning.sentences import GENERIC_QUESTION_WORDS
from kira.reasoning.shown import Shown, asks_about_appearance, shown
from kira.text.tokens import content_tokens, stem
from kira.reasoning.types import EvidenceItem, EvidencePack

if TYPE_CHECKING:
    from kira.models.protocols import TextEncoder

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
MEANING_ONLY = 0.49  # the most confidence of a match by meaning alone inside a domain: under the banner point
# (no record holds the question's distinctive words: kira.grounding.unheld_words)
LABEL_MATCH_Z = 3.5  # v below which a label-only item does not match the question, whatever its z (docstring)
NEAR_LABEL_Z = 5.0  # v at which a label-only item is near the question (graded decision; module docstring)
NOT_A_MATCH = 0.49  # r of an item the vocabulary test rules out: just under the abstention point
SUREST_TIE = 0.01  # supports (or r x support) closer than this tie: retrieval order decides
CLEAR_MATCH = 0.73  # r one logit above the abstention point (z = ABSTAIN_Z + Z_SCALE): a clear match, not one
# just over the line; of equally sure matches a clear one leads (module docstring)

_VOCABULARY_VECTORS: dict[tuple[object, tuple[str, ...]], np.ndarray] = {}
NAMED_GAP_Z = 3.0  # ... and only when the vocabulary's name nearest the question stands this much higher
SEEN_TEXTS = 4096  # item texts whose vectors a judge keeps (cleared when full)


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
    near: for a "low" grade, (evidence number, label, v_L) of each label-only item with a label near the question.
    asked: the question's words that were measured (what it asks about, as `items` judged it); "" when nothing was.
    unheld: the question's words that no record of the knowledge base holds, when the match is by meaning alone
        inside a domain (kira.grounding.unheld_words); the confidence is then at most `MEANING_ONLY`.
    """

    relevant: bool
    score: float | None
    support: float = 1.0
    best: int | None = None
    standout: float | None = None
    basis: str = "text"
    items: tuple[tuple[int, float], ...] = ()
    lexical: bool = False
    near: tuple[tuple[int, str, float], ...] = ()
    asked: str = ""
    unheld: str = ""

    @property
    def unmatched(self) -> str:
        """For a question about a query image, its words (what it asks about) that nothing recorded of the image's
        evidence matches (r < 0.5, or nothing recorded at all): the words measured when they left the answer to
        the image (basis "image", no score); "" when they match or were not measured."""
        return self.asked if self.basis == "image" and self.score is None else ""

    @property
    def grade(self) -> str:
        """"answer", "low" (answered with low confidence: only a classifier label near the question) or "abstain"."""
        if not self.relevant:
            return "abstain"
        return "low" if self.near and (self.score is None or self.score < 0.5) else "answer"

    def matches(self, number: int) -> bool:
        """Whether evidence item `number` answers the question (r >= 0.5, or a near item of a low grade)."""
        return dict(self.items).get(number, 1.0) >= 0.5 or any(n == number for n, _, _ in self.near)

    @property
    def confidence(self) -> float | None:
        """score * support (at most `MEANING_ONLY` when `unheld`), or None when unmeasured."""
        if self.score is None:
            return None
        confidence = round(float(self.score) * float(self.support), 3)
        return min(confidence, MEANING_ONLY) if self.unheld else confidence


def question_words(question: str) -> list[str]:
    """The question's content words that say what it is about (framing words like 'find', 'photo' removed)."""
    generic = {stem(w) for w in GENERIC_QUESTION_WORDS}
    return [t for t in content_tokens(question or "") if t not in GENERIC_QUESTION_WORDS and stem(t) not in generic]


def source_support(view: Shown) -> float:
    """1 for what a person wrote or OCR read; the top label's probability for a label-only item; 0 if nothing."""
    return view.certainty


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _surest(scores: Sequence[float], supports: Sequence[float]) -> int:
    """Index of the item that most surely shows what was asked: among the matches (r >= 0.5) whose support
    is within `SUREST_TIE` of the largest, the first in retrieval order that clearly matches (r >=
    `CLEAR_MATCH`), else the first (which of several clear matches is nearest the question retrieval has
    already weighed, and r near 1 says little more; but an item just over the line does not lead one that
    clearly matches); when none matches, the first whose r x support is within `SUREST_TIE` of the largest."""
    matches = [m for m, r in enumerate(scores) if r >= 0.5]
    if not matches:
        sure = [r * support for r, support in zip(scores, supports)]
        return next(m for m, v in enumerate(sure) if v >= max(sure) - SUREST_TIE)
    top = max(supports[m] for m in matches)
    surest = [m for m in matches if supports[m] >= top - SUREST_TIE]
    return next((m for m in surest if scores[m] >= CLEAR_MATCH), surest[0])


class RelevanceJudge:
    """Judges a pack's relevance to a question (module docstring).

    Parameters: encoder (a `TextEncoder`: ``encode(list[str]) -> (n, d)``), abstain_z (the
    z at which r = 0.5), probes (the comparison phrases), appearance_words (extra words
    that ask about appearance, e.g. a profile's), vocabulary (every label name the image
    classifier can give; empty: no low-confidence grade), near_label_z (v at which a label is
    near the question). Thread safety: caches probe and vocabulary vectors under the GIL; safe
    to share if the encoder is.
    """

    def __init__(self, encoder: TextEncoder, *, abstain_z: float = ABSTAIN_Z, probes: Sequence[str] = PROBES,
                 appearance_words: Sequence[str] = (), vocabulary: Sequence[str] = (),
                 near_label_z: float = NEAR_LABEL_Z) -> None:
        if not probes:
            raise ValueError("RelevanceJudge needs at least one probe phrase")
        self.encoder = encoder
        self.abstain_z = float(abstain_z)
        self.probes = tuple(p.strip() for p in probes if p.strip())
        self.appearance_words = tuple(appearance_words)
        self.label_names = tuple(str(v).strip() for v in vocabulary if str(v).strip())
        self.vocabulary = self.label_names  # the reference V
        self.near_label_z = float(near_label_z)
        self._probe_vectors: np.ndarray | None = None
        self._appearance_vectors: np.ndarray | None = None
        self._vocabulary_vectors: np.ndarray | None = None
        self._seen: dict[str, np.ndarray] = {}  # what items show recurs across questions: encoded once

    def _unit(self, texts: Sequence[str]) -> np.ndarray:
        v = np.asarray(self.encoder.encode(list(texts)), dtype=np.float32)
        unit: np.ndarray = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return unit

    def probe_vectors(self, appearance: bool = False) -> np.ndarray:
        """The unit vectors of the probes (of `APPEARANCE_PROBES` for an appearance question), encoded once."""
        if self._probe_vectors is None:
            self._probe_vectors = self._unit(self.probes)
            self._appearance_vectors = self._unit(APPEARANCE_PROBES)
        vectors = self._appearance_vectors if appearance else self._probe_vectors
        assert vectors is not None  # both are set together, above
        return vectors

    def standouts(self, question: str, texts: Sequence[str], *, question_vector: np.ndarray | None = None,
                  known: Mapping[str, np.ndarray] | None = None, appearance: bool = False) -> np.ndarray:
        """z of `question` against each text (module docstring); shape (len(texts),). `question_vector` and
        `known` ({text: vector}) are this encoder's vectors already computed; the rest is encoded."""
        known = dict(known or {})
        if question_vector is not None:
            known[question] = np.asarray(question_vector, np.float32)
        known.update({t: self._seen[t] for t in texts if t in self._seen and t not in known})
        todo = [t for t in dict.fromkeys([question, *texts]) if t not in known]
        if todo:
            vectors = self._unit(todo)
            known.update(zip(todo, vectors))
            if len(self._seen) + len(todo) > SEEN_TEXTS:
                self._seen.clear()
            self._seen.update((t, v) for t, v in zip(todo, vectors) if t != question)
        vectors = np.stack([np.asarray(known[t], np.float32) for t in [question, *texts]])
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        q, t = vectors[0], vectors[1:]
        cos = t @ q
        probe = self.probe_vectors(appearance) @ t.T  # (probes, texts)
        centre = np.median(probe, axis=0)
        q75, q25 = np.percentile(probe, [75, 25], axis=0)
        spread = np.maximum((q75 - q25) / 1.349, MIN_SPREAD)
        z: np.ndarray = (cos - centre) / spread
        return z

    def warm(self) -> None:
        """Encode the probes and the label vocabulary now (a service's start-up), not in the first ask."""
        self.probe_vectors()
        if self.vocabulary:
            self._vocabulary_unit()

    def _vocabulary_unit(self) -> np.ndarray:
        """The unit vectors of every name in the vocabulary, encoded once per process and text encoder, and kept
        on disk for the next process (kira.models.vector_cache)."""
        if self._vocabulary_vectors is None:
            key = (getattr(getattr(self.encoder, "config", None), "name", None) or id(self.encoder), self.vocabulary)
            if key not in _VOCABULARY_VECTORS:  # kept on disk too: a one-shot `kira ask` reads them
                from kira.models.vector_cache import cached_unit_vectors

                _VOCABULARY_VECTORS[key] = cached_unit_vectors(self.encoder, self.vocabulary, kind="labels")
            self._vocabulary_vectors = _VOCABULARY_VECTORS[key]
        return self._vocabulary_vectors

    def label_standouts(self, question: str, items: Sequence[EvidenceItem]) -> dict[int, tuple[str, float, float]]:
        """{evidence number: (label, v_L, gap)} of each item known only by classifier labels: its label that
        stands out most among the classifier's vocabulary for `question`, and how far the vocabulary's name
        nearest the question stands above it (module docstring); {} without a vocabulary."""
        candidates = [(item, view) for item, view in ((i, shown(i)) for i in items)
                      if view.labels and not (view.human_text or view.tags or view.text_read or view.metadata)]
        if not self.vocabulary or not candidates:
            return {}
        labels = list(dict.fromkeys(name for _, view in candidates for name, _ in view.labels))
        vectors = self._unit([question, *labels])
        cos = dict(zip(labels, (vectors[1:] @ vectors[0]).tolist()))
        reference = self._vocabulary_unit() @ vectors[0]
        q75, q25 = np.percentile(reference, [75, 25])
        centre, spread = float(np.median(reference)), max(float(q75 - q25) / 1.349, MIN_SPREAD)
        named = (float(reference.max()) - centre) / spread
        out = {}
        for item, view in candidates:
            name, v = max(((n, (cos[n] - centre) / spread) for n, _ in view.labels), key=lambda nv: nv[1])
            out[item.number] = (name, round(v, 2), round(max(named - v, 0.0), 2))
        return out

    def judge(self, question: str, pack: EvidencePack, *, image_query: bool = False,
              question_vector: np.ndarray | None = None, known: Mapping[str, np.ndarray] | None = None,
              by_name: bool = True) -> Relevance:
        """The `Relevance` of `pack`'s items to `question` (module docstring); `question_vector`, `known` as in
        `standouts`. With `by_name` False, an item the question names is measured like any other (what a
        question asks of the subject it names, its name left out: kira.grounding.yes_no)."""
        items = list(pack.items)[:MAX_ITEMS]
        if not items:
            return Relevance(relevant=False, score=0.0, support=0.0, best=None, basis="none")
        words = question_words(question)
        named = next((i for i in items if i.named_by_question), None) if by_name else None
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
                return Relevance(relevant=True, score=None, support=0.0, best=items[0].number, basis="image",
                                 asked=" ".join(words))
            return Relevance(relevant=False, score=0.0, support=0.0, best=items[0].number, basis="none",
                             asked=" ".join(words))
        z = self.standouts(question, [texts[n] for n in judged], question_vector=question_vector, known=known,
                           appearance=appearance)
        q_stems = {stem(w) for w in words}
        labelled = {} if appearance else self.label_standouts(question, items)
        scores, lexical = [], []
        for k, n in enumerate(judged):
            r = _sigmoid((float(z[k]) - self.abstain_z) / Z_SCALE)
            t_stems = {stem(t) for t in content_tokens(texts[n])}
            lexical.append(bool(q_stems) and q_stems <= t_stems)
            _, v, gap = labelled.get(items[n].number, ("", math.inf, 0.0))
            if v < LABEL_MATCH_Z and gap >= NAMED_GAP_Z:  # the classifier could have named it and did not
                r = min(r, NOT_A_MATCH)
            scores.append(max(r, LEXICAL_RELEVANCE) if lexical[-1] else r)
        supports = [source_support(views[n]) or 1.0 for n in judged]
        k = _surest(scores, supports)
        n = judged[k]
        basis = "appearance" if appearance else "text"
        score = round(float(scores[k]), 3)
        log.debug("relevance of %r: z %s", question, np.round(z, 2).tolist())
        per_item = tuple((items[m].number, round(float(r), 3)) for m, r in zip(judged, scores))
        if image_query and score < 0.5:
            # a question about the query image ("what land cover does this tile show?") is answered from what
            # the image matches; its words measure nothing here, so the answer does not abstain and has no score
            return Relevance(relevant=True, score=None, support=source_support(views[0]) or 1.0,
                             best=items[0].number, basis="image", asked=" ".join(words))
        near: tuple[tuple[int, str, float], ...] = ()
        if score < 0.5 and not appearance:  # graded decision: a label near the question answers with low confidence
            near = tuple(sorted(((m, lb, v) for m, (lb, v, _) in labelled.items() if v >= self.near_label_z),
                                key=lambda t: -t[2]))
            if near:
                n = next(m for m, item in enumerate(items) if item.number == near[0][0])
                score = round(float(dict(per_item).get(items[n].number, 0.0)), 3)
                k = judged.index(n) if n in judged else k
        return Relevance(relevant=score >= 0.5 or bool(near), score=score, support=source_support(views[n]) or 1.0,
                         best=items[n].number, standout=round(float(z[k]), 3), basis=basis, items=per_item,
                         lexical=lexical[k], near=near, asked=" ".join(words))


__all__ = ["ABSTAIN_Z", "APPEARANCE_PROBES", "LABEL_MATCH_Z", "LOW_CONFIDENCE", "MEANING_ONLY", "NAMED_GAP_Z",
           "NEAR_LABEL_Z", "PROBES", "Relevance", "RelevanceJudge", "question_words", "source_support"]
