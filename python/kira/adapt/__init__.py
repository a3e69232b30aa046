"""Domain adaptation: a projection head (triplet loss, hard negatives), a ProtoNet few-shot
adapter and the feedback loop. Applying an adapter is numpy only; training imports torch."""

from __future__ import annotations

from kira.adapt.io import ProjectionHead, ProtoNetHead, load_adapter

__all__ = ["ProjectionHead", "ProtoNetHead", "load_adapter"]
