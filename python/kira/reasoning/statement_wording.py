"""How a chosen statement is worded: as its witnesses agree, and where they agree it sits.

`agreed_wording` keeps the content words most of a statement's (weighted) witnesses state
(kira.reasoning.consensus); `agree_on_positions` leaves out of the chosen claims the position
words their witnesses do not agree on (kira.reasoning.position_agreement). Both are steps of
the template generator (kira.reasoning.template_generator).
"""

from __future__ import annotations

from typing import Mapping

from kira.reasoning.consensus import CONSENSUS_SHARE, consensus_text, value_ranges, without_words
from kira.reasoning.position_agreement import disputed_positions
from kira.reasoning.sentences import Vocabulary, stems_of, witness
from kira.reasoning.statement_votes import Statement, vote_weights
from kira.reasoning.types import EvidenceItem


def agreed_wording(cand: Statement, vocab: Vocabulary, *, weights_by_witness: Mapping[str, float], cited: set[str]
                   ) -> tuple[str, frozenset[str] | None]:
    """(The candidate's sentence keeping only the content words most of its (weighted) witnesses state,
    None); or, when they agree on no wording that reads on its own (kira.reasoning.consensus), (its best
    witness's sentence, the documents that word it so): only those may be cited for it.

    A compound document is one witness, stating what all its documents state; when every
    source belongs to one compound document, its documents vote. A unitless number the
    witnesses disagree on becomes its range over the `cited` documents (kira.reasoning.consensus).
    """
    by_doc: dict[str, frozenset[str]] = {}
    witness_of: dict[str, str] = {}
    for who, doc, stems in cand.variants:
        by_doc[doc] = by_doc.get(doc, frozenset()) | stems
        witness_of[doc] = who
    by_witness: dict[str, frozenset[str]] = {}  # what every document of the witness states
    for doc, stems in by_doc.items():
        w = witness_of[doc]
        by_witness[w] = by_witness[w] & stems if w in by_witness else stems
    if len(by_witness) >= 2:
        voters, weight = by_witness, {w: weights_by_witness.get(w, 0.0) for w in by_witness}
    elif len(by_doc) >= 2:
        voters, weight = by_doc, dict.fromkeys(by_doc, 1.0)
    else:
        return cand.text, None
    if not any(weight.values()):
        weight = dict.fromkeys(voters, 1.0)
    total = sum(weight.values())
    agreed = frozenset(
        s for s in frozenset().union(*voters.values())
        if sum(w for d, w in weight.items() if s in voters[d]) > CONSENSUS_SHARE * total
    )
    # a place most witnesses agree on is said even when the best-weighted wording puts it elsewhere
    placed = agreed & vocab.position_stems
    base = next((t for t in (cand.text, *cand.wordings.values()) if placed <= stems_of(t)), cand.text)
    ranges = value_ranges(base, [stems for d, stems in by_doc.items() if d in cited], agreed)
    text = consensus_text(base, agreed, ranges=ranges)
    if text:
        return text, None
    said = " ".join(cand.text.lower().split())
    same = frozenset(d for d, w in cand.wordings.items() if " ".join(w.lower().split()) == said)
    return cand.text, same or frozenset({cand.sources[0].doc_id})

def agree_on_positions(chosen: list[Statement], items: tuple[EvidenceItem, ...], trace: list[str],
                       matches: Mapping[int, float], vocab: Vocabulary) -> None:
    """Leave out of every chosen claim the position words its witnesses, over all the chosen claims,
    do not agree on (kira.reasoning.position_agreement)."""
    if not vocab.position_axes:
        return
    weights = vote_weights(items, matches)
    weight_of: dict[str, float] = {}
    for item in items:
        w = witness(item)
        weight_of[w] = max(weight_of.get(w, 0.0), weights[item.number])
    disputed = disputed_positions(
        ((who, stems) for c in chosen for who, _doc, stems in c.variants), weight_of, CONSENSUS_SHARE,
        vocab.position_axes)
    if not disputed:
        return
    changed = []
    for cand in chosen:
        if stems_of(cand.text) & disputed.keys():
            trimmed = without_words(cand.text, disputed)
            if trimmed != cand.text:
                changed.append(f"'{cand.text}' -> '{trimmed}'")
                cand.text = trimmed
    if changed:
        trace.append(
            "Where the finding sits, over every chosen claim's sources: "
            + ", ".join(f"'{w}' has {using / total:.0%} of the weight placing it" for w, (using, total) in disputed.items())
            + f", so it is left out: {'; '.join(changed)}.")
