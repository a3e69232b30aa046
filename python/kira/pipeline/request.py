"""One validation for `Kira.ask` and `Kira.retrieve`, and the one stage loop they both run.

`check_request` turns what a caller passed into a `Request` (or raises the error saying what
to fix); `run_stages` hands a `QueryState` through a stage list and times each stage by its
name; `retrieval_part` is the part of a stage list before the evidence is selected (what
retrieval alone runs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from kira.grounding.stages import SelectEvidence
from kira.images import ImageLike, load_image
from kira.pipeline.variants import VARIANTS
from kira.query_state import QueryState, Stage, StageContext


@dataclass(frozen=True)
class Request:
    """A checked query: the question (stripped; "" for none), the decoded image, and where to search."""

    question: str
    pixels: np.ndarray | None
    top_k: int
    variant: str
    levels: tuple[str, ...] | None

    def state(self, allow: np.ndarray | None, trace: Mapping[str, Any]) -> QueryState:
        """The query state the first stage receives, searching within `allow` (None: every chunk)."""
        return QueryState(question=self.question, pixels=self.pixels, top_k=self.top_k, levels=self.levels,
                          allow=allow, trace=dict(trace))


def check_count(name: str, value: object, *, also: str = "") -> int:
    """`value` as an int >= 1; ValueError naming `name` (and `also`, what else it may be) otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1{also}; got {value!r}")
    return int(value)


def check_request(question: str | bytes | None, image: ImageLike | None, *, top_k: object, variant: str,
                  levels: Sequence[str] | str | None, missing: str, has_vector: bool = False) -> Request:
    """The checked `Request`. Raises ValueError for an unknown variant or level, top_k not an integer >= 1,
    a question over MAX_QUESTION_CHARS characters, an unusable image, and (with the caller's `missing`
    message) for no question, no image and no vector."""
    from kira.knowledge_base.chunker import levels_arg
    from kira.knowledge_base.inputs import question_arg
    from kira.reasoning.types import LEVELS

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {VARIANTS}")
    k = check_count("top_k", top_k)
    text = question_arg(question)  # undecodable bytes become U+FFFD; over MAX_QUESTION_CHARS: ValueError
    pixels = load_image(image) if image is not None else None
    if not text and pixels is None and not has_vector:
        raise ValueError(missing)
    return Request(text, pixels, k, variant, levels_arg(levels, LEVELS) if levels is not None else None)


def run_stages(state: QueryState, ctx: StageContext, stages: Sequence[Stage]) -> tuple[QueryState, dict[str, float]]:
    """The state after every stage in order, and stage name -> milliseconds (summed over repeats)."""
    timings: dict[str, float] = {}
    for stage in stages:
        start = time.perf_counter()
        state = stage.run(state, ctx)
        timings[stage.name] = timings.get(stage.name, 0.0) + (time.perf_counter() - start) * 1000.0
    return state, timings


def retrieval_part(stages: Sequence[Stage]) -> list[Stage]:
    """The stages of a list before it selects evidence (`SelectEvidence`): what retrieval alone runs."""
    out: list[Stage] = []
    for stage in stages:
        if isinstance(stage, SelectEvidence):
            break
        out.append(stage)
    return out


__all__ = ["Request", "check_count", "check_request", "retrieval_part", "run_stages"]
