"""Every constant of the KIRA and ReAG papers, in one typed configuration.

Field names follow the papers. A `KiraConfig` is stored with each knowledge base
(as JSON), so a reopened knowledge base answers with the constants it was built with.

Every field is checked at construction: its type from its annotation (an int is accepted
and stored as a float where a float is declared; a bool is never a number), its range
from `_f(default, lo, hi)` next to it (bounds inclusive). A bad value raises ConfigError
(a ValueError; ConfigTypeError, also a TypeError, for a wrong type) naming `section.field`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar


class ConfigError(ValueError):
    """A configuration value out of its range; the message names `section.field` and the range."""


class ConfigTypeError(ConfigError, TypeError):
    """A configuration value of the wrong type; the message names `section.field` and the type."""


@dataclass(frozen=True)
class _Range:
    lo: float | None = None
    hi: float | None = None
    choices: tuple[Any, ...] | None = None

    def check(self, where: str, value: Any) -> None:
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{where} must be one of {', '.join(map(str, self.choices))}; got {value!r}")
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            lo = "-inf" if self.lo is None else self.lo
            hi = "inf" if self.hi is None else self.hi
            raise ConfigError(f"{where} must be in [{lo}, {hi}]; got {value!r}")


def _f(default: Any, lo: float | None = None, hi: float | None = None, *, choices: tuple[Any, ...] | None = None) -> Any:
    """A dataclass field with its allowed range [lo, hi] (either side open when None) or choices."""
    return field(default=default, metadata={"range": _Range(lo, hi, choices)})


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_type(where: str, declared: Any, value: Any) -> Any:
    """`value` converted to the declared type (int -> float only), or ConfigTypeError."""
    if declared is bool:
        if not isinstance(value, bool):
            raise ConfigTypeError(f"{where} must be true or false (a bool); got {type(value).__name__} {value!r}")
        return value
    if declared is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigTypeError(f"{where} must be an integer; got {type(value).__name__} {value!r}"
                                  + (" (write it without quotes)" if isinstance(value, str) else ""))
        return value
    if declared is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigTypeError(f"{where} must be a number; got {type(value).__name__} {value!r}"
                                  + (" (write it without quotes)" if isinstance(value, str) else ""))
        if not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number; got {value!r}")
        return float(value)
    if isinstance(declared, type) and not isinstance(value, declared):
        raise ConfigTypeError(f"{where} must be a {declared.__name__}; got {type(value).__name__} {value!r}"
                              + (f" (use {declared.__name__}(**...) or KiraConfig.from_dict)" if isinstance(value, dict) else ""))
    return value


class _Checked:
    """Mixin for the config dataclasses: checks every field's type and range after __init__."""

    _section: ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = _hints(type(self))  # type: ignore[arg-type]  # a class is hashable
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            where = f"{self._section}.{f.name}" if self._section else f.name
            value = _check_type(where, hints.get(f.name), getattr(self, f.name))
            rng = f.metadata.get("range")
            if rng is not None:
                rng.check(where, value)
            if value is not getattr(self, f.name):
                object.__setattr__(self, f.name, value)


@dataclass(frozen=True)
class ChunkingConfig(_Checked):
    """Stage 1: hierarchical chunking (document -> region -> patch)."""

    _section: ClassVar[str] = "chunking"

    region_k_sigma: float = 0.5  # attention threshold: mean + k_sigma * std (KIRA)
    region_connectivity: int = _f(8, choices=(4, 8))  # 4 or 8-connected components on the attention grid
    region_min_cells: int = _f(1, 1)  # drop components smaller than this many grid cells
    max_regions: int = _f(8, 1)  # keep the highest-scoring regions per image
    patch_grid: int = _f(4, 1)  # patches form a patch_grid x patch_grid grid per image


@dataclass(frozen=True)
class RetrievalConfig(_Checked):
    """Stage 2: dual-path retrieval, fusion, re-ranking and query expansion."""

    _section: ClassVar[str] = "retrieval"

    visual_weight: float = _f(0.6, 0, 1)  # alpha: weight of path A (visual) in weighted RRF
    text_weight: float = _f(0.4, 0, 1)  # 1 - alpha: weight of path B (text)
    rrf_k: int = _f(60, 0)  # RRF constant k; ranks count from 1
    rerank_original_weight: float = _f(0.4, 0, 1)  # blended score = 0.4 * original + 0.6 * cross-encoder
    rerank_cross_weight: float = _f(0.6, 0, 1)
    candidates: int = _f(50, 1)  # results fetched per path before fusion
    expansion_hypotheses: int = _f(3, 0)  # chain-of-thought hypotheses from the captioner
    expansion_concepts: int = _f(3, 0)  # top concepts from the domain concept bank
    # kira's own fusion weights for the secondary rankings (not in the papers):
    expansion_weight_scale: float = _f(0.5, 0)  # an expansion ranks at text_weight * 0.5 * cos(expansion, question)
    caption_query_weight_scale: float = _f(0.0, 0)  # image-only asks described by the captioner (kira.retrieval.stages.EncodeQuery(describe_image=True); off in the six variants): path B searches with that description at text_weight x this. 0 by default: a description kira's own captioner writes restates the image through a lossier channel and only lowered image-only precision on real images (sklearn digits p@5 0.563 -> 0.550 at 0.5); a stack with a learned captioner (BLIP-2) may set it
    hop_weight_scale: float = _f(0.5, 0)  # hops after the first rank at visual_weight * 0.5
    fine_weight_scale: float = _f(0.5, 0)  # the query crop's ranking (ReAG fine-grained) ranks at visual_weight * 0.5
    rerank_candidates_per_result: int = _f(4, 1)  # the cross-encoder re-scores the top 4 * top_k fused
    critic_candidates_per_result: int = _f(2, 1)  # the critic sees 2 * top_k candidates
    bridge_weight_scale: float = _f(0.5, 0)  # the question mapped by the fitted text->image bridge ranks at visual_weight * 0.5
    lexical_weight_scale: float = _f(1.0, 0)  # path B's BM25 ranking of the question ranks at text_weight * 1.0
    anchor_documents: int = _f(10, 0)  # with a query image, question rankings re-rank inside its 10 nearest documents
    clear_match_margin: float = _f(0.5, 0, 1)  # with a query image, its nearest document leads the fused list when its cosine beats the runner-up's by >= 0.5 x the spread of the image's anchor_documents nearest (a copy, crop or mirror of it); 0 disables
    feedback_documents: int = _f(5, 0)  # pseudo-relevance feedback: the top 5 fused documents' mean re-queries path A
    feedback_min_score: float = _f(0.5, 0, 1)  # ... drawn from the BM25 matches scoring >= 0.5 x the best
    feedback_weight_scale: float = _f(2.0, 0)  # ... ranking at visual_weight * 2.0: a mean of relevant documents is the surest visual query
    named_feedback_weight_scale: float = _f(4.0, 0)  # ... times 4 when the mean is of the documents the question names (the subject itself)
    text_chunks_per_document: int = _f(2, 1)  # path B's dense search returns at most 2 chunks of one document (regions repeat its caption)
    search_ef: int = _f(96, 1)  # an HNSW index's candidate list for every pipeline search, max(96, k): text recall@50 0.91 in-distribution on the 100k-chunk latency KB (ef 64: 0.83, 128: 0.95 but +1.1 ms)


@dataclass(frozen=True)
class HopConfig(_Checked):
    """Stage 3: residual multi-hop retrieval and compound documents."""

    _section: ClassVar[str] = "hops"

    beta: float = _f(0.3, 0, 1)  # q' = normalize(q - beta * mean(hop results))
    max_hops: int = _f(3, 1)
    confidence: float = _f(0.85, 0)  # stop once a hop's confidence reaches this
    temporal_decay: float = _f(0.8, 0, 1)  # a retrieved member pulls in its sequence at 0.8x
    multiview_decay: float = _f(0.7, 0, 1)  # ... and its multiview set at 0.7x


@dataclass(frozen=True)
class GroundingConfig(_Checked):
    """Stage 4: evidence filtering, generation and verification."""

    _section: ClassVar[str] = "grounding"

    critic_threshold: float = _f(0.1, 0, 1)  # ReAG: keep a passage only if P(relevant) > 0.1
    verifier_sim_weight: float = _f(0.5, 0, 1)  # s = 0.5 * s_sim + 0.5 * s_attn
    verifier_attn_weight: float = _f(0.5, 0, 1)
    hallucination_threshold: float = _f(0.3, 0, 1)  # claims with s < 0.3 are flagged
    # Calibration of the verifier's signals (kira.reasoning.verifier explains the fit):
    verifier_sim_floor: float = _f(0.5, -1, 1)  # MiniLM cosine of same-domain sentences stating different findings
    verifier_attn_floor: float = _f(0.15, 0, 1)  # share of content tokens a claim matches by chance
    # The default critic's logistic, P = sigmoid(slope * (cos - midpoint) + overlap_weight * overlap), checked on
    # the 20 captioned photos of benchmarks/suites/real_photos.py, not DomainVQA-R (kira.reasoning.critic explains it)
    critic_slope: float = _f(15.0, 0)
    critic_midpoint: float = _f(0.45, -1, 1)
    critic_overlap_weight: float = _f(2.0, 0)
    # Text pieces (what the verifier compares claims with) encoded at ingest, so an ask encodes only its claims
    # (and the appearance parts and region / patch own pieces of what it cites: kira.knowledge_base.pieces.stored_pieces);
    # off: a faster bulk ingest (the pieces cost ~0.1 CPU-s per uncaptioned photo), KnowledgeBase.store_text_pieces()
    # fills them in later, and until then the verifier encodes the evidence it meets (same scores)
    pieces_at_ingest: bool = _f(True)
    # Text pieces of patch chunks encoded at ingest too (the verifier then encodes no evidence at ask time);
    # off: a patch's own piece (its location) is encoded when an ask cites it, and ingest does ~1/3 the text work
    patch_pieces_at_ingest: bool = _f(False)


@dataclass(frozen=True)
class AdaptationConfig(_Checked):
    """Domain adaptation: projection head, few-shot adapter, feedback loop."""

    _section: ClassVar[str] = "adaptation"

    projection_out: int = _f(256, 1)
    triplet_margin: float = _f(0.3, 0)
    epochs: int = _f(50, 1)
    protonet_shots: int = _f(5, 1)
    protonet_epochs: int = _f(10, 1)
    feedback_correctness_threshold: float = _f(0.5, 0, 1)  # answers below this feed hard negatives


@dataclass(frozen=True)
class KiraConfig(_Checked):
    """The whole system's constants. Immutable; derive variants with `replace`."""

    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    hops: HopConfig = field(default_factory=HopConfig)
    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    adaptation: AdaptationConfig = field(default_factory=AdaptationConfig)
    seed: int = _f(0, 0)  # every random choice in kira derives from this

    def replace(self, **sections: Any) -> KiraConfig:
        """A copy with whole sections or fields replaced, e.g. `replace(hops=HopConfig(beta=0.5))`."""
        return dataclasses.replace(self, **sections)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KiraConfig:
        """Inverse of `to_dict`. Unknown keys raise ValueError naming them; `RETIRED_FIELDS` are ignored.

        Values are checked as at construction: ConfigError / ConfigTypeError name `section.field`.
        """
        sections = {f.name: f for f in dataclasses.fields(cls)}
        unknown = set(data) - set(sections)
        if unknown:
            raise ValueError(f"unknown KiraConfig sections: {sorted(unknown)}")
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            section_type = _SECTION_TYPES.get(name)
            if section_type is None:
                kwargs[name] = value
                continue
            if not isinstance(value, dict):
                raise ConfigTypeError(f"{name} must be a mapping of its fields; got {type(value).__name__} {value!r}")
            known = {f.name for f in dataclasses.fields(section_type)}
            value = {k: v for k, v in value.items() if (name, k) not in RETIRED_FIELDS}
            bad = set(value) - known
            if bad:
                raise ValueError(f"unknown fields in KiraConfig.{name}: {sorted(bad)}")
            kwargs[name] = section_type(**value)
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> KiraConfig:
        return cls.from_dict(json.loads(text))


RETIRED_FIELDS: dict[tuple[str, str], str] = {
    ("retrieval", "text_overfetch"): "path B's search caps chunks per document itself (kira._core.GroupMap)",
    ("retrieval", "fine_grained"): "the variant decides: fine-grained retrieval runs where its stage (FineGrained) is listed",
    ("retrieval", "anchor_by_specificity"): "the stage decides: kira.retrieval.stages.TextSearch(anchor_by_specificity=...)",
    ("chunking", "dino_patch_size"): "never read: each image encoder carries its own patch geometry",
    ("grounding", "max_evidence"): "never read: the evidence pack is what the critic keeps (grounding.critic_*)",
    ("adaptation", "projection_in"): "never read: the projection head takes the knowledge base's vector width",
    **{("hops", name): "another subject's evidence is never read into this subject's answer (kira.reasoning.subject)"
       for name in ("change_by_analogy", "change_min_share", "analogy_min_cosine", "change_along_finding",
                    "finding_min_share", "finding_min_documents", "finding_stable_share", "read_silent_views",
                    "view_neighbours", "view_min_votes")},
}
"""Fields older knowledge bases may hold in config.json that no longer exist; ignored on load."""

_SECTION_TYPES: dict[str, type] = {
    "chunking": ChunkingConfig,
    "retrieval": RetrievalConfig,
    "hops": HopConfig,
    "grounding": GroundingConfig,
    "adaptation": AdaptationConfig,
}
