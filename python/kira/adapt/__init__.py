"""Domain adaptation: a projection head (triplet loss, hard negatives), a ProtoNet few-shot
adapter, local (patch) prototypes, the validation that chooses among them and frozen features
(`adapt_few_shot`, `kb.adapt`), and the feedback loop. Applying is numpy only; training imports torch."""

from __future__ import annotations

from kira.adapt.fewshot import FewShotClassifier, fit_classifier
from kira.adapt.io import ProjectionHead, ProtoNetHead, load_adapter
from kira.adapt.validation import AdaptationReport, adapt_few_shot, validate

__all__ = ["AdaptationReport", "FewShotClassifier", "ProjectionHead", "ProtoNetHead", "adapt_few_shot",
           "fit_classifier", "load_adapter", "validate"]
