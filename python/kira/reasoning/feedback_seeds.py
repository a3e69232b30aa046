"""Which retrieved documents pseudo-relevance feedback may expand from: those on the question's topic.

Feedback re-queries the visual index with the mean of the surest documents, and the residual
hops start from that mean; whatever seeds it is amplified. A seed chosen by a weak word match
("photographer" in the question, "photographed" in a clock's caption) pulls the clock's
neighbours above the photo the question is about. So the seeds are judged on what they SHOW
(kira.reasoning.relevance: the question's standout z against everyday phrases' matches with each
item's caption, or without one its tags, labels, OCR text and metadata), not on how they were found:

    cut   = max(abstain_z, min(z_best - SEED_MARGIN_Z, abstain_z + SEED_SHARE * (z_best - abstain_z)))
    seeds = { i : z_i >= cut, or i is retrieval's first and z_i >= abstain_z }
                                                   in retrieval order, one per document, at most the limit

The first condition keeps only items the relevance judge finds on topic (the same point at
which an answer abstains); the second keeps only those about as much on topic as the best
one (within SEED_MARGIN_Z robust standard deviations): documents equally about the question
(ten handwritten digits for "handwritten digits") all seed it, while one that shares a word and
a little meaning ("a wall clock" for "a masonry wall") does not. On the captioned photos of
benchmarks/suites/real_photos.py the asked photo led the next on-topic one by 2.9-4.3 in every
question where feedback had amplified such a match (brick, camera, gravel, grass); 1.5 sits
inside that gap with room on both sides.

In a specialised knowledge base every caption stands far above everyday phrases (z 14-17 for
every report of DomainVQA-R's first domain: docs/reasoning.md), and there the judge's own order
is noise: MiniLM ranks a report saying a finding is absent ("no X") as high as one reporting X.
A fixed margin of 1.5 under the best then leaves one seed, picked by that noise, and feedback
(the strongest ranking) pulls in that one image's look-alikes. So the margin is also
scale-free, half the best's height above the abstention point when that is the wider, and the
seeds that pass are taken in retrieval order, which had already weighed the words, the image
and BM25: the judge decides which documents are on topic, retrieval which of them come first.

The margin judges the documents retrieval put after its first; the first itself is a seed whenever
the judge finds it on topic at all. Retrieval before feedback is surest of it, and a mean without it
re-queries with others' look-alikes only, pushing it out of the answer for no evidence against it
("dark dots in a grey eye image": the fundus detail with dark spots, first on the question's words,
stood 5.5 above everyday phrases, the colour eye photo 8.3; seeded by the eye photo alone, feedback
filled the top with that photo's look-alikes).

An item nothing recorded says anything about (an uncaptioned scan with no label) cannot be
judged and is never a seed. With
no seed, feedback does not run: the fused ranking stands as it is. A question with nothing to
judge by (no content words, or only appearance words: "a dark image") gets None: the caller seeds
as it would without a judge.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from kira.reasoning.relevance import RelevanceJudge, question_words
from kira.reasoning.shown import asks_about_appearance, shown
from kira.reasoning.types import EvidenceItem

SEED_MARGIN_Z = 1.5  # robust standard deviations below the best seed a further seed may stand (docstring) ...
SEED_SHARE = 0.5  # ... or, when the best stands far above the abstention point, half its height above that point


def _judged_text(item: EvidenceItem) -> str:
    """What a person wrote about the item when there is any, else all it shows: a classifier's guess appended
    to a caption only dilutes it ("a colour photograph of the back of the eye. lampshade, balloon")."""
    view = shown(item)
    return view.human_text or view.content_text()


def on_topic_seeds(judge: RelevanceJudge, question: str, items: Sequence[EvidenceItem], limit: int, *,
                   known: Mapping[str, np.ndarray] | None = None,
                   question_vector: np.ndarray | None = None) -> list[EvidenceItem] | None:
    """At most `limit` of `items` (in retrieval order, surest first; one per document, in that order) that
    feedback may expand from (module docstring): [] when no item is on topic, None when the question has
    nothing to judge by.
    known: {text: vector} of this judge's encoder already computed (e.g. stored at ingest); question_vector:
    the question's, when the query encoding already made it (used only for the question as asked)."""
    extra = judge.appearance_words
    words = question_words(question)
    things = [w for w in words if not asks_about_appearance(w, extra) and w not in extra]
    if not things:
        return None
    if limit < 1 or not items:
        return []
    if len(things) < len(words):  # "a red blossom" is judged as "blossom", as the relevance judge does
        question, question_vector = " ".join(things), None
    first: dict[str, EvidenceItem] = {}
    for item in items:
        first.setdefault(item.doc_id, item)
    texts = {d: _judged_text(i) for d, i in first.items()}
    docs = [i for d, i in first.items() if texts[d]]
    if not docs:
        return []
    z = judge.standouts(question, [texts[i.doc_id] for i in docs], known=known, question_vector=question_vector)
    best, floor = float(np.max(z)), judge.abstain_z
    cut = max(floor, min(best - SEED_MARGIN_Z, floor + SEED_SHARE * (best - floor)))
    lead = items[0].doc_id  # retrieval's surest document: a seed whenever it is on topic at all
    return [item for item, zk in zip(docs, z.tolist())
            if zk >= cut or (item.doc_id == lead and zk >= floor)][:limit]  # in retrieval order


__all__ = ["SEED_MARGIN_Z", "SEED_SHARE", "on_topic_seeds"]
