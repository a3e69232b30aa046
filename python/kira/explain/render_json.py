"""Rationale card -> JSON, with a documented schema.

The output is one object; `JSON_SCHEMA` (JSON Schema draft 2020-12 subset) documents
every key. ``schema_version`` changes its major number on any breaking change.
Thumbnails are not embedded (see the HTML card); boxes are. `validate` is a small
checker for the subset of JSON Schema used here, so no dependency is needed to check
a card.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from kira.reasoning.types import Answer, Claim, EvidenceItem

if TYPE_CHECKING:
    from kira.explain.card import RationaleCard

SCHEMA_VERSION = "1.2"  # 1.1: notice, answer.confidence, answer.abstained; 1.2: evidence[].match

_NUM_OR_NULL: dict[str, Any] = {"type": ["number", "null"]}
_INT_LIST: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}
_STR_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}

_EVIDENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["number", "chunk_id", "doc_id", "level", "score", "paths", "summary", "provenance", "box"],
    "properties": {
        "number": {"type": "integer", "minimum": 0, "description": "cited as [Evidence N]; 0 = never numbered (dropped)"},
        "chunk_id": {"type": "integer"},
        "doc_id": {"type": "string"},
        "level": {"enum": ["document", "region", "patch", "passage"]},
        "score": {"type": "number", "description": "retrieval score after fusion / re-ranking (the best = 1); it "
                  "ranks items and does not say they match the question: see match"},
        "match": {**_NUM_OR_NULL, "description": "0-1: how far what the item shows matches the question (0.5 and "
                  "above answers it; docs/reasoning.md); null when unmeasured (an image query, dropped items)"},
        "paths": {**_STR_LIST, "description": "retrieval paths: visual, text, fine, hopN, temporal, ..."},
        "summary": {"type": "string"},
        "provenance": {"type": "object", "description": "source, caption, tags, metadata, ..."},
        "box": {
            "type": ["array", "null"],
            "items": {"type": "integer"},
            "minItems": 4,
            "maxItems": 4,
            "description": "x0, y0, x1, y1 in document-image pixels",
        },
    },
}

_CLAIM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["text", "citations", "invalid_citations", "s_sim", "s_attn", "grounding", "hallucination_risk"],
    "properties": {
        "text": {"type": "string"},
        "citations": _INT_LIST,
        "invalid_citations": {**_INT_LIST, "description": "cited numbers not in the pack"},
        "s_sim": _NUM_OR_NULL,
        "s_attn": _NUM_OR_NULL,
        "grounding": {**_NUM_OR_NULL, "description": "w_sim * s_sim + w_attn * s_attn; null if unverified"},
        "hallucination_risk": {"type": "boolean"},
        "lead": {"type": "string", "description": "where the text opens by naming what it is about (a temporal "
                 "sequence's member and place); the verifier checks what follows it; absent when none"},
    },
}

JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "kira rationale card",
    "type": "object",
    "required": [
        "notice",
        "schema_version",
        "question",
        "has_query_image",
        "variant",
        "answer",
        "evidence",
        "dropped",
        "expansions",
        "hops",
        "stop_reason",
        "critic",
        "timings_ms",
        "config",
        "completeness",
        "missing_fields",
    ],
    "properties": {
        "notice": {
            "type": ["object", "null"],
            "description": "what the card opens with: kind 'nomatch' (the answer abstained) or 'low' (low "
                           "confidence), and its text; null when neither",
            "required": ["kind", "text"],
            "properties": {"kind": {"enum": ["nomatch", "low"]}, "text": {"type": "string"}},
        },
        "schema_version": {"type": "string", "const": SCHEMA_VERSION},
        "question": {"type": ["string", "null"]},
        "has_query_image": {"type": "boolean"},
        "variant": {"type": "string"},
        "answer": {
            "type": "object",
            "required": ["text", "plain_text", "reasoning", "claims", "citations", "grounding", "generator",
                         "confidence", "abstained"],
            "properties": {
                "text": {"type": "string", "description": "with inline [Evidence N] markers"},
                "plain_text": {"type": "string", "description": "markers removed"},
                "reasoning": {**_STR_LIST, "description": "the reasoning trace, one step per entry"},
                "claims": {"type": "array", "items": _CLAIM_SCHEMA},
                "citations": {**_INT_LIST, "description": "sorted unique evidence numbers cited"},
                "grounding": {**_NUM_OR_NULL, "description": "mean claim grounding"},
                "generator": {"type": "string"},
                "confidence": {**_NUM_OR_NULL, "description": "0-1: how far the evidence supports an answer; "
                               "null when unmeasured (docs/reasoning.md)"},
                "abstained": {"type": "boolean", "description": "true when nothing in the evidence matches the "
                              "question: the text says so and names the closest items"},
            },
        },
        "evidence": {"type": "array", "items": _EVIDENCE_SCHEMA},
        "dropped": {"type": "array", "items": _EVIDENCE_SCHEMA, "description": "removed by the critic"},
        "similar_cases": {
            "type": "object",
            "description": "evidence about other subjects than the one the question names, and what the answer "
                           "says of it apart (never in the subject's claims)",
            "required": ["subject", "evidence", "claims"],
            "properties": {"subject": {"type": "string"}, "evidence": {"type": "array", "items": _EVIDENCE_SCHEMA},
                           "claims": {"type": "array", "items": _CLAIM_SCHEMA}},
        },
        "expansions": _STR_LIST,
        "hops": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["hop", "ids", "confidence"],
                "properties": {"hop": {"type": "integer"}, "ids": _INT_LIST, "confidence": _NUM_OR_NULL},
            },
        },
        "stop_reason": {"type": ["string", "null"]},
        "critic": {
            "type": ["object", "null"],
            "required": ["kept", "dropped", "threshold"],
            "properties": {
                "kept": {"type": ["array", "integer"], "description": "chunk ids kept (or a count)"},
                "dropped": {"type": ["array", "integer"], "description": "chunk ids dropped (or a count)"},
                "threshold": {"type": "number"},
            },
        },
        "timings_ms": {"type": "object", "additionalProperties": {"type": "number"}},
        "config": {"type": "object"},
        "completeness": {"type": "number", "minimum": 0, "maximum": 1},
        "missing_fields": _STR_LIST,
    },
}
"""The documented shape of `to_dict` / `to_json` output."""


def jsonable(value: object) -> Any:
    """`value` made JSON-safe: numpy scalars/arrays to Python, tuples to lists, non-finite floats to None, else str."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return str(value)


def _num(value: float | None) -> float | None:
    return None if value is None else jsonable(float(value))


def evidence_dict(item: EvidenceItem, match: float | None = None) -> dict[str, Any]:
    """One evidence item as JSON-able data (no thumbnail); `match` as in `RationaleCard.matches`."""
    return {
        "number": item.number,
        "chunk_id": item.chunk_id,
        "doc_id": item.doc_id,
        "level": item.level,
        "score": jsonable(item.score) if math.isfinite(item.score) else 0.0,
        "paths": list(item.paths),
        "summary": item.summary,
        "provenance": jsonable(dict(item.provenance or {})),
        "box": None if item.box is None else list(item.box),
        "match": _num(match),
    }


def claim_dict(claim: Claim) -> dict[str, Any]:
    """One claim as JSON-able data."""
    return {
        "text": claim.text,
        "citations": list(claim.citations),
        "invalid_citations": list(claim.invalid_citations),
        "s_sim": _num(claim.s_sim),
        "s_attn": _num(claim.s_attn),
        "grounding": _num(claim.grounding),
        "hallucination_risk": bool(claim.hallucination_risk),
        **({"lead": claim.lead} if claim.lead else {}),
    }


def answer_dict(answer: Answer) -> dict[str, Any]:
    """An answer as JSON-able data."""
    return {
        "text": answer.text,
        "plain_text": answer.plain_text,
        "reasoning": list(answer.reasoning),
        "claims": [claim_dict(c) for c in answer.claims],
        "citations": list(answer.citations),
        "grounding": _num(answer.grounding),
        "generator": answer.generator,
        "confidence": _num(answer.confidence),
        "abstained": bool(answer.abstained),
    }


def _hop_dict(hop: Mapping[str, Any], position: int) -> dict[str, Any]:
    out: dict[str, Any] = jsonable(dict(hop))
    out["hop"] = int(hop.get("hop", position))
    out["ids"] = [int(i) for i in hop.get("ids", [])]
    conf = hop.get("confidence")
    out["confidence"] = None if conf is None else jsonable(float(conf))
    return out


def _critic_dict(critic: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if critic is None:
        return None
    out: dict[str, Any] = jsonable(dict(critic))
    out.setdefault("kept", [])
    out.setdefault("dropped", [])
    threshold = out.get("threshold")
    out["threshold"] = float(threshold) if isinstance(threshold, (int, float)) else 0.0
    return out


def to_dict(card: RationaleCard) -> dict[str, Any]:
    """The card as data following `JSON_SCHEMA`; it opens with the notice (no match, low confidence)."""
    from kira.explain.card import notice

    kind, text = notice(card)
    return {
        "notice": {"kind": kind, "text": text} if kind else None,
        "schema_version": SCHEMA_VERSION,
        "question": card.question if card.question else None,
        "has_query_image": card.query_image is not None,
        "variant": card.variant,
        "answer": answer_dict(card.answer),
        "evidence": [evidence_dict(i, card.matches.get(i.number)) for i in card.pack.items],
        "similar_cases": {"subject": card.pack.subject, "evidence": [evidence_dict(i) for i in card.pack.similar],
                          "claims": [claim_dict(c) for c in card.answer.similar]},
        "dropped": [evidence_dict(i) for i in card.pack.dropped],
        "expansions": [str(e) for e in card.expansions],
        "hops": [_hop_dict(h, n) for n, h in enumerate(card.hops, start=1)],
        "stop_reason": card.stop_reason,
        "critic": _critic_dict(card.critic),
        "timings_ms": {str(k): float(v) for k, v in card.timings.items() if math.isfinite(float(v))},
        "config": jsonable(dict(card.config)),
        "completeness": card.completeness(),
        "missing_fields": card.missing_fields(),
    }


def to_json(card: RationaleCard, *, indent: int | None = 2) -> str:
    """The card as a JSON string (keys in schema order, strict JSON: no NaN)."""
    return json.dumps(to_dict(card), indent=indent, allow_nan=False, ensure_ascii=False)


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_ok(value: object, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


def validate(instance: object, schema: Mapping[str, Any] = JSON_SCHEMA, path: str = "$") -> list[str]:
    """Errors of `instance` against `schema` (empty list = valid).

    Supports the keywords `JSON_SCHEMA` uses: type, enum, const, required, properties,
    additionalProperties (as a schema), items, minItems, maxItems, minimum, maximum.
    """
    errors: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if not any(_type_ok(instance, k) for k in kinds):
            return [f"{path}: expected {'/'.join(kinds)}, got {type(instance).__name__}"]
    if "enum" in schema and instance not in schema["enum"]:
        errors.append(f"{path}: {instance!r} not in {schema['enum']}")
    if "const" in schema and instance != schema["const"]:
        errors.append(f"{path}: expected {schema['const']!r}, got {instance!r}")
    if isinstance(instance, (int, float)) and not isinstance(instance, bool):
        if "minimum" in schema and instance < schema["minimum"]:
            errors.append(f"{path}: {instance} < minimum {schema['minimum']}")
        if "maximum" in schema and instance > schema["maximum"]:
            errors.append(f"{path}: {instance} > maximum {schema['maximum']}")
    if isinstance(instance, dict):
        for key in schema.get("required", []):
            if key not in instance:
                errors.append(f"{path}: missing required key {key!r}")
        props = schema.get("properties", {})
        for key, value in instance.items():
            if key in props:
                errors.extend(validate(value, props[key], f"{path}.{key}"))
            elif isinstance(schema.get("additionalProperties"), Mapping):
                errors.extend(validate(value, schema["additionalProperties"], f"{path}.{key}"))
    if isinstance(instance, list):
        if "minItems" in schema and len(instance) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(instance) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for n, value in enumerate(instance):
                errors.extend(validate(value, schema["items"], f"{path}[{n}]"))
    return errors
