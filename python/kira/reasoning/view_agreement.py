"""Agreement across the views of one subject.

A multiview group (``provenance["views"]``: a PA and a lateral film of one study, the
faces of one part) is one subject seen several ways at the same time. A question that
asks what such views show together, or whether they agree ("what do the two views
together show?", "do fields 1 and 3 agree?"), is answered by a claim only as far as the
views themselves state it: when two or more documents of one set state the claim and no
document of that set states other content instead, the claim is worded as theirs, in plain
English that reads right for any set of views ("PA and lateral views each show ...", "Yes,
they agree: fields 1 and 3 each show ...", "The 3 views each show ..."). The trigger words
(`AGREEMENT_WORDS`) are everyday English, no domain's vocabulary. The views are named by the question's own words
that tell their bookkeeping apart ("front view of part 12, ..." / "side view of
part 12, ..."); a view whose text states nothing but bookkeeping cannot be compared and
is not counted as agreeing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from kira.text.tokens import words
from kira.reasoning.types import EvidenceItem

AGREEMENT_WORDS = frozenset({"together", "agree", "agrees", "both", "concur", "concurs"})
"""Everyday English words of a question that ask what several views show together, or whether they agree."""


def asks_agreement(question: str) -> bool:
    """Whether `question` asks what several views show together or whether they agree."""
    return bool(set(words(question)) & AGREEMENT_WORDS)


@dataclass(frozen=True)
class ViewAgreement:
    """Documents of one multiview set that each state a claim."""

    view_set: str  # the multiview group's id
    items: tuple[EvidenceItem, ...]  # one item per view that counts (named by the question, else stating content)
    missing: tuple[EvidenceItem, ...] = ()  # those of them that do not state the claim: no agreement is stated
    phrase: str = ""  # the question's own words for those views ("PA and lateral views", "fields 1 and 3")
    yes_no: bool = False  # the question asks whether they agree ("Do fields 1 and 3 agree?")

    @property
    def agrees(self) -> bool:
        return not self.missing

    def lead(self) -> str:
        """The claim's opening: "Yes, they agree: fields 1 and 3 each show", "PA and lateral views each show",
        "The 3 views each show"."""
        head = f"{self.phrase or f'the {len(self.items)} views'} each show"
        return f"Yes, they agree: {head}" if self.yes_no else head[:1].upper() + head[1:]

    def word(self, claim: str) -> str:
        """`claim` worded as what the views show ("Enlarged heart" -> "The 2 views each show enlarged heart")."""
        keep_case = len(claim) > 1 and claim[1].isupper()  # "RC low-pass filter", "PA view"
        return f"{self.lead()} {claim if keep_case else claim[:1].lower() + claim[1:]}"


_YES_NO = re.compile(r"^\s*(?:do|does|did|are|is|were|was)\b", re.I)


def agreeing_views(
    question: str,
    sources: Sequence[EvidenceItem],
    content_items: Iterable[EvidenceItem],
    pool: Iterable[EvidenceItem],
    bookkeeping: Callable[[EvidenceItem], str],
) -> ViewAgreement | None:
    """How the views of a multiview set in `pool` stand on a claim, or None when no set has 2 views to compare.

    sources: the items that state the claim, best first. content_items: the items of the
    answer's evidence that state any content; pool: all of its items. The views that count
    are those the question names (a word of the question that one member's bookkeeping
    holds and its set's others' do not: "PA" / "lateral", "1" / "3" of "fields 1 and 3"),
    else every member that states content; they agree when each is among the sources
    (`ViewAgreement.agrees`; else `missing` holds the ones that do not state the claim).
    A set every counted view of which states the claim is preferred. bookkeeping(item):
    the item's bookkeeping sentences.
    """
    stating = {item.doc_id for item in sources}
    members: dict[str, dict[str, EvidenceItem]] = {}
    for item in pool:
        key = item.provenance.get("views") if item.provenance else None
        if key:
            members.setdefault(str(key), {}).setdefault(item.doc_id, item)
    with_content = {item.doc_id for item in content_items}
    found: list[ViewAgreement] = []
    for key, docs in members.items():
        if len(docs) < 2:
            continue
        named = _named(question, docs, bookkeeping)
        views = [docs[d] for d in named] if len(named) >= 2 else [i for d, i in docs.items() if d in with_content]
        if len(views) < 2:
            continue
        stated = [i for i in dict.fromkeys(sources) if i in views]  # best first
        missing = tuple(v for v in views if v.doc_id not in stating)
        phrase = _phrase(question, list(named.values())) if len(named) >= 2 else ""
        found.append(ViewAgreement(key, tuple(stated) + missing, missing, phrase, yes_no=bool(_YES_NO.match(question))))
    return min(found, key=lambda a: len(a.missing) > 0) if found else None


def _named(question: str, docs: dict[str, EvidenceItem], bookkeeping: Callable[[EvidenceItem], str]) -> dict[str, str]:
    """{doc_id: the question's word that names it}: the first word of the question that the document's
    bookkeeping holds and no other member's does, for the members that have one (in question order)."""
    asked = words(question)
    vocab = {d: set(words(bookkeeping(item))) for d, item in docs.items()}
    named: dict[str, str] = {}
    for d, own in vocab.items():
        others = set().union(*(v for e, v in vocab.items() if e != d))
        word = next((w for w in asked if w in own and w not in others), None)
        if word is not None:
            named[d] = word
    return dict(sorted(named.items(), key=lambda kv: asked.index(kv[1])))


_PLURAL = re.compile(r"^[A-Za-z]{3,}s$")


def _phrase(question: str, names: list[str]) -> str:
    """The question's words that name the views: from the first name to the last ("PA and lateral",
    "1 and 3") with the plural noun next to them ("PA and lateral views", "fields 1 and 3"); "" if the
    names are not one run of words in the question."""
    spans = [re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", question, re.I) for w in names]
    found = [m for m in spans if m is not None]
    if len(found) < len(spans):
        return ""
    start, end = min(m.start() for m in found), max(m.end() for m in found)
    run = question[start:end]
    if len(re.findall(r"[\w-]+", run)) > 2 * len(names) + 1:  # "PA ... and ... lateral" far apart: not one naming
        return ""
    after = re.match(r"\s+([A-Za-z]+)", question[end:])
    before = re.search(r"([A-Za-z]+)\s+$", question[:start])
    if after and _PLURAL.match(after.group(1)):
        return f"{run} {after.group(1)}"
    if before and _PLURAL.match(before.group(1)):
        return f"{before.group(1)} {run}"
    return f"views {run}"
