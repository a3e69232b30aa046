"""How a `kira` command opens a knowledge base and the models it passes to it (kira.cli, kira.cli_ingest)."""

from __future__ import annotations

import os
from typing import Any


def model_stack(models_dir: str | None, *, ocr: bool = False, kb: str | None = None, uri: str | None = None) -> Any:
    """The model stack a command passes to the knowledge base: the exported models in `models_dir`, or
    (None) the default stack the knowledge base loads on first use. `ocr`: the default stack with OCR,
    with the image encoder that the knowledge base `kb` (at `uri`) was built with, when it exists."""
    if models_dir:
        if ocr:
            raise ValueError("--ocr adds RapidOCR to the default model stack; it does not combine with --models "
                             "(drop one of them)")
        from kira.models import load

        return load(models_dir)
    if ocr:
        from kira.knowledge_base.model_identity import default_stack_for

        return default_stack_for(recorded_models(kb, uri), ocr=True)
    return None  # the knowledge base loads the default stack on first use


def recorded_models(kb: str | None, uri: str | None) -> dict[str, str]:
    """The models the existing knowledge base `kb` records ({} where there is none yet)."""
    from kira.knowledge_base.opening import built_with, exists

    token = os.environ.get("KIRA_MILVUS_TOKEN", "")
    if kb is None or not exists(kb, uri=uri, token=token):
        return {}
    return built_with(kb, uri=uri, token=token)


def image_suffixes() -> frozenset[str]:
    """The file suffixes `kira ingest` reads as images (DICOM too where pydicom is installed)."""
    from kira.knowledge_base.ingest import IMAGE_SUFFIXES

    return IMAGE_SUFFIXES


def open_read_only(kb: str, uri: str | None, models: Any = None) -> Any:
    """A knowledge base opened for reading: a directory, or with `uri` the Milvus knowledge base named `kb`
    there (its token from $KIRA_MILVUS_TOKEN)."""
    from kira.knowledge_base import KnowledgeBase

    if uri is None:
        return KnowledgeBase.open(kb, models=models, read_only=True)
    return KnowledgeBase.open(kb, models=models, read_only=True, uri=uri, token=os.environ.get("KIRA_MILVUS_TOKEN", ""))
