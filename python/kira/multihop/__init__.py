"""Stage 3 of the KIRA paper: residual multi-hop retrieval (`hops`) and compound documents
(`compound`: temporal sequences and multiview sets), both through the C++ core, and their
stage objects (`stages`)."""

from __future__ import annotations

from kira.multihop.stages import CompoundExpansion, ResidualHops

__all__ = ["CompoundExpansion", "ResidualHops"]
