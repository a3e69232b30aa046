"""Checks on the text a user hands to a knowledge base: captions, tags, passages, ids."""

from __future__ import annotations

import re
from typing import Any, Mapping, MutableMapping, Sequence

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: object, what: str) -> str | None:
    """`value` as text to store: None stays None; a str with characters that are not valid
    Unicode (lone surrogates, as Python keeps undecodable bytes) has them replaced by U+FFFD.
    Raises TypeError naming `what` for anything but str or None (bytes: decode them first)."""
    if value is None:
        return None
    if not isinstance(value, str):
        hint = "; decode it first, e.g. value.decode('utf-8', 'replace')" if isinstance(value, (bytes, bytearray)) else ""
        raise TypeError(f"{what} must be a str or None; got {type(value).__name__}{hint}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = _SURROGATE.sub("\ufffd", value)
    return value


def tags_arg(tags: Any) -> tuple[str, ...]:
    """`tags` as a tuple of clean strings. Raises TypeError for a bare str (it would be stored
    one tag per character): wrap it in a list."""
    if isinstance(tags, (str, bytes)):
        raise TypeError(f"tags must be a list of strings, not one string; wrap it: tags=[{tags!r}]")
    out = []
    for tag in tags:
        text = clean_text(tag, "each tag")
        if text:
            out.append(text)
    return tuple(out)


def group_arg(value: Any, what: str) -> tuple[str, float | None] | None:
    """A `sequence=` / `view=` argument as (group id, position or None); None for None. ValueError otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        return value, None
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return str(value[0]), float(value[1])
    raise ValueError(f"{what} must be a group id (str) or (group_id, position); got {value!r}")


MAX_QUESTION_CHARS = 8192
"""The longest question `Kira.ask` / `Kira.retrieve` take (and `kira serve` by default). A question
is a sentence or a paragraph; the sentence encoder reads 256 tokens of it (MAX_ENCODED_CHARS is
the same 8192), while a 5 MB question held a reader thread for 50 s in the lexical and critic
stages. Longer text is refused with the limit named, never cut silently."""

MAX_METADATA_DEPTH = 16  # nesting levels of lists / objects in one document's metadata


def question_arg(question: Any, *, limit: int = MAX_QUESTION_CHARS) -> str:
    """`question` as the stripped text a query runs with ('' for None). Raises TypeError for a
    non-str, ValueError naming the limit for text longer than `limit` characters."""
    text = (clean_text(question, "question") or "").strip()
    if len(text) > limit:
        raise ValueError(f"the question is {len(text):,} characters, over the limit of {limit:,}; "
                         "shorten it (a question, not a document: store long text with add_document)")
    return text


_BAD_ID = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")


def doc_id_arg(doc_id: Any) -> str:
    """`doc_id` checked as a document id: a non-empty str without control characters (C0, C1), line or
    paragraph separators, or invisible formatting characters (zero-width, bidirectional overrides and
    isolates, BOM) that make one id print as another. '/' is allowed (folder ingest makes ``sub/name``).
    Raises TypeError for a non-str, ValueError naming the character's code point otherwise."""
    if not isinstance(doc_id, str):
        raise TypeError(f"doc_id must be a str; got {type(doc_id).__name__}")
    if not doc_id.strip():
        raise ValueError("doc_id is empty; give a non-empty id")
    bad = _BAD_ID.search(doc_id) or _SURROGATE.search(doc_id)
    if bad:
        raise ValueError(f"doc_id {doc_id!r} contains U+{ord(bad.group()):04X}, a control or invisible formatting "
                         "character; use printable characters only")
    return doc_id


def metadata_arg(metadata: Any, *, max_depth: int = MAX_METADATA_DEPTH) -> dict[str, Any]:
    """`metadata` as a JSON-ready dict: string keys; values None, bool, int, finite float, str, lists
    (tuples become lists) and objects of these, nested at most `max_depth` deep. numpy scalars become
    the Python number or bool they hold (``np.float32(0.5)`` -> 0.5); nothing is turned into a string.
    Raises TypeError naming the key path for anything else (a set: use a sorted list; an array: .tolist();
    bytes, objects), ValueError for NaN or infinity or nesting deeper than `max_depth`."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping of str -> value; got {type(metadata).__name__}")
    cleaned: dict[str, Any] = _json_value(dict(metadata), "metadata", max_depth)
    return cleaned


def _json_value(value: Any, where: str, depth: int) -> Any:
    import math

    import numpy as np

    if isinstance(value, (np.bool_, np.integer, np.floating)):
        value = value.item()  # the Python bool / int / float it holds
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value}, which JSON cannot store; use a finite number or None")
        return value
    if isinstance(value, (Mapping, list, tuple)):
        if depth <= 0:
            raise ValueError(f"{where} is nested deeper than {MAX_METADATA_DEPTH} levels; flatten it")
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise TypeError(f"{where} has the key {key!r} ({type(key).__name__}); metadata keys are str")
                out[key] = _json_value(item, f"{where}[{key!r}]", depth - 1)
            return out
        return [_json_value(item, f"{where}[{i}]", depth - 1) for i, item in enumerate(value)]
    hint = {"set": "; use a sorted list", "frozenset": "; use a sorted list", "ndarray": "; use .tolist()",
            "bytes": "; decode it to str"}.get(type(value).__name__, "; use str, a number, a list or a dict")
    raise TypeError(f"{where} is a {type(value).__name__}, which metadata cannot store{hint}")


def check_items(items: Sequence[MutableMapping[str, Any]]) -> None:
    """Check each item a write stores (`encode_batch`, the one path every write takes): its doc id
    (`doc_id_arg`) and its metadata (`metadata_arg`, converted in place). Raises what they raise,
    before anything is encoded or stored."""
    for item in items:
        doc_id_arg(item["doc_id"])
        if "metadata" in item:
            item["metadata"] = metadata_arg(item["metadata"])
