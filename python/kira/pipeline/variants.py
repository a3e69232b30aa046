"""The six ablation variants of the KIRA paper as six stage lists.

Variants are cumulative:

===================  ===============================================================
visual_only          path A only: the visual index, queried with the image and/or the
                     question embedded into image space
dual_path            + path B: the description index (dense) and BM25 over document
                     texts, fused by weighted RRF; with a query image the question's
                     rankings re-rank inside the image's nearest documents; documents
                     the question names by identifier lead
query_expansion      + captioner hypotheses and the profile's concepts as extra queries,
                     and (text queries) visual pseudo-relevance feedback
multi_hop            + residual hops (core) and compound-document expansion (core)
grounded             + ReAG critic over the evidence and the grounding verifier
full                 + ReAG fine-grained retrieval (a query crop re-ranks the regions of
                     the image's nearest documents) and the cross-encoder re-rank when
                     the stack has one
===================  ===============================================================

Every variant ends with the subject stage and the same generator. A behaviour is switched on
or off by its stage being in the list (or by the stage's own option, e.g.
``EncodeQuery(describe_image=True)``), never by the config, which holds numbers only. A custom
pipeline is a list of stages: ``Kira(kb, stages=[EncodeQuery(), VisualSearch(), Fuse(), ...])``.
"""

from __future__ import annotations

from kira.grounding.stages import Critic, Generate, SelectEvidence, Subject, Verify
from kira.multihop.stages import CompoundExpansion, ResidualHops
from kira.query_state import Stage
from kira.retrieval.stages import (EncodeQuery, ExpandQuery, Feedback, FineGrained, Fuse, Rerank, TextSearch,
                                   VisualSearch)

VARIANTS: tuple[str, ...] = ("visual_only", "dual_path", "query_expansion", "multi_hop", "grounded", "full")


def variant_stages(variant: str, *, critic_candidates_per_result: int = 2, describe_image: bool = False) -> list[Stage]:
    """The stage list of one of `VARIANTS`. Raises ValueError naming the variants for any other name.

    describe_image: an image asked about without a question is described by the captioner for path B
    (`EncodeQuery.describe_image`; weighed by `RetrievalConfig.caption_query_weight_scale`).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {VARIANTS}")
    level = VARIANTS.index(variant)
    stages: list[Stage] = [EncodeQuery(describe_image=describe_image), VisualSearch(image_only=level == 0)]
    if level >= 2:
        stages.append(ExpandQuery())
    if level >= 1:
        stages.append(TextSearch())
    if level >= 5:
        stages.append(FineGrained())
    stages.append(Fuse(lead_named=level >= 1))
    if level >= 2:
        stages += [Feedback(), Fuse(lead_named=True)]
    if level >= 3:
        stages += [ResidualHops(), Fuse(lead_named=True), CompoundExpansion()]
    if level >= 5:
        stages.append(Rerank())
    stages.append(SelectEvidence(per_result=critic_candidates_per_result if level >= 4 else 1))
    if level >= 4:
        stages.append(Critic())
    stages += [Subject(), Generate()]
    if level >= 4:
        stages.append(Verify())
    return stages
