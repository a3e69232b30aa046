"""A domain profile: everything kira knows about a user's domain, as the user's data.

kira's library code holds no domain knowledge. Vocabulary, caption conventions, concept
banks and prompts come from a `DomainProfile` the user supplies (an object, or a TOML or
JSON file), stored with the knowledge base (``profile.json``). The default profile is
empty, and an empty profile adds nothing: no query expansion concepts, no captioner
prompt, no bookkeeping patterns, no comparison or position vocabulary.

File schema (every key optional; TOML shown, JSON takes the same keys)::

    name = "radiology"                       # a label for cards and logs
    concepts = ["hairline crack", ...]      # concept bank for query expansion
    captioner_prompt = "A weld inspection photo showing"  # lead-in when a query image is described
    section_heads = ["findings", "impression"]  # "Findings: ..." heads cut from sentences
    bookkeeping_patterns = ["^reported by\\b"]  # regexes (case-insensitive) marking a
                                             # sentence as bookkeeping, not content
    identifier_pattern = "[a-z]{1,2}\\d{3,}"   # one token that names a record (P001): a
                                             # sentence of >= 20% such tokens is bookkeeping
    question_words = ["photo", "scan"]      # words that say how to ask, not what about
    comparison_words = ["changed", "differ"] # words that make a question a comparison
    change_words = ["increased", "new"]      # words of statements that report a change
    position_axes = [["left", "right"], ["upper", "lower"]]  # where a finding sits

Words are compared after kira's stemmer (`kira.text.tokens.stem`), so
"changed" also matches "change" and "changes".
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

PROFILE_FILE = "profile.json"
"""Where a knowledge base keeps its profile, inside its directory."""


def _words(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise TypeError(f"profile field {key!r} must be a list of strings; got {type(value).__name__}")
    out = []
    for v in value:
        if not isinstance(v, str):
            raise TypeError(f"profile field {key!r} must hold strings; got {v!r}")
        if v.strip():
            out.append(" ".join(v.split()))
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class DomainProfile:
    """A user's domain knowledge (see the module docstring for each field). Immutable."""

    name: str = ""  # a label for cards and logs; "" for the default
    concepts: tuple[str, ...] = ()  # concept bank for query expansion (KIRA stage 2)
    captioner_prompt: str = ""  # BLIP-2 style lead-in when the captioner describes a query image (not at ingest)
    section_heads: tuple[str, ...] = ()  # report heads cut off a sentence ("findings", "impression")
    bookkeeping_patterns: tuple[str, ...] = ()  # regexes: a matching sentence is bookkeeping, not content
    identifier_pattern: str = ""  # regex for one token naming a record; mostly-identifier sentences are bookkeeping
    question_words: tuple[str, ...] = ()  # domain words of a question that say how to ask ("scan")
    comparison_words: tuple[str, ...] = ()  # a question holding one asks for a comparison
    change_words: tuple[str, ...] = ()  # a statement holding one reports a change
    position_axes: tuple[tuple[str, ...], ...] = ()  # mutually exclusive places ("left", "right")
    _compiled: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for key in ("name", "captioner_prompt", "identifier_pattern"):
            if not isinstance(getattr(self, key), str):
                raise TypeError(f"profile field {key!r} must be a string; got {type(getattr(self, key)).__name__}")
        for key in ("concepts", "section_heads", "bookkeeping_patterns", "question_words", "comparison_words",
                    "change_words"):
            object.__setattr__(self, key, _words(getattr(self, key), key))
        axes = []
        for axis in self.position_axes:
            words = _words(axis, "position_axes")
            if len(words) < 2:
                raise ValueError(f"each position axis needs at least two words; got {list(axis)!r}")
            axes.append(words)
        object.__setattr__(self, "position_axes", tuple(axes))
        compiled = []
        for pattern in self.bookkeeping_patterns:
            try:
                compiled.append(re.compile(pattern, re.I))
            except re.error as exc:
                raise ValueError(f"bookkeeping pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        object.__setattr__(self, "_compiled", tuple(compiled))
        if self.identifier_pattern:
            try:
                re.compile(self.identifier_pattern)
            except re.error as exc:
                raise ValueError(f"identifier_pattern {self.identifier_pattern!r} is not a valid regular expression: "
                                 f"{exc}") from exc

    @property
    def empty(self) -> bool:
        """True when the profile adds nothing (every field at its default)."""
        return self == DomainProfile()

    def is_bookkeeping(self, sentence: str) -> bool:
        """Whether `sentence` matches one of the profile's bookkeeping patterns."""
        return any(p.search(sentence) for p in self._compiled)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        return json.loads(json.dumps(out))  # tuples -> lists

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DomainProfile:
        """A profile from a mapping with the schema's keys; unknown keys raise ValueError naming them."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a profile must be a mapping of the schema's keys; got {type(data).__name__}")
        known = {f.name for f in fields(cls) if f.init}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown profile keys {sorted(unknown)}; the schema's keys are {sorted(known)}")
        return cls(**dict(data))

    @classmethod
    def load(cls, path: str | os.PathLike) -> DomainProfile:
        """Read a profile file: ``.toml`` or ``.json`` (by suffix). Errors name the file."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read profile {path}: {exc}") from exc
        try:
            if path.suffix.lower() == ".toml":
                data = _toml().loads(raw.decode("utf-8"))
            elif path.suffix.lower() == ".json":
                data = json.loads(raw.decode("utf-8"))
            else:
                raise ValueError("use a .toml or .json file")
            return cls.from_dict(data)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise ValueError(f"profile {path} is not valid: {exc}") from exc

    def save(self, path: str | os.PathLike) -> None:
        """Write the profile as JSON, atomically (temp file + rename)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)


def _toml() -> Any:
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError as exc:
            raise ValueError("reading a TOML profile on Python 3.10 needs `pip install tomli`; or use JSON") from exc
    return tomllib


def as_profile(value: DomainProfile | Mapping[str, Any] | str | os.PathLike | None) -> DomainProfile:
    """A `DomainProfile` from a profile, a mapping, a file path, or None (the empty profile)."""
    if value is None:
        return DomainProfile()
    if isinstance(value, DomainProfile):
        return value
    if isinstance(value, Mapping):
        return DomainProfile.from_dict(value)
    if isinstance(value, (str, os.PathLike)):
        return DomainProfile.load(value)
    raise TypeError(f"profile must be a DomainProfile, a mapping or a file path; got {type(value).__name__}")


__all__ = ["DomainProfile", "PROFILE_FILE", "as_profile"]
