"""What an image or passage shows as one text: the words a person wrote, then tags, classifier labels, text
read in it and metadata. The relevance judge and the critic compare a question with this text
(kira.reasoning.shown.Shown.content_text), and ingest stores its vector as a text piece
(kira.knowledge_base.writing), so an ask reads it instead of encoding it: both build it here."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def shown_as_text(human: str = "", tags: Iterable[str] = (), labels: Iterable[str] = (),
                  text_read: Iterable[str] = (), metadata: Mapping[str, Any] | None = None) -> str:
    """The parts that are present, in that order, joined by ". " (each without its trailing full stop):
    tags (sorted) and labels (most probable first) by ", ", text read by " ", metadata as "key value"
    pairs by ", " in key order (a store may give tags and keys back sorted); "" when nothing is recorded."""
    parts = [human] if human else []
    tags, labels, text_read = list(tags), list(labels), list(text_read)
    if tags:
        parts.append(", ".join(sorted(tags)))  # as a store gives them back
    if labels:
        parts.append(", ".join(labels))
    if text_read:
        parts.append(" ".join(text_read))
    if metadata:
        parts.append(", ".join(f"{k} {metadata[k]}" for k in sorted(metadata, key=str)))  # as stored: keys sorted
    return ". ".join(p.strip().rstrip(".") for p in parts if p.strip())


__all__ = ["shown_as_text"]
