"""What an evidence item SHOWS, apart from how it LOOKS.

A knowledge base describes an image with the user's caption, tags and metadata, the words
an OCR reader found in it, the labels an image classifier gave it (with their probability)
and, after all of these, the measurements of the default describer: brightness, contrast,
colours, texture and salient regions (kira.knowledge_base.chunker's ``describe``).
The first group says what the image shows; the measurements say only how it looks.

`shown(item)` splits an `EvidenceItem` into the two: `Shown` holds the content fields,
read from the item's provenance (``caption``, ``tags``, ``metadata``, ``labels``,
``text_read``, a passage's ``label``), and `Shown.looks` the appearance parts of its
summary. An item that does not come from a knowledge base-described image (no
``described_by`` in its provenance: evidence built by hand, a text passage) keeps its
summary as written content.

Reasoning (the template generator, the relevance judge, the verifier) reads what an item
shows; its appearance becomes a claim only when the question asks about appearance
(`asks_about_appearance`: a generic list of English appearance words, which a
`DomainProfile` may extend with ``appearance_words``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kira.text.pieces import appearance_parts, appearance_words, describer_parts
from kira.text.shows import shown_as_text
from kira.text.tokens import content_tokens, stem
from kira.reasoning.types import EvidenceItem

APPEARANCE_WORDS = frozenset(
    """dark darker darkest bright brighter brightest light pale dim brightness contrast contrasty colour colours
    color colors coloured colored colourful colorful greyscale grayscale grey gray black white red orange yellow
    green cyan blue purple magenta pink brown texture textured smooth rough pattern striped stripes vertical
    horizontal diagonal appearance look looks looking""".split()
)
"""General English words that ask how an image looks (not what it shows)."""


@dataclass(frozen=True)
class Shown:
    """What one evidence item shows (content) and how it looks (appearance).

    caption: the user's caption ("" when none). passage: a text passage's own words.
    tags: the user's tags. metadata: the user's metadata. labels: (name, probability) of the
    image classifier, most probable first. text_read: lines an OCR reader found in the image.
    written: content text not from a knowledge base's fields (hand-built evidence).
    looks: the describer's appearance sentences, without their figures. location: where a
    region or patch lies ("region at x 10-80, y 5-60 of 512x512"), "" for a document.
    """

    caption: str = ""
    passage: str = ""
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    labels: tuple[tuple[str, float], ...] = ()
    text_read: tuple[str, ...] = ()
    written: str = ""
    looks: tuple[str, ...] = ()
    location: str = ""

    @property
    def human_text(self) -> str:
        """What a person wrote about it: the caption, a passage, or hand-built evidence text ("" if none)."""
        return self.caption or self.passage or self.written

    @property
    def certainty(self) -> float:
        """How sure its source is, 0-1: 1 for what a person wrote (caption, passage, tags, metadata) or OCR read;
        the top label's probability for an image known only by its classifier labels; 0 when nothing says."""
        if self.human_text or self.tags or self.text_read or self.metadata:
            return 1.0
        if self.labels:
            return float(min(1.0, max(0.0, self.labels[0][1])))
        return 0.0

    @property
    def empty(self) -> bool:
        """Whether nothing recorded says what it shows (only how it looks)."""
        return not (self.human_text or self.tags or self.labels or self.text_read or self.metadata)

    def content_text(self) -> str:
        """Everything it shows as one text (for relevance and the critic; kira.text.shows); "" when `empty`."""
        return shown_as_text(self.human_text, self.tags, [name for name, _ in self.labels], self.text_read, self.metadata)

    def looks_text(self) -> str:
        """Its appearance in words only (no figures), e.g. 'a dark, high-contrast greyscale image'; "" if unmeasured."""
        return "; ".join(self.looks)


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value.strip(),) if value.strip() else ()
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return ()


def _labels(value: object) -> tuple[tuple[str, float], ...]:
    out: list[tuple[str, float]] = []
    for entry in value if isinstance(value, (list, tuple)) else ():
        if isinstance(entry, Mapping) and entry.get("label"):
            try:
                out.append((str(entry["label"]), float(entry.get("p", 0.0))))
            except (TypeError, ValueError):
                continue
    return tuple(sorted(out, key=lambda lp: -lp[1]))


def _text_read(value: object) -> tuple[str, ...]:
    lines = []
    for entry in value if isinstance(value, (list, tuple)) else ():
        text = entry.get("text") if isinstance(entry, Mapping) else entry
        if isinstance(text, str) and text.strip():
            lines.append(text.strip())
    return tuple(lines)


def shown(item: EvidenceItem) -> Shown:
    """Split `item` into what it shows and how it looks (module docstring)."""
    prov = item.provenance if isinstance(item.provenance, Mapping) else {}
    caption = prov.get("caption") if isinstance(prov.get("caption"), str) else ""
    passage = prov.get("label") if item.level == "passage" and isinstance(prov.get("label"), str) else ""
    given = prov.get("metadata")
    metadata: Mapping[str, object] = given if isinstance(given, Mapping) else {}
    described = "described_by" in prov  # a knowledge base wrote the summary from these fields
    if not described:
        written = "" if (caption or passage) else item.summary.strip()
        return Shown(caption=(caption or "").strip(), passage=(passage or "").strip(), tags=_strings(prov.get("tags")),
                     metadata=dict(metadata), labels=_labels(prov.get("labels")),
                     text_read=_text_read(prov.get("text_read")), written=written)
    location, measured = describer_parts(item.summary, caption or "")
    looks = [words for words in map(appearance_words, measured) if words]
    return Shown(caption=(caption or "").strip(), passage=(passage or "").strip(), tags=_strings(prov.get("tags")),
                 metadata=dict(metadata), labels=_labels(prov.get("labels")),
                 text_read=_text_read(prov.get("text_read")), looks=tuple(looks), location=location)


def asks_about_appearance(question: str, extra_words: Sequence[str] = ()) -> bool:
    """Whether `question` asks how an image looks: one of its content words is an appearance word
    (`APPEARANCE_WORDS`, plus `extra_words` from the profile)."""
    words = APPEARANCE_WORDS | {w.lower() for w in extra_words}
    stems = {stem(w) for w in words}
    return any(t in words or stem(t) in stems for t in content_tokens(question or ""))


def shows_text(item: EvidenceItem) -> str:
    """What `item` shows as one text ("" when nothing recorded says): what relevance is judged against."""
    return shown(item).content_text()


__all__ = ["APPEARANCE_WORDS", "Shown", "appearance_parts", "appearance_words", "asks_about_appearance", "shown",
           "shows_text"]
