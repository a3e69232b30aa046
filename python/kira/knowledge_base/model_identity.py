"""Which models built a knowledge base: the stack to load for it, and the refusal of another image encoder.

Shared by the embedded and the Milvus-backed knowledge bases (each records the identity its
own way, as `built_with()`).
"""

from __future__ import annotations

from typing import Any, Mapping


def default_stack_for(built_with: Mapping[str, str]) -> Any:
    """`kira.models.load_default()` with the image encoder that built a knowledge base (its recorded identity)."""
    from kira.models import load_default
    from kira.models.stack import image_encoder_choice

    return load_default(image_encoder=image_encoder_choice(built_with.get("image")))


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


__all__ = ["default_stack_for", "refuse_other_image_encoder"]
