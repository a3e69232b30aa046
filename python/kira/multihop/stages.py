"""Stage 3 as stage objects: residual hops and compound-document expansion (kira.multihop.hops, .compound)."""

from __future__ import annotations

import dataclasses

from kira.multihop.compound import expand_groups
from kira.multihop.hops import residual_hop_rankings
from kira.query_state import QueryState, StageContext


class ResidualHops:
    """Residual multi-hop retrieval (core) from the best visual query there is: the image, the feedback
    mean, or the question in image space."""

    name = "hops"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        q = state.query
        if q is None:
            raise ValueError("ResidualHops needs the query encoding: put EncodeQuery() first in the stage list")
        feedback = state.rankings.feedback.vector if state.rankings.feedback is not None else None
        start = next((v for v in (q.image_vector, feedback, q.text_in_image) if v is not None), None)
        if start is None:
            return state
        hops = residual_hop_rankings(ctx.kb, start, ctx.config, state.allow)
        return state.evolve(rankings=dataclasses.replace(state.rankings, hops=tuple(hops.rankings)),
                            hops=tuple(hops.hops), stop_reason=hops.stop_reason)


class CompoundExpansion:
    """Compound documents (core): a retrieved member of a temporal sequence or multiview set pulls in the
    rest at 0.8x / 0.7x its score; members outside the query's filter (`QueryState.allow`) stay out."""

    name = "compound"

    def run(self, state: QueryState, ctx: StageContext) -> QueryState:
        fused = state.fused.copy()
        added = expand_groups(ctx.kb, fused, ctx.config, state.allow)
        return state.evolve(fused=fused, trace={"compound_added": added})


__all__ = ["CompoundExpansion", "ResidualHops"]
