"""How the template generator weighs statements: each candidate statement, who states it, and its vote.

* `Statement`: one candidate claim, the items stating it, its support and its score.
* `vote_weights`: each item's vote, its retrieval score times how far it matches the question.
* `clear_match_first`: a statement a clear match states leads one that only near-misses state.
* `restates`: whether a candidate only repeats a chosen claim.
* `answers_apart`: whether a candidate is another subject's answer to the question, not a rival reading;
  `items_apart`, the same for images known only by their fields.
* `with_heads`: a chosen claim split from a head reads as the one sentence it was split from.

kira.reasoning.template_generator builds the candidates and chooses among them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from kira.reasoning.citations import format_citation
from kira.reasoning.sentences import stems_of, text_of, without_values, witness
from kira.reasoning.types import EvidenceItem


def restates(cand: Statement, chosen: list[Statement]) -> bool:
    """Whether `cand`'s wording holds every content word of a chosen claim, or a chosen claim holds all of
    its words but those of its value clauses."""
    words = stems_of(cand.text)
    plain = stems_of(without_values(cand.text)) or words
    return any(plain <= stems_of(c.text) or stems_of(c.text) <= words for c in chosen)


def answers_apart(cand: Statement, chosen: list[Statement], matches: Mapping[int, float],
                  shared: frozenset[str] = frozenset(), heads: Sequence[Statement] = ()) -> bool:
    """Whether `cand` is another subject's answer to the question, said beside the chosen claims rather than
    outvoted by them: an item that clearly matches the question (`EvidencePack.matches` >= CLEAR_MATCH) states
    it, it holds (in itself or its head) some of the question's content stems (`Statement.held`) and every one
    the first claim holds, and no witness of a chosen claim states it (a document, or a whole compound document:
    kira.reasoning.sentences.witness). "which photos show a cup?" is answered by the cup of coffee and by the cup
    of tea on a desk found; a statement that holds only the question's other words ('a cat on a rug' where
    'a cup on a rug' answers "a cup on a rug?") is no answer of its own, nor one that holds only words most
    records of the knowledge base hold (`shared`: 'scan' in an archive of scans, `EvidencePack.shared`). A
    chosen head (`heads`: "CT scan", joined to its best body) witnesses only through that body: another study
    stating the head has its own answer."""
    from kira.reasoning.relevance import CLEAR_MATCH

    held = cand.held - shared
    first = next((c for c in chosen if not any(c is h for h in heads)), chosen[0])  # a joined head's body
    if not held or not first.held - shared <= held:
        return False
    if not any(matches.get(i.number, 0.0) >= CLEAR_MATCH for i in cand.sources):
        return False
    taken = {witness(i) for c in chosen if not any(c is h for h in heads) for i in c.sources}
    return not taken & {witness(i) for i in cand.sources}


def items_apart(pool: tuple[EvidenceItem, ...], matches: Mapping[int, float], room: int) -> list[EvidenceItem]:
    """For an answer from what images' fields record (nobody's words, kira.reasoning.field_answer): after the
    first item, the first item of each other subject (witness) that clearly matches the question, with no
    caption either, and surely: its match times its source's certainty (a label's probability) reaches
    LOW_CONFIDENCE, the point under which an answer carries a low-confidence banner, since a further match gets
    no banner of its own ('espresso maker' p 0.38 on a scan is no second cup of coffee). At most `room`; none
    when the first does not clearly match itself."""
    from kira.reasoning.relevance import CLEAR_MATCH, LOW_CONFIDENCE
    from kira.reasoning.shown import shown

    if not pool or matches.get(pool[0].number, 0.0) < CLEAR_MATCH:
        return []
    taken, out = {witness(pool[0])}, list[EvidenceItem]()
    for item in pool[1:]:
        if len(out) >= room:
            break
        r, view = matches.get(item.number, 0.0), shown(item)
        if witness(item) not in taken and r >= CLEAR_MATCH and r * view.certainty >= LOW_CONFIDENCE \
                and not view.human_text:
            taken.add(witness(item))
            out.append(item)
    return out


def vote_weights(items: tuple[EvidenceItem, ...], matches: Mapping[int, float]) -> dict[int, float]:
    """Per-item vote weight: the score if any score is positive (negatives count 0), else 1/rank; times how far
    the item matches the question where the relevance verdict judged it (`EvidencePack.matches`), so an item
    votes as far as it answers the question, not by its rank alone."""
    if any(item.score > 0 for item in items):
        base = {item.number: max(item.score, 0.0) for item in items}
    else:
        base = {item.number: 1.0 / rank for rank, item in enumerate(items, start=1)}
    return {n: w * matches.get(n, 1.0) for n, w in base.items()}


def clear_match_first(candidates: list[Statement], matches: Mapping[int, float], trace: list[str]) -> list[Statement]:
    """`candidates` (best first) with the best one stated by an item that clearly matches the question
    (`EvidencePack.matches` >= CLEAR_MATCH) moved first, when the best is stated only by items that do not: the
    first claim comes from evidence that answers the question whenever some does. "A wall clock photographed at
    an angle" (r 0.54; BM25 stems photographed like "a photographer") outweighed the cameraman (r 0.99) by a
    retrieval score twice as high. Where a clear match states the best candidate, the consensus stands."""
    from kira.reasoning.relevance import CLEAR_MATCH

    def clear(cand: Statement) -> bool:
        return any(matches.get(i.number, 0.0) >= CLEAR_MATCH for i in cand.sources)

    if not matches or not candidates or clear(candidates[0]):
        return candidates
    lead = next((c for c in candidates if clear(c) and not c.history), None)
    if lead is None:
        return candidates
    trace.append(f"Led with '{lead.text}': no item stating '{candidates[0].text}' clearly matches the question, and "
                 f"{format_citation(numbers_of(lead.sources))} does.")
    return [lead, *(c for c in candidates if c is not lead)]


@dataclass
class Statement:
    """One candidate claim: its wording, the items that state it and how far they support it."""

    text: str  # as first written by the best-weighted item stating it
    stems: frozenset[str]  # its shape (values replaced by "#"), what near-duplicates are matched on
    sources: list[EvidenceItem]  # items that state it, best first
    context: frozenset[str] = frozenset()  # stems of the sentence and its head, for relevance
    support: float = 0.0  # score-weighted share of content-bearing documents stating it
    relevance: float = 0.0  # share of the question's content stems it (or its head) contains
    held: frozenset[str] = frozenset()  # those stems
    reports_change: bool = False  # a comparison question and a statement of change new in some document
    history: bool = False  # a statement of change, and the question asks for no comparison
    variants: list[tuple[str, str, frozenset[str]]] = field(default_factory=list)  # (witness, doc id, stems)
    wordings: dict[str, str] = field(default_factory=dict)  # doc id: its sentence stating it, best-weighted first
    head: str = ""  # the head it was split from ("a breakfast table" of "a breakfast table: two cups ..."), as written
    carries_head: bool = False  # its head is no candidate of its own (it asks nothing the question asks)

    @property
    def score(self) -> float:
        """Support, plus half the share of the question's words, plus 1 for a change a comparison asks about."""
        return self.support + 0.5 * self.relevance + (1.0 if self.reports_change else 0.0)


def with_heads(chosen: list[Statement], trace: list[str], joined: set[frozenset[str]] | None = None
               ) -> list[Statement]:
    """`chosen` with each claim split from a head written as the one sentence it was: "A breakfast table: two
    cups and a teapot", not "Two cups and a teapot. A breakfast table". When the head is a chosen claim too, the
    two are joined in the head's place. When the head was no claim of its own (`Statement.carries_head`: it asks
    nothing the question asks, kira.reasoning.template_generator), or was joined to another subject's body (its
    stems in `joined`, which collects those of the heads joined here), the claim is written with it only when
    every item it cites states it. Either way the claim cites the items stating its body: an item stating only
    the head ("CT scan", which every CT study of an archive states) does not state "CT scan: a marked lesion"."""
    joined = set() if joined is None else joined
    out = list(chosen)
    for body in list(out):
        if not body.head or stems_of(body.head) <= stems_of(body.text):
            continue
        head = next((c for c in out if c is not body and stems_of(c.text) == stems_of(body.head)), None)
        if head is not None:
            trace.append(f"Joined '{head.text}' and '{body.text}' into the sentence they were split from.")
            joined.add(stems_of(head.text))
            body.text = f"{head.text}: {body.text}"
            out.remove(body)
            out[out.index(head)] = body
        elif ((body.carries_head or stems_of(body.head) in joined)
              and all(stems_of(body.head) <= stems_of(text_of(i)) for i in body.sources)):
            trace.append(f"Wrote '{body.text}' with its head '{body.head}', the sentence it was split from.")
            body.text = f"{body.head}: {body.text}"
    return out


def numbers_of(items: list[EvidenceItem] | tuple[EvidenceItem, ...]) -> tuple[int, ...]:
    return tuple(sorted(item.number for item in items))
