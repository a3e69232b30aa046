"""Checks on the text a user hands to a knowledge base: captions, tags, passages, ids."""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: Any, what: str) -> str | None:
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
