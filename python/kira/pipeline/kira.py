"""`Kira`: the five stages end to end over a knowledge base, one `ask` at a time.

Variants (cumulative, the paper's ablation; `VARIANTS`):

===================  ===============================================================
visual_only          path A only: the visual index, queried with the image and/or
                     the question embedded into image space
dual_path            + path B, the description index (dense) and BM25 over document
                     texts, fused by weighted RRF; with a query image the question's
                     rankings re-rank inside the image's nearest documents at a weight
                     x the question's specificity; documents the question names by
                     identifier lead (kira.pipeline.anchoring)
query_expansion      + captioner hypotheses and concept-bank concepts as extra queries,
                     and (text queries) visual pseudo-relevance feedback
multi_hop            + residual hops (core), compound-document expansion (core) and,
                     for a comparison question about a sequence whose documents state
                     no change, the change of the sequence it resembles
                     (kira.pipeline.change) or, without one, its change measured along
                     its finding (kira.pipeline.measured_change)
grounded             + ReAG critic over the evidence (it reads the question and the
                     query image's description; named documents are kept) and the
                     grounding verifier
full                 + ReAG fine-grained retrieval (a query crop re-ranks the regions
                     of the image's nearest documents) and the cross-encoder re-rank
                     when the stack has one
===================  ===============================================================

Every variant generates with the same generator. Variants below "grounded" run neither
critic nor verifier, so their claims carry no grounding scores.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.images import ImageLike, load_image
from kira.pipeline.concepts import ConceptBank, builtin_banks
from kira.pipeline.change import analogy_item, change_by_analogy, recorded_changes, temporal_sequences
from kira.pipeline.evidence import build_items
from kira.pipeline.fine import FINE_LEVELS, choose_region, fine_ranking
from kira.pipeline.hops import expand_groups, residual_hop_rankings
from kira.pipeline.measured_change import (change_along_finding, document_space, documented_change_shares, measured_item,
                                           statement_documents)
from kira.pipeline.view_reading import (documents_by_row, document_statements_by_doc, members_by_group, read_views,
                                       tags_by_doc)
from kira.pipeline.anchoring import anchor_to_image, feedback_ranking, lead_with_identifiers
from kira.pipeline.query import (Fused, Ranking, encode_query, expand_query, fuse, lexical_rankings, rerank,
                                 text_rankings, visual_rankings)
from kira.reasoning.types import Answer, EvidencePack
from kira.reasoning.view_agreement import asks_agreement

log = logging.getLogger(__name__)

VARIANTS: tuple[str, ...] = ("visual_only", "dual_path", "query_expansion", "multi_hop", "grounded", "full")


@dataclass
class Result:
    """What `Kira.ask` returns.

    answer: the verified `Answer` (text with [Evidence N] citations, claims, reasoning).
    evidence: the `EvidencePack` the generator saw (``dropped``: what the critic removed).
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


class _Timer:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1000.0


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
    generator: a `kira.reasoning.Generator` (default `TemplateGenerator()`).
    config: constants (default: the knowledge base's config).
    concept_banks: `ConceptBank`s for query expansion, or names of built-in banks
        ("radiology", "circuits", "remote_sensing", "histopathology"); default: all four.
    critic: an `EvidenceCritic` (default: the stack's critic if any, else `SimilarityCritic`).
    max_per_document: at most this many chunks of one document in the evidence pack.
    """

    def __init__(
        self,
        kb: Any,
        *,
        models: Any = None,
        generator: Any = None,
        config: KiraConfig | None = None,
        concept_banks: Sequence[ConceptBank | str] | None = None,
        critic: Any = None,
        max_per_document: int = 2,
    ) -> None:
        self.kb = kb
        self._models = models
        if generator is None:
            from kira.reasoning import TemplateGenerator

            generator = TemplateGenerator()
        self.generator = generator
        self.config = config or kb.config
        self.concept_banks = _resolve_banks(concept_banks)
        self._critic = critic
        self._verifier: Any = None
        if max_per_document < 1:
            raise ValueError(f"max_per_document must be >= 1; got {max_per_document}")
        self.max_per_document = max_per_document

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
        """Pick up new commits, then build now what the first `ask` after a commit would
        otherwise build: the knowledge base's derived views (`KnowledgeBase.warm`), the
        temporal sequences, recorded and documented changes, the caption-statement indexes
        and the raw visual space that comparison and view-agreement questions read, the
        chunks a crop is searched against, and the concept banks' vectors (loading the model
        stack if nothing has yet).
        Returns {part: seconds} (about 0 for what was already built).

        A writer calls it after `kb.commit()`, a reader now and then, off the request path;
        answers are the same with or without it.
        """
        seconds = self.kb.warm()
        steps = {
            "temporal_sequences": lambda: temporal_sequences(self.kb),
            "recorded_changes": lambda: recorded_changes(self.kb),
            "statement_documents": lambda: statement_documents(self.kb),
            "document_space": lambda: document_space(self.kb),
            "documented_change_shares": lambda: documented_change_shares(self.kb, self.config),
            "document_statements_by_doc": lambda: document_statements_by_doc(self.kb),
            "documents_by_row": lambda: documents_by_row(self.kb),
            "members_by_group": lambda: members_by_group(self.kb),
            "tags_by_doc": lambda: tags_by_doc(self.kb),
            "fine_levels": lambda: self.kb.level_ids(FINE_LEVELS),
            "concept_banks": lambda: [bank.vectors(self.models.text) for bank in self.concept_banks],
        }
        for name, build in steps.items():
            start = time.perf_counter()
            build()
            seconds[name] = time.perf_counter() - start
        return seconds

    def ask(
        self,
        question: str | None = None,
        *,
        image: ImageLike | None = None,
        top_k: int = 5,
        variant: str = "full",
        levels: Sequence[str] | None = None,
    ) -> Result:
        """Answer `question` (text), about `image`, or both, from the knowledge base.

        Parameters
        ----------
        top_k: evidence items handed to the generator (before the critic's cut).
        variant: one of `VARIANTS`.
        levels: granularity selection: restrict retrieval to chunks at these levels
            ("document", "region", "patch", "passage"); None = all.

        Returns a `Result`. An empty knowledge base gives an answer that says no
        evidence was found. Raises ValueError for no question and no image, an
        unknown variant or level, top_k < 1, or an unusable image.
        """
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {VARIANTS}")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1; got {top_k}")
        question = (question or "").strip()
        pixels = load_image(image) if image is not None else None
        if not question and pixels is None:
            raise ValueError("ask needs a question, an image, or both")
        level = VARIANTS.index(variant)
        cfg = self.config
        timer = _Timer()
        trace: dict[str, Any] = {"variant": variant, "notes": []}
        kb = self.kb
        kb.refresh()
        allow = None
        if levels is not None:
            from kira.reasoning.types import LEVELS

            bad = set(levels) - set(LEVELS)
            if bad:
                raise ValueError(f"unknown levels {sorted(bad)}; choose from {LEVELS}")
            allow = kb.level_ids(levels)
        empty = kb.index("visual") is None and kb.index("text") is None
        expansions: list[tuple[str, np.ndarray, float]] = []
        hop_info: dict[str, Any] = {"hops": [], "stop_reason": None}
        rankings: list[Ranking] = []
        fused = Fused(np.zeros(0, np.int64), np.zeros(0, np.float32), {}, {})
        if not empty:
            stack = self.models
            with timer.stage("encode"):
                q = encode_query(kb, stack, question, pixels)
            trace["notes"] += list(q.notes)
            with timer.stage("visual_search"):
                visual = visual_rankings(kb, q, cfg.retrieval, allow)
                if level == 0 and pixels is not None:
                    visual = visual[:1]  # the image alone, as the paper's visual-only baseline
                rankings += visual
            if level >= 2:
                with timer.stage("expansion"):
                    expansions = expand_query(stack, q, pixels, self.concept_banks, cfg.retrieval)
            if level >= 1:
                with timer.stage("text_search"):
                    from_question = visual[1:] if pixels is not None else []
                    from_question += text_rankings(kb, q, expansions, cfg.retrieval, allow)
                    from_question += lexical_rankings(kb, q, cfg.retrieval, allow)
                    if pixels is not None and visual:
                        specificity = kb.lexical().specificity(question or q.text_query)
                        trace["question_specificity"] = round(specificity, 4)
                        scale = specificity if cfg.retrieval.anchor_by_specificity else 1.0
                        from_question = anchor_to_image(kb, visual[0], from_question, scale, cfg.retrieval)
                    rankings = rankings[:1] + from_question if pixels is not None else rankings + from_question
            if level >= 5 and pixels is not None and cfg.retrieval.fine_grained:
                with timer.stage("fine"):
                    crop = choose_region(kb, stack, pixels, q, cfg)
                    if crop is not None:
                        # coarse + fine: the crop re-ranks regions of the image's nearest documents
                        rankings += anchor_to_image(kb, rankings[0], [fine_ranking(kb, crop, cfg, allow)], 1.0,
                                                    cfg.retrieval)
                        trace["fine_box"] = crop.box
            with timer.stage("fusion"):
                fused = self._fuse(rankings, question, level, allow)
                feedback = None
                if level >= 2 and pixels is None:  # an image is already a visual query; feedback serves text
                    lexical = next((r for r in rankings if r.path == "lexical"), None)
                    feedback = feedback_ranking(kb, fused, cfg.retrieval, allow, lexical)
                    if feedback is not None:
                        rankings.append(feedback)
            if level >= 3:
                with timer.stage("hops"):
                    # Hops start from the best visual query there is: the image, the feedback mean, the question.
                    start = next((v for v in (q.image_vector, feedback.vector if feedback else None, q.text_in_image)
                                  if v is not None), None)
                    if start is not None:
                        hops = residual_hop_rankings(kb, start, cfg, allow)
                        rankings += hops.rankings
                        hop_info = {"hops": hops.hops, "stop_reason": hops.stop_reason}
            if feedback is not None or level >= 3:
                with timer.stage("fusion"):
                    fused = self._fuse(rankings, question, level, allow)
            if level >= 3:
                with timer.stage("compound"):
                    trace["compound_added"] = expand_groups(kb, fused, cfg)
            if level >= 5 and getattr(stack, "reranker", None) is not None:
                with timer.stage("rerank"):
                    head = fused.ids[: cfg.retrieval.rerank_candidates_per_result * top_k]
                    desc = {cid: row.description for cid, row in kb.store.chunks(head).items()}
                    trace["reranked"] = rerank(stack, question, fused, desc, cfg.retrieval, len(head))
        trace["rankings"] = [
            {"path": r.path, "query": r.query, "weight": round(r.weight, 4), "n": int(len(r.ids)),
             "top": r.ids[:5].tolist()} for r in rankings
        ]
        with timer.stage("evidence"):
            candidates, rows = _diverse(kb, fused, self.max_per_document, (cfg.retrieval.critic_candidates_per_result * top_k) if level >= 4 else top_k)
            items = build_items(kb, [c for c, _ in candidates], [s for _, s in candidates], fused.paths, fused.cosine,
                                rows=rows)
        critic_card = None
        dropped: list[Any] = []
        if level >= 4:
            with timer.stage("critic"):
                decision = self.critic.filter(self._critic_query(question, pixels), items, cfg.grounding.critic_threshold)
                decision = _keep_named(decision, items)
            from kira.explain.card import critic_summary

            critic_card = critic_summary(decision)
            kept = list(decision.kept)[:top_k]
            dropped = list(decision.dropped)
            # The card's "kept" is what reached the pack; relevant candidates past top_k are counted apart.
            critic_card["kept"] = [item.chunk_id for item in kept]
            critic_card["beyond_top_k"] = len(decision.kept) - len(kept)
            critic_card["candidates"] = len(items)
        else:
            kept = items[:top_k]
        if level >= 3 and (cfg.hops.change_by_analogy or cfg.hops.change_along_finding):
            with timer.stage("change"):
                analogy = change_by_analogy(kb, question, kept, cfg) if cfg.hops.change_by_analogy else None
                lent = analogy_item(kb, analogy) if analogy is not None else None
                if lent is not None:
                    kept = list(kept) + [lent]
                    trace["change"] = analogy.note
                elif cfg.hops.change_along_finding:
                    measured = change_along_finding(kb, question, kept, cfg)
                    item = measured_item(kb, measured) if measured is not None else None
                    if item is not None:
                        kept = list(kept) + [item]
                        trace["change"] = measured.note
        if level >= 3 and cfg.hops.read_silent_views and asks_agreement(question):
            with timer.stage("views"):
                kept, read = read_views(kb, question, kept, cfg)
                if read:
                    trace["views_read"] = read
        pack = EvidencePack.from_items(question, kept, dropped)
        with timer.stage("generate"):
            answer = self.generator.generate(question, pack)
        if level >= 4:
            with timer.stage("verify"):
                answer = self.verifier.verify(answer, pack)
        timings = dict(timer.ms)
        timings["total"] = sum(timer.ms.values())
        from kira.explain.card import RationaleCard

        card = RationaleCard(
            question=question or None,
            answer=answer,
            pack=pack,
            variant=variant,
            query_image=_thumb(pixels) if pixels is not None else None,
            expansions=[text for text, _, _ in expansions],
            hops=hop_info["hops"],
            stop_reason=hop_info["stop_reason"],
            critic=critic_card,
            timings={k: round(v, 3) for k, v in timings.items()},
            config=self._config_summary(variant, top_k, levels),
        )
        trace.update(hop_info)
        trace["expansions"] = [(t, round(s, 4)) for t, _, s in expansions]
        return Result(question or None, answer, pack, card, timings, trace)

    def _critic_query(self, question: str, pixels: np.ndarray | None) -> str:
        """What the critic judges relevance against: the question, plus the query image's description.

        ReAG's critic sees the image and the question; a text critic sees the image through the captioner.
        """
        captioner = getattr(self.models, "captioner", None)
        if pixels is None or not question or captioner is None:
            return question
        description = captioner.caption(pixels)
        return f"{question} {description}".strip() if description else question

    def _fuse(self, rankings: list[Ranking], question: str, level: int, allow: np.ndarray | None) -> Fused:
        """Weighted RRF; from the dual path on, documents named by an identifier in the question lead."""
        fused = fuse(rankings, self.config.retrieval)
        if level >= 1:
            lead_with_identifiers(self.kb, fused, question, allow)
        return fused

    def _config_summary(self, variant: str, top_k: int, levels: Sequence[str] | None) -> dict[str, Any]:
        cfg = self.config
        stack = self.models
        describe = getattr(self.generator, "describe", None)
        return {
            "variant": variant,
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
            "image_encoder": type(stack.image).__name__ if stack is not None else None,
            "text_encoder": type(stack.text).__name__ if stack is not None else None,
            "adapter": type(self.kb.adapter).__name__ if self.kb.adapter is not None else None,
        }


def _resolve_banks(banks: Sequence[ConceptBank | str] | None) -> list[ConceptBank]:
    builtin = {b.name: b for b in builtin_banks()}
    if banks is None:
        return list(builtin.values())
    out = []
    for bank in banks:
        if isinstance(bank, str):
            if bank not in builtin:
                raise ValueError(f"unknown built-in concept bank {bank!r}; choose from {sorted(builtin)} or pass a ConceptBank")
            out.append(builtin[bank])
        else:
            out.append(bank)
    return out


def _diverse(kb: Any, fused: Fused, per_doc: int, n: int) -> tuple[list[tuple[int, float]], dict[int, Any]]:
    """The best `n` fused (chunk id, score) with at most `per_doc` from any one document, and the rows read."""
    if not len(fused.ids):
        return [], {}
    head = fused.ids[: max(n * 4, 50)].tolist()
    rows = kb.store.chunks(head)
    counts: dict[str, int] = {}
    out: list[tuple[int, float]] = []
    for cid, score in zip(head, fused.scores[: len(head)].tolist()):
        row = rows.get(cid)
        if row is None:
            continue
        if counts.get(row.doc_id, 0) >= per_doc:
            continue
        counts[row.doc_id] = counts.get(row.doc_id, 0) + 1
        out.append((cid, score))
        if len(out) >= n:
            break
    return out, rows


def _keep_named(decision: Any, items: Sequence[Any]) -> Any:
    """The critic's decision with every item the question names by identifier kept (input order preserved).

    A document the question names ("patient P017") is relevant by the question's own words.
    """
    rescued = {i.chunk_id for i in decision.dropped if "identifier" in (i.paths or ())}
    if not rescued:
        return decision
    import dataclasses

    kept_ids = {i.chunk_id for i in decision.kept} | rescued
    note = (decision.note + " " if decision.note else "") + f"{len(rescued)} items named by identifier kept"
    return dataclasses.replace(decision, kept=tuple(i for i in items if i.chunk_id in kept_ids),
                               dropped=tuple(i for i in items if i.chunk_id not in kept_ids), note=note)


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
