"""BM25 over the knowledge base's document texts: the lexical half of path B.

Sentence encoders place "site S017" next to "site S071"; users who name a subject
by identifier, date or part number need exact term matching. `LexicalIndex` is Okapi
BM25 (Robertson & Zaragoza 2009; k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) /
(df + 0.5))) over one text per document chunk: its description (the user's caption and
tags plus the generated description), its doc id and its metadata values, and over
passage chunks. Region and patch chunks repeat their document's caption, so they are
left out rather than counted twenty times.

`specificity(text)` is the largest normalised idf among the text's terms that occur in
the index (0 when none does, 1 for a term held by a single document): a pre-retrieval
query-performance predictor (max-idf; He & Ounis 2004) that says how much the words of
a question can narrow the knowledge base down.

The index lives in memory, built from the store on first use and rebuilt after each
commit (`KnowledgeBase.lexical()`); building is one pass over the texts.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from kira.text.tokens import DISCOURSE_WORDS, STOP_WORDS, stem

BM25_K1 = 1.2
BM25_B = 0.75

_TERM = re.compile(r"\d{4}-\d{2}-\d{2}|[a-z0-9]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# Words that frame a request ("find", "compare") rather than name what is searched for.
QUERY_FRAME_WORDS = frozenset(
    """find show shows showing retrieve search look list give tell describe compare compared what which
    kind type""".split()
) | DISCOURSE_WORDS


NEGATION_CUES = frozenset({"no", "not", "without", "nor", "never", "absent", "negative"})
"""Words that negate what follows them up to the end of the clause (NegEx-style scope)."""
NEGATED = "not:"
"""Prefix of an index term stated under negation: "no crack" indexes "not:crack", not "crack"."""
_SCOPE_END = re.compile(r"[.,;:!?()\[\]]|\b(?:but|however|although|except)\b")


MAX_LEXICAL_CHARS = 20_000
"""What of one chunk's text the lexical (BM25) index reads: a few thousand words, well past
any caption or passage it ranks by, so a 10 MB caption no longer costs seconds per commit."""


def indexed_text(description: str | None, doc_id: str, metadata: Any) -> str:
    """The text the lexical index holds for a document or passage chunk: its description, its doc id (hyphens
    as spaces) and its document's metadata values (`metadata`: a dict, or its JSON text)."""
    if isinstance(metadata, str):
        metadata = json.loads(metadata or "{}") if metadata else {}
    extra = " ".join(str(v) for v in metadata.values()) if isinstance(metadata, dict) else ""
    return f"{(description or '')[:MAX_LEXICAL_CHARS]} {str(doc_id).replace('-', ' ')} {extra[:MAX_LEXICAL_CHARS]}"


def lexical_terms(text: str) -> list[str]:
    """Index terms of `text`: lower-cased words and ISO dates, stop words removed, lightly stemmed.

    Identifiers stay whole ("P017" -> "p017", "2021-04-09" stays one term). A term after a
    negation cue ("no", "not", "without", ...) in the same clause (up to punctuation or
    "but") is indexed as NEGATED + term, so "no crack or corrosion" does not match a
    search for a crack, and "without damage" matches only a query that negates it too.
    """
    out: list[str] = []
    for clause in _SCOPE_END.split(text.lower()):
        negated = False
        for t in _TERM.findall(clause):
            if t in NEGATION_CUES:
                negated = True
            elif t not in STOP_WORDS:
                out.append(NEGATED + stem(t) if negated and not is_identifier(t) else stem(t))
    return out


def is_identifier(term: str) -> bool:
    """Whether an index term is an identifier: letters and digits mixed ("p017", "c012", "7805a") or an ISO date."""
    if _DATE.fullmatch(term):
        return True
    return any(c.isdigit() for c in term) and any(c.isalpha() for c in term)


@dataclass(frozen=True)
class LexicalHits:
    """A lexical search's result: chunk ids best first and their BM25 scores (> 0)."""

    ids: np.ndarray  # int64
    scores: np.ndarray  # float32


class LexicalIndex:
    """An in-memory BM25 index over (chunk id, text) pairs. Build with `LexicalIndex.build`."""

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, postings: dict[str, tuple[np.ndarray, np.ndarray]],
                 counts: Sequence[Counter[str]] | None = None) -> None:
        self.ids = ids
        self.lengths = lengths
        self.postings = postings
        self.avg_length = float(lengths.mean()) if len(lengths) else 0.0
        self.counts = counts  # per row, its terms' frequencies: what `updated` rebuilds from without re-tokenising

    @classmethod
    def build(cls, chunk_ids: Sequence[int] | np.ndarray, texts: Iterable[str]) -> LexicalIndex:
        """Index `texts[i]` under `chunk_ids[i]`.

        Raises ValueError when the two lengths differ or an id repeats.
        """
        ids = np.asarray(chunk_ids, dtype=np.int64).reshape(-1)
        texts = list(texts)
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} chunk ids but {len(texts)} texts; pass one text per id")
        if len(np.unique(ids)) != len(ids):
            raise ValueError("chunk ids repeat; pass each chunk once")
        return cls._from_counts(ids, [Counter(lexical_terms(text)) for text in texts])

    @classmethod
    def _from_counts(cls, ids: np.ndarray, counts: list[Counter[str]]) -> LexicalIndex:
        rows: dict[str, list[int]] = {}
        freqs: dict[str, list[int]] = {}
        lengths = np.zeros(len(ids), dtype=np.float32)
        for row, count in enumerate(counts):
            lengths[row] = sum(count.values())
            for term, tf in count.items():
                rows.setdefault(term, []).append(row)
                freqs.setdefault(term, []).append(tf)
        postings = {t: (np.asarray(r, dtype=np.int32), np.asarray(freqs[t], dtype=np.float32)) for t, r in rows.items()}
        return cls(ids, lengths, postings, counts)

    def updated(self, removed: np.ndarray | Sequence[int], chunk_ids: Sequence[int] | np.ndarray,
                texts: Iterable[str]) -> LexicalIndex:
        """A new index: this one without the chunks `removed` (ids it does not hold are ignored)
        and with `texts[i]` under `chunk_ids[i]`, which must be new and above every id it holds
        (chunk ids only grow), so rows stay in id order and the result equals a fresh `build`.
        Only the new texts are tokenised. Raises ValueError for an id not above the others."""
        new_ids = np.asarray(chunk_ids, dtype=np.int64).reshape(-1)
        texts = list(texts)
        if len(new_ids) != len(texts):
            raise ValueError(f"{len(new_ids)} chunk ids but {len(texts)} texts; pass one text per id")
        if len(new_ids) and (np.any(np.diff(new_ids) <= 0) or (len(self.ids) and new_ids[0] <= self.ids[-1])):
            raise ValueError("new chunk ids must ascend and lie above every id the index holds")
        if self.counts is None:
            raise ValueError("this index keeps no term counts; build a new one with LexicalIndex.build")
        keep = ~np.isin(self.ids, np.asarray(removed, dtype=np.int64)) if len(removed) else np.ones(len(self.ids), bool)
        kept = [c for c, k in zip(self.counts, keep.tolist()) if k]
        return LexicalIndex._from_counts(np.concatenate([self.ids[keep], new_ids]),
                                         kept + [Counter(lexical_terms(t)) for t in texts])

    def __len__(self) -> int:
        return len(self.ids)

    def chunks_holding(self, word: str) -> np.ndarray:
        """The chunk ids (ascending) whose indexed text holds `word` as an index term (after `lexical_terms`)."""
        terms = lexical_terms(word or "")
        if len(terms) != 1 or terms[0] not in self.postings:
            return np.zeros(0, np.int64)
        return np.sort(self.ids[self.postings[terms[0]][0]])

    def document_frequency(self, term: str) -> int:
        """How many indexed chunks (documents and passages) hold the index term `term` (already passed through
        `lexical_terms`); 0 for an unknown term."""
        posting = self.postings.get(term)
        return 0 if posting is None else len(posting[0])

    def idf(self, term: str) -> float:
        """BM25 idf of an index term (already passed through `lexical_terms`); 0.0 for an unknown term."""
        posting = self.postings.get(term)
        if posting is None:
            return 0.0
        n, df = len(self.ids), len(posting[0])
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def specificity(self, text: str) -> float:
        """Largest idf among `text`'s known terms, divided by the idf of a single-document term; in [0, 1]."""
        if len(self.ids) == 0:
            return 0.0
        terms = [t for t in set(lexical_terms(text)) if t not in QUERY_FRAME_WORDS]
        best = max((self.idf(t) for t in terms), default=0.0)
        top = math.log(1.0 + (len(self.ids) - 0.5) / 1.5)
        return float(min(best / top, 1.0)) if top > 0 else 0.0

    def identifier_postings(self, text: str, *, allow: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """{identifier term of `text`: chunk ids (ascending) holding it}, for the terms some chunk holds."""
        keep = None if allow is None else np.asarray(allow, dtype=np.int64)
        out: dict[str, np.ndarray] = {}
        for term in sorted(set(lexical_terms(text))):
            if not is_identifier(term) or term not in self.postings:
                continue
            ids = np.unique(self.ids[self.postings[term][0]])
            if keep is not None:
                ids = ids[np.isin(ids, keep)]
            if len(ids):
                out[term] = ids
        return out

    def identifier_matches(self, text: str, *, allow: np.ndarray | None = None) -> np.ndarray:
        """Chunk ids (ascending) holding any identifier term of `text` (see `is_identifier`); empty when none."""
        postings = self.identifier_postings(text, allow=allow)
        if not postings:
            return np.zeros(0, np.int64)
        return np.unique(np.concatenate(list(postings.values())))

    def search(self, text: str, k: int, *, allow: np.ndarray | None = None) -> LexicalHits:
        """The `k` best chunks for `text` by BM25 (only chunks sharing a term; ties by chunk id).

        `allow`: chunk ids that may be returned (None = all). Raises ValueError for k < 1.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1; got {k}")
        empty = LexicalHits(np.zeros(0, np.int64), np.zeros(0, np.float32))
        terms = [t for t in set(lexical_terms(text)) if t in self.postings and t not in QUERY_FRAME_WORDS]
        if not terms or len(self.ids) == 0:
            return empty
        scores = np.zeros(len(self.ids), dtype=np.float32)
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * self.lengths / max(self.avg_length, 1e-9))
        for term in terms:
            rows, tf = self.postings[term]
            scores[rows] += np.float32(self.idf(term)) * tf * (BM25_K1 + 1.0) / (tf + norm[rows])
        if allow is not None:
            scores[~np.isin(self.ids, np.asarray(allow, dtype=np.int64))] = 0.0
        hit = np.flatnonzero(scores > 0)
        if not len(hit):
            return empty
        order = np.lexsort((self.ids[hit], -scores[hit]))[:k]
        return LexicalHits(self.ids[hit[order]], scores[hit[order]])
