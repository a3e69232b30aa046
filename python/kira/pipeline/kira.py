"""`Kira`: the five stages end to end over a knowledge base, one `ask` at a time.

`Kira.ask` runs an ordered list of stage objects (kira.pipeline.state.Stage) over one
immutable `QueryState`, timing each by its name. The six ablation variants are six stage
lists (kira.pipeline.variants); ``Kira(kb, stages=[...])`` runs a list of the user's own.
What the pipeline knows of the user's domain is the knowledge base's `DomainProfile`
(kira.profile); with the empty default it adds nothing to a question.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.images import ImageLike, load_image
from kira.pipeline.fine import FINE_LEVELS
from kira.pipeline.question import NamedDocuments
from kira.pipeline.retrieve import Retrieval
from kira.pipeline.state import QueryState, Stage, StageContext
from kira.pipeline.variants import VARIANTS, variant_stages
from kira.profile import DomainProfile, as_profile
from kira.reasoning.types import Answer, EvidencePack

log = logging.getLogger(__name__)


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
    card: Any
    timings: dict[str, float] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.answer.text


def _thumb(image: np.ndarray, side: int = 160) -> np.ndarray:
    from PIL import Image

    im = Image.fromarray(image)
    im.thumbnail((side, side))
    return np.asarray(im.convert("RGB"), dtype=np.uint8)


class Kira:
    """Ask questions of a knowledge base.

    Parameters
    ----------
    kb: a `kira.KnowledgeBase`.
    models: the model stack (default: the knowledge base's).
    generator: a `kira.reasoning.Generator` (default `TemplateGenerator(profile=...)`).
    config: constants (default: the knowledge base's config).
    profile: the user's `DomainProfile` (or a mapping or a .toml/.json file); default: the
        knowledge base's (`KnowledgeBase.profile`, empty unless one was stored).
    critic: an `EvidenceCritic` (default: the stack's critic if any, else `SimilarityCritic`).
    max_per_document: at most this many chunks of one document in the evidence pack.
    stages: a custom stage list; `ask` then runs it whatever variant is named.
    analysis: the question analysis (default `NamedDocuments`; `NoAnalysis` names nothing).
    """

    def __init__(
        self,
        kb: Any,
        *,
        models: Any = None,
        generator: Any = None,
        config: KiraConfig | None = None,
        profile: Any = None,
        critic: Any = None,
        max_per_document: int = 2,
        stages: Sequence[Stage] | None = None,
        analysis: Any = None,
    ) -> None:
        if max_per_document < 1:
            raise ValueError(f"max_per_document must be >= 1; got {max_per_document}")
        self.kb = kb
        if models is not None and hasattr(kb, "check_models"):
            kb.check_models(models)  # vectors of another image encoder are not comparable: refused here
        self._models = models
        self.profile: DomainProfile = as_profile(profile) if profile is not None else kb.profile
        if generator is None:
            from kira.reasoning import TemplateGenerator

            generator = TemplateGenerator(profile=self.profile)
        self.generator = generator
        self.config = config or kb.config
        self._critic = critic
        self._verifier: Any = None
        self.max_per_document = max_per_document
        self.stages = list(stages) if stages is not None else None
        if self.stages is not None:
            bad = [s for s in self.stages if not isinstance(s, Stage)]
            if bad:
                raise TypeError(f"stages must have a name and run(state, ctx); got {bad!r}")
        self.analysis = analysis or NamedDocuments()

    @property
    def models(self) -> Any:
        return self._models if self._models is not None else self.kb.models

    @property
    def critic(self) -> Any:
        if self._critic is None:
            stack_critic = getattr(self.models, "critic", None)
            if stack_critic is not None:
                self._critic = _StackCritic(stack_critic, self.config.grounding.critic_threshold)
            else:
                from kira.reasoning import SimilarityCritic

                self._critic = SimilarityCritic(self.models.text, self.config.grounding)
        return self._critic

    @property
    def verifier(self) -> Any:
        if self._verifier is None:
            from kira.reasoning import GroundingVerifier

            self._verifier = GroundingVerifier(self.models.text, self.config.grounding)
        return self._verifier

    def warm(self) -> dict[str, float]:
        """Pick up new commits, then build now what the first `ask` after a commit would otherwise
        build: the knowledge base's derived views (`KnowledgeBase.warm`), the chunks a crop is searched
        against, and the profile's concept vectors (loading the model stack if nothing has yet).
        Returns {part: seconds}. Answers are the same with or without it.
        """
        seconds = self.kb.warm()
        steps = {
            "fine_levels": lambda: self.kb.level_ids(FINE_LEVELS),
            "concepts": lambda: self.models.text.encode(list(self.profile.concepts)) if self.profile.concepts else None,
        }
        for name, build in steps.items():
            start = time.perf_counter()
            build()
            seconds[name] = time.perf_counter() - start
        return seconds

    def stage_list(self, variant: str = "full") -> list[Stage]:
        """The stages `ask` runs for `variant` (the custom list when one was given)."""
        if self.stages is not None:
            return list(self.stages)
        return variant_stages(variant, critic_candidates_per_result=self.config.retrieval.critic_candidates_per_result)

    def ask(
        self,
        question: str | None = None,
        *,
        image: ImageLike | None = None,
        top_k: int = 5,
        variant: str = "full",
        levels: Sequence[str] | None = None,
        thumbnails: bool = True,
    ) -> Result:
        """Answer `question` (text), about `image`, or both, from the knowledge base.

        Parameters
        ----------
        top_k: evidence items handed to the generator (before the critic's cut).
        variant: one of `VARIANTS` (ignored when the `Kira` was given its own stages).
        levels: restrict retrieval to chunks at these levels ("document", "region",
            "patch", "passage"); None = all.
        thumbnails: give each evidence item its document's thumbnail (what the HTML card shows;
            decoding them is about a millisecond per document). False leaves them None and
            changes nothing else.

        Returns a `Result`. An empty knowledge base gives an answer that says so. Raises
        ValueError for no question and no image, a question over MAX_QUESTION_CHARS (8192) characters,
        an unknown variant or level, top_k not an
        integer >= 1, or an unusable image.
        """
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {VARIANTS}")
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
            raise ValueError(f"top_k must be an integer >= 1; got {top_k!r}")
        from kira.knowledge_base.inputs import question_arg

        question = question_arg(question)  # undecodable bytes become U+FFFD; over MAX_QUESTION_CHARS: ValueError
        pixels = load_image(image) if image is not None else None
        if not question and pixels is None:
            raise ValueError("ask needs a question, an image, or both")
        kb = self.kb
        kb.refresh()
        allow = None
        if levels is not None:
            levels = self._check_levels(levels)
            allow = kb.level_ids(levels)
        state = QueryState(question=question, pixels=pixels, top_k=int(top_k),
                           levels=tuple(levels) if levels is not None else None, allow=allow,
                           trace={"variant": variant, "notes": []})
        timings: dict[str, float] = {}
        empty = kb.index("visual") is None and kb.index("text") is None
        ctx = StageContext(kb=kb, models=None if empty else self.models, config=self.config, profile=self.profile,
                           generator=self.generator, critic=None if empty else self.critic,
                           verifier=None if empty else self.verifier, analysis=self.analysis,
                           max_per_document=self.max_per_document, thumbnails=bool(thumbnails))
        stages = self.stage_list(variant)
        if empty:
            state = _empty_answer(state)
        else:
            for stage in stages:
                start = time.perf_counter()
                state = stage.run(state, ctx)
                timings[stage.name] = timings.get(stage.name, 0.0) + (time.perf_counter() - start) * 1000.0
        timings["total"] = sum(timings.values())
        return self._result(state, variant, timings, stages)

    def retrieve(
        self,
        question: str | None = None,
        *,
        image: ImageLike | None = None,
        vector: Any = None,
        space: str = "visual",
        top_k: int = 10,
        variant: str = "full",
        levels: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        doc_ids: Sequence[str] | None = None,
    ) -> Retrieval:
        """Retrieval only: the chunks `ask` would draw its evidence from, without critic or generation.

        Runs the retrieval stages of `variant` (kira.pipeline.retrieve) and returns a `Retrieval`
        whose ``hits`` (chunk id, doc id, level, fused score, box, paths) are the fused list's first
        `top_k` chunks.

        Parameters
        ----------
        question, image: as in `ask`.
        vector: a raw query vector of the `space` index's dimension ('visual': in place of a query
            image's vector, so not with `image`; 'text': in place of the question's sentence vector,
            so not with `question`).
        levels: only chunks at these levels. metadata: only documents whose metadata holds every
            item. tags: only documents carrying every tag. doc_ids: only these documents.

        Raises ValueError for no question, image or vector, a question over MAX_QUESTION_CHARS
        (kira.knowledge_base.inputs, 8192 characters), an unknown variant or level, top_k not an
        integer >= 1, an unusable image, or a vector and what it replaces together; `VectorError` (a
        ValueError) for a vector of the wrong dimension, with NaN or inf, or all zeros.
        """
        from kira.knowledge_base.inputs import question_arg
        from kira.pipeline.retrieve import (
            allowed_ids,
            check_vector,
            retrieval_stages,
            retrieve,
        )

        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {VARIANTS}")
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
            raise ValueError(f"top_k must be an integer >= 1; got {top_k!r}")
        if isinstance(tags, str) or isinstance(doc_ids, str):
            raise TypeError("tags and doc_ids are lists of strings, not one string; wrap it: tags=[tag]")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping of key -> required value; got {type(metadata).__name__}")
        question = question_arg(question)
        pixels = load_image(image) if image is not None else None
        if not question and pixels is None and vector is None:
            raise ValueError("retrieve needs a question, an image or a vector")
        if vector is not None and ((space == "visual" and pixels is not None) or (space == "text" and question)):
            what = "image" if space == "visual" else "question"
            raise ValueError(f"a {space} vector takes the place of the {what}'s; pass one of them, not both")
        if levels is not None:
            levels = list(self._check_levels(levels))
        kb = self.kb
        kb.refresh()
        if kb.index("visual") is None and kb.index("text") is None:
            return Retrieval(())  # an empty knowledge base
        unit = check_vector(kb, vector, space) if vector is not None else None
        allow = allowed_ids(kb, levels, metadata, tags, doc_ids)
        ctx = StageContext(kb=kb, models=self.models, config=self.config, profile=self.profile,
                           generator=self.generator, critic=None, verifier=None, analysis=self.analysis,
                           max_per_document=self.max_per_document)
        stages = retrieval_stages(self.stage_list(variant))
        return retrieve(ctx, stages, question=question, pixels=pixels, vector=unit, space=space, top_k=int(top_k),
                        levels=levels, allow=allow)

    @staticmethod
    def _check_levels(levels: Sequence[str] | str) -> tuple[str, ...]:
        """`levels` as a tuple of known level names ("region" alone is one level); ValueError naming the
        unknown ones."""
        from kira.knowledge_base.chunker import levels_arg
        from kira.reasoning.types import LEVELS

        return levels_arg(levels, LEVELS)

    def _result(self, state: QueryState, variant: str, timings: dict[str, float], stages: list[Stage]) -> Result:
        from kira.explain.card import RationaleCard

        pack = state.pack if state.pack is not None else EvidencePack.from_items(state.question, state.kept)
        answer = state.answer if state.answer is not None else self.generator.generate(state.question, pack)
        trace = dict(state.trace)
        trace["stages"] = [s.name for s in stages]
        trace["rankings"] = [
            {"path": r.path, "query": r.query, "weight": round(r.weight, 4), "n": int(len(r.ids)),
             "top": r.ids[:5].tolist()} for r in state.rankings
        ]
        trace["hops"] = list(state.hops)
        trace["stop_reason"] = state.stop_reason
        trace.setdefault("expansions", [])
        card = RationaleCard(
            question=state.question or None,
            answer=answer,
            pack=pack,
            variant=variant,
            query_image=_thumb(state.pixels) if state.pixels is not None else None,
            expansions=[text for text, _, _ in state.expansions],
            hops=list(state.hops),
            stop_reason=state.stop_reason,
            critic=dict(state.critic) if state.critic is not None else None,
            timings={k: round(v, 3) for k, v in timings.items()},
            config=self._config_summary(variant, state.top_k, state.levels, stages),
        )
        return Result(state.question or None, answer, pack, card, timings, trace)

    def _config_summary(self, variant: str, top_k: int, levels: Sequence[str] | None,
                        stages: list[Stage]) -> dict[str, Any]:
        cfg = self.config
        stack = self.models
        describe = getattr(self.generator, "describe", None)
        return {
            "variant": variant,
            "stages": [s.name for s in stages],
            "profile": self.profile.name or ("(empty)" if self.profile.empty else "(unnamed)"),
            "top_k": top_k,
            "levels": list(levels) if levels is not None else "all",
            "alpha": cfg.retrieval.visual_weight,
            "rrf_k": cfg.retrieval.rrf_k,
            "beta": cfg.hops.beta,
            "max_hops": cfg.hops.max_hops,
            "hop_confidence": cfg.hops.confidence,
            "critic_threshold": cfg.grounding.critic_threshold,
            "hallucination_threshold": cfg.grounding.hallucination_threshold,
            "generator": describe() if callable(describe) else type(self.generator).__name__,
            "image_encoder": _identity(stack, "image"),
            "text_encoder": _identity(stack, "text"),
            "adapter": type(self.kb.adapter).__name__ if self.kb.adapter is not None else None,
        }


def _identity(stack: Any, part: str) -> str | None:
    """Which model a stack runs for `part`: its identity (name/dimension) where it has one, else the class name."""
    if stack is None or getattr(stack, part, None) is None:
        return None
    if hasattr(stack, "identity"):
        return stack.identity().get(part)
    return type(getattr(stack, part)).__name__


def _empty_answer(state: QueryState) -> QueryState:
    """The answer for a knowledge base that holds nothing yet: it says so, and how to fill it."""
    text = ("The knowledge base is empty: add images with `kira ingest KB FOLDER` or "
            "KnowledgeBase.add_image, then ask again.")
    answer = Answer(text=text, reasoning=("The knowledge base holds no documents, so nothing was searched.",),
                    generator="none")
    return state.evolve(pack=EvidencePack.from_items(state.question, ()), answer=answer)


class _StackCritic:
    """Adapts a model-layer `Critic` (relevance(question, texts)) to kira.reasoning's EvidenceCritic."""

    def __init__(self, critic: Any, threshold: float) -> None:
        self.inner = critic
        self.threshold = threshold

    def probabilities(self, question: str, items: Sequence[Any]) -> list[float]:
        if not items:
            return []
        return [float(p) for p in self.inner.relevance(question, [i.summary for i in items])]

    def filter(self, question: str, items: Sequence[Any], threshold: float | None = None):
        from kira.reasoning.critic import filter_by_probability

        return filter_by_probability(items, self.probabilities(question, items),
                                     self.threshold if threshold is None else threshold)
