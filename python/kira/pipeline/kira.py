"""`Kira`: the five stages end to end over a knowledge base, one `ask` at a time.

`Kira.ask` runs an ordered list of stage objects (kira.pipeline.state.Stage) over one
immutable `QueryState`, timing each by its name. The six ablation variants are six stage
lists (kira.pipeline.variants); ``Kira(kb, stages=[...])`` runs a list of the user's own.
What the pipeline knows of the user's domain is the knowledge base's `DomainProfile`
(kira.profile); with the empty default it adds nothing to a question.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Mapping, Sequence

import numpy.typing as npt

from kira.config import KiraConfig
from kira.images import ImageLike
from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.models.stack import ModelStack
from kira.pipeline.question import NamedDocuments
from kira.pipeline.request import check_count, check_request, retrieval_part, run_stages
from kira.pipeline.result import Result, Setup, build_result, empty_answer
from kira.pipeline.retrieve import Retrieval
from kira.pipeline.variants import variant_stages
from kira.profile import DomainProfile, as_profile
from kira.query_state import QuestionAnalysis, Stage, StageContext
from kira.reasoning.critic import SimilarityCritic
from kira.reasoning.protocols import EvidenceCritic, Generator
from kira.reasoning.verifier import GroundingVerifier
from kira.retrieval.fine import FINE_LEVELS

log = logging.getLogger(__name__)


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
        kb: KnowledgeBaseLike,
        *,
        models: ModelStack | None = None,
        generator: Generator | None = None,
        config: KiraConfig | None = None,
        profile: DomainProfile | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        critic: EvidenceCritic | None = None,
        max_per_document: int = 2,
        stages: Sequence[Stage] | None = None,
        analysis: QuestionAnalysis | None = None,
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
        self.generator: Generator = generator
        self.config: KiraConfig = config or kb.config
        self._critic = critic
        self._verifier: GroundingVerifier | None = None
        self.max_per_document = max_per_document
        self.stages = list(stages) if stages is not None else None
        if self.stages is not None:
            bad = [s for s in self.stages if not isinstance(s, Stage)]
            if bad:
                raise TypeError(f"stages must have a name and run(state, ctx); got {bad!r}")
        self.analysis: QuestionAnalysis = analysis or NamedDocuments()

    @property
    def models(self) -> ModelStack:
        """The model stack queries are encoded with (the knowledge base's unless one was given)."""
        return self._models if self._models is not None else self.kb.models

    @property
    def critic(self) -> EvidenceCritic:
        """The Critic stage's critic: the one given, else the stack's own, else a `SimilarityCritic`."""
        if self._critic is None:
            from kira.grounding.stack_critic import StackCritic

            stack_critic = getattr(self.models, "critic", None)
            if stack_critic is not None:
                self._critic = StackCritic(stack_critic, self.config.grounding.critic_threshold)
            else:
                self._critic = SimilarityCritic(self.models.text, self.config.grounding)
        return self._critic

    @property
    def verifier(self) -> GroundingVerifier:
        """The Verify stage's grounding verifier, over the stack's text encoder."""
        if self._verifier is None:
            self._verifier = GroundingVerifier(self.models.text, self.config.grounding)
        return self._verifier

    def warm(self) -> dict[str, float]:
        """Pick up new commits, then build now what the first `ask` after a commit would otherwise
        build: the knowledge base's derived views (`KnowledgeBase.warm`), the chunks a crop is searched
        against, the names a question may use (`KnowledgeBase.identifier_postings`), and the profile's
        concept vectors (loading the model stack if nothing has yet).
        Returns {part: seconds}. Answers are the same with or without it.
        """
        seconds = self.kb.warm()
        steps: dict[str, Callable[[], object]] = {
            "fine_levels": lambda: self.kb.level_ids(FINE_LEVELS),
            "document_level": lambda: self.kb.level_ids(["document"]),  # how many documents feedback may average
            "identifiers": lambda: self.kb.identifier_postings(""),  # the names a question may use (per commit)
            "concepts": lambda: self.models.text.encode(list(self.profile.concepts)) if self.profile.concepts else None,
            "relevance": self._warm_relevance,  # probe phrases and the classifier's label names, encoded once
        }
        for name, build in steps.items():
            start = time.perf_counter()
            build()
            seconds[name] = time.perf_counter() - start
        return seconds

    def _warm_relevance(self) -> None:
        from kira.grounding.answer_relevance import label_vocabulary, relevance_judge

        encoder = getattr(self.models, "text", None)
        if encoder is not None and callable(getattr(encoder, "encode", None)):
            words = tuple(getattr(self.profile, "appearance_words", ()) or ())
            relevance_judge(encoder, words, label_vocabulary(self.models)).warm()

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
        request = check_request(question, image, top_k=top_k, variant=variant, levels=levels,
                                missing="ask needs a question, an image, or both")
        kb = self.kb
        kb.refresh()
        allow = kb.level_ids(request.levels) if request.levels is not None else None
        state = request.state(allow, {"variant": variant, "notes": []})
        stages = self.stage_list(variant)
        timings: dict[str, float] = {}
        if self._empty():
            state = empty_answer(state)
        else:
            state, timings = run_stages(state, self._context(grounding=True, thumbnails=bool(thumbnails)), stages)
        timings["total"] = sum(timings.values())
        setup = Setup(variant, stages, self.config, self.profile, self.generator, self.models, self.kb.adapter)
        return build_result(state, setup, timings)

    def retrieve(
        self,
        question: str | None = None,
        *,
        image: ImageLike | None = None,
        vector: npt.ArrayLike | None = None,
        space: str = "visual",
        top_k: int = 10,
        variant: str = "full",
        levels: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        doc_ids: Sequence[str] | None = None,
        per_document: int | None = None,
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
        per_document: at most this many hits of one document (1: one hit per image, so top_k is not
            spent on an image and its own regions); None (default): any number.

        Raises ValueError for no question, image or vector, a question over MAX_QUESTION_CHARS
        (kira.knowledge_base.inputs, 8192 characters), an unknown variant or level, top_k or per_document
        not an integer >= 1, an unusable image, or a vector and what it replaces together; `VectorError` (a
        ValueError) for a vector of the wrong dimension, with NaN or inf, or all zeros.
        """
        from kira.pipeline.retrieve import allowed_ids, check_vector, retrieve

        if per_document is not None:
            per_document = check_count("per_document", per_document, also=" (or None for no limit)")
        if isinstance(tags, str) or isinstance(doc_ids, str):
            raise TypeError("tags and doc_ids are lists of strings, not one string; wrap it: tags=[tag]")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping of key -> required value; got {type(metadata).__name__}")
        request = check_request(question, image, top_k=top_k, variant=variant, levels=levels,
                                missing="retrieve needs a question, an image or a vector", has_vector=vector is not None)
        if vector is not None and ((space == "visual" and request.pixels is not None) or
                                   (space == "text" and request.question)):
            what = "image" if space == "visual" else "question"
            raise ValueError(f"a {space} vector takes the place of the {what}'s; pass one of them, not both")
        kb = self.kb
        kb.refresh()
        if self._empty():
            return Retrieval(())  # an empty knowledge base
        unit = check_vector(kb, vector, space) if vector is not None else None
        allow = allowed_ids(kb, request.levels, metadata, tags, doc_ids)
        stages = retrieval_part(self.stage_list(variant))
        return retrieve(self._context(grounding=False), stages, request, vector=unit, space=space, allow=allow,
                        per_document=per_document)

    def _empty(self) -> bool:
        """Whether the knowledge base holds nothing to search yet (no index of either space)."""
        return self.kb.index("visual") is None and self.kb.index("text") is None

    def _context(self, *, grounding: bool, thumbnails: bool = True) -> StageContext:
        """What the stages read; with `grounding`, the critic and verifier too (built on first use)."""
        models = self.models
        critic = self.critic if grounding else None
        verifier = self.verifier if grounding else None
        return StageContext(kb=self.kb, models=models, config=self.config, profile=self.profile,
                            generator=self.generator, analysis=self.analysis, critic=critic, verifier=verifier,
                            critic_shares_query_encoder=_encodes_with(critic, models),
                            verifier_shares_query_encoder=_encodes_with(verifier, models),
                            max_per_document=self.max_per_document, thumbnails=thumbnails)


def _encodes_with(part: object, models: ModelStack) -> bool:
    """Whether a critic's or verifier's text encoder is the stack's own: then the query encoding's question
    vector and the knowledge base's stored piece vectors are in its space. Decided here, where they are
    built, so that no stage compares encoders."""
    return part is not None and getattr(part, "encoder", None) is getattr(models, "text", False)
