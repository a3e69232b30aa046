"""Which models built a knowledge base: the stack to load for it, and the refusal of another image encoder.

`KnowledgeBase.built_with` reads the identity from the storage's settings (`recorded_identity`).
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


class RecordedModels:
    """The models a knowledge base records in its storage's settings: ``dims`` (the encoders' widths),
    ``model_identity`` (part -> identity) and, from before identities were stored, ``models`` (class names)."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage
        self._dims: dict[str, int] | None = None  # once recorded, the widths never change

    def built_with(self) -> dict[str, str]:
        """Part -> model identity of the stack that built it ({} before the first image)."""
        return recorded_identity(self.storage.get_setting)

    def dims(self) -> dict[str, int] | None:
        """{"visual": raw image-vector width, "text": sentence-vector width}, or None before the first image."""
        if self._dims is None:
            self._dims = json.loads(self.storage.get_setting("dims", "null") or "null")
        return self._dims

    def check(self, stack: Any) -> None:
        """ValueError when `stack`'s image encoder is not the one it was built with: vectors from two encoders are
        not comparable, so a query would return noise; the message names what to load. Then its dimensions."""
        built = self.built_with().get("image")
        if built and stack is not None and getattr(stack, "image", None) is not None:
            mine = stack.identity().get("image", "") if hasattr(stack, "identity") else ""
            if self.storage.get_setting("model_identity") is None or not mine:
                # no identity on one side: compare what both record, the image encoder's class
                built_class = json.loads(self.storage.get_setting("models") or "{}").get("image", built)
                same = type(stack.image).__name__ == built_class
            else:
                same = mine == built
            if not same:
                refuse_other_image_encoder(self.storage.where, built, mine or type(stack.image).__name__)

    def check_dims(self, stack: Any) -> None:
        dims = self.dims()
        mine = {"visual": int(stack.image.dim), "text": int(stack.text.dim)}
        if dims is not None and mine != dims:
            raise ValueError(f"the model stack encodes {mine} but {self.storage.where} was built with {dims} "
                             f"({self.built_with()}); open it with the models it was built with")

    def record(self, stack: Any) -> None:
        """At the first write, record `stack`'s dimensions and identity and make the indexes; after, check it (and
        add its OCR model to the identity when a stack with one first writes: `kira ingest --ocr`)."""
        identity = stack.identity() if hasattr(stack, "identity") else {}
        if self.dims() is None:
            dims = {"visual": int(stack.image.dim), "text": int(stack.text.dim)}
            self.storage.put_settings({
                "dims": json.dumps(dims),
                "models": json.dumps({"image": type(stack.image).__name__, "text": type(stack.text).__name__}),
                **({"model_identity": json.dumps(identity)} if identity else {})})
            self.storage.open_spaces(dims, create=True)
            return
        self.check(stack)
        self.check_dims(stack)
        recorded = json.loads(self.storage.get_setting("model_identity") or "null")
        if recorded and "ocr" in identity and "ocr" not in recorded:
            self.storage.put_settings({"model_identity": json.dumps({**recorded, "ocr": identity["ocr"]})})


__all__ = ["RecordedModels", "default_stack_for", "recorded_identity", "refuse_other_image_encoder"]
