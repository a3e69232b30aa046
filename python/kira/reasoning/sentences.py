"""Evidence text as statements: sentences, bookkeeping, statement shapes, and the profile's words.

An evidence item's text (its caption, else its summary, tags or id) is split into
sentences. A sentence is *bookkeeping* rather than content when the user's domain profile
says so: it matches one of the profile's ``bookkeeping_patterns``, or at least
`METADATA_ID_SHARE` of its content tokens match the profile's ``identifier_pattern``.
With the empty profile every sentence is content. A "Head: rest" sentence becomes two
statements (the head its own, or bookkeeping when it holds an identifier or a comparison
word of the profile); heads the profile lists (``section_heads``), and the generic
``summary/description/caption/notes/tags/keywords``, are cut off.

What a sentence states, as statements are matched, is its *shape*: its content stems with
every value (a token holding a digit) replaced by one placeholder, so "R = 22k" and
"R = 47k" state the same thing. Two shapes state the same thing at stem Jaccard >=
`SAME_SENTENCE_JACCARD`, or when they differ only in the profile's position words.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Mapping

from kira.profile import DomainProfile
from kira.text.tokens import content_tokens, stem
from kira.reasoning.types import EvidenceItem

METADATA_ID_SHARE = 0.2  # sentences with at least this share of identifier tokens are bookkeeping
SAME_SENTENCE_JACCARD = 0.65  # stem-set Jaccard at or above which two sentences state the same thing
GENERIC_HEADS = ("summary", "description", "caption", "notes", "note", "tags", "keywords")
"""Heads that introduce a text's own fields in any domain ("Caption: ..."); cut like the profile's."""
GENERIC_QUESTION_WORDS = frozenset(
    "find show list which what whats describe identify classify tell give kind type does do is are there any "
    "please most likely images image photos photo pictures picture".split()
)
"""English words of a question that say how to ask rather than what about (ignored for relevance)."""

_ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:Dr|Mr|Mrs|Ms|Prof|St|vs|approx|e\.g|i\.e|Fig|No))\.$")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=\S)|\n+")


@dataclass(frozen=True)
class Vocabulary:
    """A profile's word lists as the generator uses them: stemmed, compiled, cached per profile."""

    profile: DomainProfile
    heads: re.Pattern[str]
    identifier: re.Pattern[str] | None
    question_stems: frozenset[str]
    comparison_stems: frozenset[str]
    change_stems: frozenset[str]
    position_axes: tuple[frozenset[str], ...]

    @property
    def position_stems(self) -> frozenset[str]:
        return frozenset().union(*self.position_axes) if self.position_axes else frozenset()


def _stemmed(words: tuple[str, ...]) -> frozenset[str]:
    return frozenset(stem(t) for w in words for t in content_tokens(w) or [w.lower()])


@functools.lru_cache(maxsize=64)
def vocabulary(profile: DomainProfile | None = None) -> Vocabulary:
    """The `Vocabulary` of `profile` (the empty profile when None)."""
    profile = profile or DomainProfile()
    heads = "|".join(re.escape(h) for h in (*profile.section_heads, *GENERIC_HEADS))
    return Vocabulary(
        profile=profile,
        heads=re.compile(rf"^(?:{heads})s?\s*:\s*", re.I),
        identifier=re.compile(profile.identifier_pattern, re.I) if profile.identifier_pattern else None,
        question_stems=_stemmed(tuple(GENERIC_QUESTION_WORDS) + profile.question_words),
        comparison_stems=_stemmed(profile.comparison_words),
        change_stems=_stemmed(profile.change_words),
        position_axes=tuple(_stemmed(axis) for axis in profile.position_axes),
    )


def text_of(item: EvidenceItem) -> str:
    """The text the generator reads for an item: its caption, else its summary, else its tags, else its doc id."""
    prov = item.provenance or {}
    for key in ("caption", "label"):
        value = prov.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    if item.summary.strip():
        return item.summary.strip()
    tags = prov.get("tags")
    if isinstance(tags, (list, tuple)) and any(str(t).strip() for t in tags):
        return ", ".join(str(t).strip() for t in tags if str(t).strip())
    return item.doc_id


def _split(text: str) -> list[str]:
    pieces: list[str] = []
    for piece in _SENTENCE.split(text):
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"  # "Dr. Osei", "A. Park": not a sentence end
        else:
            pieces.append(piece)
    return pieces


def _is_identifier(token: str, vocab: Vocabulary) -> bool:
    return vocab.identifier is not None and bool(vocab.identifier.fullmatch(token))


def is_bookkeeping(sentence: str, vocab: Vocabulary) -> bool:
    """Whether `sentence` is bookkeeping under the profile (see the module docstring)."""
    if vocab.profile.is_bookkeeping(sentence):
        return True
    tokens = content_tokens(sentence)
    if not tokens:
        return True
    return sum(_is_identifier(t, vocab) for t in tokens) / len(tokens) >= METADATA_ID_SHARE


def sentences_of(text: str, vocab: Vocabulary | None = None) -> list[tuple[str, bool, str]]:
    """`text` split into (sentence, is_bookkeeping, context) triples, trailing punctuation removed.

    ``context`` is the head a sentence was split from ("Change since the previous visit:
    <sentence>"), used with the sentence for question relevance; "" for heads themselves
    and sentences without one.
    """
    vocab = vocab or vocabulary()
    out: list[tuple[str, bool, str]] = []
    for raw in _split(text):
        sentence = vocab.heads.sub("", raw.strip().rstrip(".;!? "))
        context = ""
        if ":" in sentence:
            head, rest = sentence.split(":", 1)
            if rest.strip():
                head_tokens = content_tokens(head)
                # an identifier ("Design C001 rev A") or a comparison lead-in heads a statement without being one
                head_meta = (not head_tokens or any(_is_identifier(t, vocab) for t in head_tokens)
                             or bool({stem(t) for t in head_tokens} & vocab.comparison_stems)
                             or vocab.profile.is_bookkeeping(head))
                out.append((head.strip(), head_meta, ""))
                sentence = vocab.heads.sub("", rest.strip())
                context = head.strip()
        sentence = sentence.strip(" ,")
        if sentence:
            out.append((sentence, is_bookkeeping(sentence, vocab), context))
    return out


def stems_of(text: str) -> frozenset[str]:
    """The content stems of `text`."""
    return frozenset(stem(t) for t in content_tokens(text))


def has_value(token: str) -> bool:
    """Whether a token holds a value (a digit: 10k, 0.65)."""
    return any(ch.isdigit() for ch in token)


def shape_of(stems: frozenset[str]) -> frozenset[str]:
    """Stems with every value replaced by one placeholder "#"."""
    return frozenset("#" if has_value(s) else s for s in stems)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Stem Jaccard of two shapes on their words: the value placeholder counts only when neither has a word."""
    wa, wb = a - {"#"}, b - {"#"}
    if wa or wb:
        a, b = wa, wb
    return len(a & b) / len(a | b) if a and b else 0.0


def same_statement(a: frozenset[str], b: frozenset[str], vocab: Vocabulary | None = None) -> bool:
    """Whether two shapes state the same thing: Jaccard >= SAME_SENTENCE_JACCARD, or they differ only in
    the profile's position words and share at least two other words."""
    if jaccard(a, b) >= SAME_SENTENCE_JACCARD:
        return True
    positions = (vocab or vocabulary()).position_stems
    differ = a ^ b
    return bool(differ) and bool(positions) and differ <= positions and len(a & b) >= 2


_VALUE_CLAUSE_SPLIT = re.compile(r"\s*[,;]\s*")


def without_values(sentence: str) -> str:
    """The sentence with its clauses that hold a value cut ("Enlarged outline, ratio about 0.65" ->
    "Enlarged outline"); "" if nothing is left."""
    return ", ".join(c for c in _VALUE_CLAUSE_SPLIT.split(sentence) if c and not any(ch.isdigit() for ch in c))


def witness(item: EvidenceItem) -> str:
    """Who an item testifies as: its compound document (one subject's images: ``provenance["compound"]``)
    when it belongs to one, else its document."""
    compound = item.provenance.get("compound") if isinstance(item.provenance, Mapping) else None
    return str(compound) if compound else item.doc_id
