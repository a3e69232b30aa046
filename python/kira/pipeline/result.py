"""What `Kira.ask` returns: the `Result` and its rationale card, built from the final query state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.explain.card import RationaleCard
from kira.models.stack import ModelStack
from kira.profile import DomainProfile
from kira.query_state import QueryState, Stage
from kira.reasoning.protocols import Generator
from kira.reasoning.types import Answer, EvidencePack


@dataclass
class Result:
    """What `Kira.ask` returns.

    answer: the verified `Answer` (text with [Evidence N] citations, claims, reasoning; similar
        cases, when the question names a subject, in ``answer.similar``).
    evidence: the `EvidencePack` the generator saw (``dropped``: what the critic removed;
        ``similar``: other subjects' evidence).
    card: the `kira.explain.RationaleCard` (``to_text()``, ``to_json()``, ``to_html()``).
    timings: stage -> milliseconds. trace: what each stage did (rankings, hops, notes).
    """

    question: str | None
    answer: Answer
    evidence: EvidencePack
    card: RationaleCard
    timings: dict[str, float] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.answer.text


@dataclass(frozen=True)
class Setup:
    """What produced an answer besides its state: for the card's configuration summary."""

    variant: str
    stages: Sequence[Stage]
    config: KiraConfig
    profile: DomainProfile
    generator: Generator
    models: ModelStack | None
    adapter: object | None


def empty_answer(state: QueryState) -> QueryState:
    """The answer for a knowledge base that holds nothing yet: it says so, and how to fill it."""
    text = ("The knowledge base is empty: add images with `kira ingest KB FOLDER` or "
            "KnowledgeBase.add_image, then ask again.")
    answer = Answer(text=text, reasoning=("The knowledge base holds no documents, so nothing was searched.",),
                    generator="none")
    return state.evolve(pack=EvidencePack.from_items(state.question, ()), answer=answer)


def build_result(state: QueryState, setup: Setup, timings: dict[str, float]) -> Result:
    """The `Result` and its card for the final `state`."""
    pack = state.pack if state.pack is not None else EvidencePack.from_items(state.question, state.kept)
    answer = state.answer if state.answer is not None else setup.generator.generate(state.question, pack)
    trace = dict(state.trace)
    trace["stages"] = [s.name for s in setup.stages]
    trace["rankings"] = [
        {"path": r.label, "query": r.query, "weight": round(r.weight, 4), "n": int(len(r.ids)),
         "top": r.ids[:5].tolist()} for r in state.rankings.in_fusion_order()
    ]
    hops = [dict(h) for h in state.hops]
    trace["hops"] = hops
    trace["stop_reason"] = state.stop_reason
    trace.setdefault("expansions", [])
    card = RationaleCard(
        question=state.question or None,
        answer=answer,
        pack=pack,
        variant=setup.variant,
        query_image=_thumb(state.pixels) if state.pixels is not None else None,
        expansions=[text for text, _, _ in state.expansions],
        hops=list(hops),
        stop_reason=state.stop_reason,
        critic=dict(state.critic) if state.critic is not None else None,
        timings={k: round(v, 3) for k, v in timings.items()},
        config=config_summary(setup, state.top_k, state.levels),
        near=tuple(n for n, _, _ in state.relevance.near) if state.relevance is not None else (),
        unheld=state.relevance.unheld if state.relevance is not None else "",
    )
    return Result(state.question or None, answer, pack, card, timings, trace)


def config_summary(setup: Setup, top_k: int, levels: Sequence[str] | None) -> dict[str, Any]:
    """The constants and models an answer was produced with, as the card shows them."""
    cfg, stack = setup.config, setup.models
    describe = getattr(setup.generator, "describe", None)
    return {
        "variant": setup.variant,
        "stages": [s.name for s in setup.stages],
        "profile": setup.profile.name or ("(empty)" if setup.profile.empty else "(unnamed)"),
        "top_k": top_k,
        "levels": list(levels) if levels is not None else "all",
        "alpha": cfg.retrieval.visual_weight,
        "rrf_k": cfg.retrieval.rrf_k,
        "beta": cfg.hops.beta,
        "max_hops": cfg.hops.max_hops,
        "hop_confidence": cfg.hops.confidence,
        "critic_threshold": cfg.grounding.critic_threshold,
        "hallucination_threshold": cfg.grounding.hallucination_threshold,
        "generator": describe() if callable(describe) else type(setup.generator).__name__,
        "image_encoder": _identity(stack, "image"),
        "text_encoder": _identity(stack, "text"),
        "adapter": type(setup.adapter).__name__ if setup.adapter is not None else None,
    }


def _identity(stack: ModelStack | None, part: str) -> str | None:
    """Which model a stack runs for `part`: its identity (name/dimension) where it has one, else the class name."""
    if stack is None or getattr(stack, part, None) is None:
        return None
    if hasattr(stack, "identity"):
        return stack.identity().get(part)
    return type(getattr(stack, part)).__name__


def _thumb(image: np.ndarray, side: int = 160) -> np.ndarray:
    from PIL import Image

    im = Image.fromarray(image)
    im.thumbnail((side, side))
    return np.asarray(im.convert("RGB"), dtype=np.uint8)


__all__ = ["Result", "Setup", "build_result", "config_summary", "empty_answer"]
