"""Which models built a knowledge base: the stack to load for it, and the refusal of another image encoder.

Shared by the embedded and the Milvus-backed knowledge bases (each records the identity its
own way, as `built_with()`).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping


def default_stack_for(built_with: Mapping[str, str], *, ocr: bool = False) -> Any:
    """`kira.models.load_default()` with the image encoder that built a knowledge base (its recorded identity);
    `ocr`: with RapidOCR too (`load_default(ocr=True)`)."""
    from kira.models import load_default
    from kira.models.stack import image_encoder_choice

    return load_default(image_encoder=image_encoder_choice(built_with.get("image")), **({"ocr": True} if ocr else {}))


def recorded_identity(get_setting: Callable[[str], str | None]) -> dict[str, str]:
    """Part -> model identity a knowledge base records under its ``model_identity`` setting (`get_setting(key)`
    -> the stored JSON or None); knowledge bases from before identities were stored give the encoders' class
    names (``models``). {} before the first image."""
    stored = get_setting("model_identity")
    if stored:
        return dict(json.loads(stored))
    return dict(json.loads(get_setting("models") or "{}"))


def refuse_other_image_encoder(where: str, built: str, mine: str) -> None:
    """ValueError when `mine` (the query stack's image encoder) is not `built` (the knowledge base's): vectors
    from two encoders are not comparable, so a query would return noise. The message names what to load."""
    if mine == built:
        return
    from kira.models.stack import image_encoder_choice

    choice = image_encoder_choice(built)
    hint = (f"load it with kira.models.load_default(image_encoder={choice!r})" if choice
            else "load the model stack it was built with")
    raise ValueError(f"{where} was built with the image encoder {built}, but this model stack encodes images "
                     f"with {mine}; {hint}")


class LoadsItsModels:
    """``models``: the stack a knowledge base was opened with, else (on first use) the default stack with
    the image encoder its `built_with()` records. Expects ``self._models`` and ``built_with()``."""

    @property
    def models(self) -> Any:
        """The model stack (loaded with `kira.models.load_default()` on first use)."""
        if self._models is None:
            self._models = default_stack_for(self.built_with())
        return self._models


class RecordedModels(LoadsItsModels):
    """The embedded knowledge base's models: the stack it records in its store's meta rows
    (``model_identity``; ``models``, the encoders' class names, for knowledge bases from before).
    Expects ``self.store``, ``self.path`` and ``self._models``."""

    def built_with(self) -> dict[str, str]:
        """Part -> model identity of the stack that built this knowledge base ({} before the first image).

        Knowledge bases from before identities were stored give the encoders' class names.
        """
        return recorded_identity(self.store.get_meta)

    def check_models(self, stack: Any) -> None:
        """Raise ValueError when `stack`'s image encoder is not the one this knowledge base was built with.

        Vectors from two different encoders are not comparable, so a query encoded with
        another encoder would return noise; the message names the encoder to load.
        """
        built = self.built_with().get("image")
        if not built or stack is None or getattr(stack, "image", None) is None:
            return
        mine = stack.identity().get("image", "") if hasattr(stack, "identity") else ""
        if self.store.get_meta("model_identity") is None or not mine:
            # no identity on one side: compare what both record, the image encoder's class
            built_class = json.loads(self.store.get_meta("models", "{}") or "{}").get("image", built)
            same = type(stack.image).__name__ == built_class
        else:
            same = mine == built
        if not same:
            refuse_other_image_encoder(str(self.path), built, mine or type(stack.image).__name__)

    def _record_ocr(self, stack: Any) -> None:
        """Add the OCR model to the recorded identity when a stack with one first writes to a knowledge
        base built without (`kira ingest --ocr` on an existing one): `kira info` then lists it."""
        stored = self.store.get_meta("model_identity")
        mine = stack.identity() if hasattr(stack, "identity") else {}
        if stored and "ocr" in mine:
            recorded = json.loads(stored)
            if "ocr" not in recorded:
                self.store.set_meta("model_identity", json.dumps({**recorded, "ocr": mine["ocr"]}))


__all__ = ["LoadsItsModels", "RecordedModels", "default_stack_for", "recorded_identity", "refuse_other_image_encoder"]
