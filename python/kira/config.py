"""Every constant of the KIRA and ReAG papers, in one typed configuration.

Field names follow the papers. A `KiraConfig` is stored with each knowledge base
(as JSON), so a reopened knowledge base answers with the constants it was built with.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChunkingConfig:
    """Stage 1: hierarchical chunking (document -> region -> patch)."""

    region_k_sigma: float = 0.5  # attention threshold: mean + k_sigma * std (KIRA)
    region_connectivity: int = 8  # 4 or 8-connected components on the attention grid
    region_min_cells: int = 1  # drop components smaller than this many grid cells
    max_regions: int = 8  # keep the highest-scoring regions per image
    patch_grid: int = 4  # patches form a patch_grid x patch_grid grid per image
    dino_patch_size: int = 8  # DINO ViT-S/8 patch size, pixels


@dataclass(frozen=True)
class RetrievalConfig:
    """Stage 2: dual-path retrieval, fusion, re-ranking and query expansion."""

    visual_weight: float = 0.6  # alpha: weight of path A (visual) in weighted RRF
    text_weight: float = 0.4  # 1 - alpha: weight of path B (text)
    rrf_k: int = 60  # RRF constant k; ranks count from 1
    rerank_original_weight: float = 0.4  # blended score = 0.4 * original + 0.6 * cross-encoder
    rerank_cross_weight: float = 0.6
    candidates: int = 50  # results fetched per path before fusion
    expansion_hypotheses: int = 3  # chain-of-thought hypotheses from the captioner
    expansion_concepts: int = 3  # top concepts from the domain concept bank
    fine_grained: bool = True  # ReAG: crop the question's subject and re-query
    # kira's own fusion weights for the secondary rankings (not in the papers):
    expansion_weight_scale: float = 0.5  # an expansion ranks at text_weight * 0.5 * cos(expansion, question)
    caption_query_weight_scale: float = 0.5  # image-only asks: the image's own description, at half weight
    hop_weight_scale: float = 0.5  # hops after the first rank at visual_weight * 0.5
    fine_weight_scale: float = 0.5  # the query crop's ranking (ReAG fine-grained) ranks at visual_weight * 0.5
    rerank_candidates_per_result: int = 4  # the cross-encoder re-scores the top 4 * top_k fused
    critic_candidates_per_result: int = 2  # the critic sees 2 * top_k candidates
    bridge_weight_scale: float = 0.5  # the question mapped by the fitted text->image bridge ranks at visual_weight * 0.5
    lexical_weight_scale: float = 1.0  # path B's BM25 ranking of the question ranks at text_weight * 1.0
    anchor_documents: int = 10  # with a query image, question rankings re-rank inside its 10 nearest documents
    anchor_by_specificity: bool = True  # ... at their weight x the question's max-idf specificity
    clear_match_margin: float = 0.5  # with a query image, its nearest document leads the fused list when its cosine beats the runner-up's by >= 0.5 x the spread of the image's anchor_documents nearest (a copy, crop or mirror of it); 0 disables
    feedback_documents: int = 5  # pseudo-relevance feedback: the top 5 fused documents' mean re-queries path A
    feedback_min_score: float = 0.5  # ... drawn from the BM25 matches scoring >= 0.5 x the best
    feedback_weight_scale: float = 2.0  # ... ranking at visual_weight * 2.0: a mean of relevant documents is the surest visual query
    named_feedback_weight_scale: float = 4.0  # ... times 4 when the mean is of the documents the question names (the subject itself)
    text_chunks_per_document: int = 2  # path B's dense search returns at most 2 chunks of one document (regions repeat its caption)
    search_ef: int = 96  # an HNSW index's candidate list for every pipeline search, max(96, k): text recall@50 0.91 in-distribution on the 100k-chunk latency KB (ef 64: 0.83, 128: 0.95 but +1.1 ms)


@dataclass(frozen=True)
class HopConfig:
    """Stage 3: residual multi-hop retrieval and compound documents."""

    beta: float = 0.3  # q' = normalize(q - beta * mean(hop results))
    max_hops: int = 3
    confidence: float = 0.85  # stop once a hop's confidence reaches this
    temporal_decay: float = 0.8  # a retrieved member pulls in its sequence at 0.8x
    multiview_decay: float = 0.7  # ... and its multiview set at 0.7x


@dataclass(frozen=True)
class GroundingConfig:
    """Stage 4: evidence filtering, generation and verification."""

    critic_threshold: float = 0.1  # ReAG: keep a passage only if P(relevant) > 0.1
    verifier_sim_weight: float = 0.5  # s = 0.5 * s_sim + 0.5 * s_attn
    verifier_attn_weight: float = 0.5
    hallucination_threshold: float = 0.3  # claims with s < 0.3 are flagged
    # Calibration of the verifier's signals (kira.reasoning.verifier explains the fit):
    verifier_sim_floor: float = 0.5  # MiniLM cosine of same-domain sentences stating different findings
    verifier_attn_floor: float = 0.15  # share of content tokens a claim matches by chance
    # The default critic's logistic, P = sigmoid(slope * (cos - midpoint) + overlap_weight * overlap):
    critic_slope: float = 15.0
    critic_midpoint: float = 0.45
    critic_overlap_weight: float = 2.0
    max_evidence: int = 5  # items in the evidence pack handed to the generator


@dataclass(frozen=True)
class AdaptationConfig:
    """Domain adaptation: projection head, few-shot adapter, feedback loop."""

    projection_in: int = 768  # CLIP ViT-L/14 feature size (the default encoder's otherwise)
    projection_out: int = 256
    triplet_margin: float = 0.3
    epochs: int = 50
    protonet_shots: int = 5
    protonet_epochs: int = 10
    feedback_correctness_threshold: float = 0.5  # answers below this feed hard negatives


@dataclass(frozen=True)
class KiraConfig:
    """The whole system's constants. Immutable; derive variants with `replace`."""

    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    hops: HopConfig = field(default_factory=HopConfig)
    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    adaptation: AdaptationConfig = field(default_factory=AdaptationConfig)
    seed: int = 0  # every random choice in kira derives from this

    def replace(self, **sections: Any) -> KiraConfig:
        """A copy with whole sections or fields replaced, e.g. `replace(hops=HopConfig(beta=0.5))`."""
        return dataclasses.replace(self, **sections)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KiraConfig:
        """Inverse of `to_dict`. Unknown keys raise ValueError naming them; `RETIRED_FIELDS` are ignored."""
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
