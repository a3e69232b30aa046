"""Agreement on where a finding sits, across every claim of one answer.

A document's place words are a property of the document, not of one of its sentences: a
document whose first sentence places a finding on one side and whose summary names that
side places one finding once. Each claim is first worded by its own sources (the template
generator keeps a word more than 70% of them state), so a claim that only a few documents
state could keep a place the wider evidence disputes; the answer would then say less in
one claim than it contradicts in the next.

`disputed_positions` takes every wording of every chosen claim, by witness (a document,
or one compound document), and returns the position words that the witnesses placing the
finding on that axis do not agree on: a word is disputed when the witnesses using it hold
no more than `share` of the weight of those that place the finding on that axis at all. A
witness that uses two words of one axis places nothing on it and abstains. The axes are
the user's (`DomainProfile.position_axes`, stemmed); with none, nothing is disputed.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

def disputed_positions(
    wordings: Iterable[tuple[str, frozenset[str]]], weights: Mapping[str, float], share: float,
    axes: Sequence[frozenset[str]] = (),
) -> dict[str, tuple[float, float]]:
    """{position stem: (weight of the witnesses using it, weight of those placing the finding on its axis)}
    for every position stem the witnesses do not agree on.

    Parameters: `wordings` (witness, stems of one of its sentences stating a chosen claim);
    `weights` each witness's weight (a witness missing from it weighs 0; when none of
    the witnesses on an axis weighs anything they count equally); `share` the share above
    which a word is agreed (the generator's CONSENSUS_SHARE); `axes` the sets of position stems that
    exclude each other.
    Raises ValueError for a `share` outside [0, 1).
    """
    if not 0.0 <= share < 1.0:
        raise ValueError(f"share must be in [0, 1); got {share}")
    placed: dict[str, set[str]] = {}
    for witness, stems in wordings:
        placed.setdefault(witness, set()).update(s for axis in axes for s in stems & axis)
    out: dict[str, tuple[float, float]] = {}
    for axis in axes:
        votes = {w: next(iter(p & axis)) for w, p in placed.items() if len(p & axis) == 1}
        if not votes:
            continue
        weight = {w: max(float(weights.get(w, 0.0)), 0.0) for w in votes}
        if not any(weight.values()):
            weight = dict.fromkeys(votes, 1.0)
        total = sum(weight.values())
        for word in sorted(set(votes.values())):
            using = sum(weight[w] for w, v in votes.items() if v == word)
            if using <= share * total:
                out[word] = (using, total)
    return out
