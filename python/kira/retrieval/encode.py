"""Stage 2, query encoding: the question and the query image into the spaces the indexes hold.

The query image goes through the stack's image encoder (and the knowledge base's adapter,
`visual_query`). The question goes into text space (the stack's sentence encoder) and into
image space: the stack's `image_text` encoder (CLIP's text tower), else the knowledge base's
fitted TextToImageBridge, weighed by its measured held-out skill and left out when it has
none (kira.models.bridge). An image asked about without a question may be described by the
captioner for path B (`describe_image`).
"""

from __future__ import annotations

import numpy as np

from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.models.stack import ModelStack
from kira.query_state import QueryVectors


def unit(v: np.ndarray) -> np.ndarray:
    """`v` flattened to float32 at unit length (a zero vector stays zero)."""
    v = np.asarray(v, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def encode_query(kb: KnowledgeBaseLike, stack: ModelStack, question: str, image: np.ndarray | None, *,
                 prompt: str | None = None, describe_image: bool = True) -> QueryVectors:
    """Embed the question and image into the spaces the indexes hold (see module doc). An image asked
    about without a question is described by the captioner (with the profile's `prompt`) for path B,
    unless `describe_image` is False (its ranking would weigh nothing)."""
    out = QueryVectors(question=question)
    notes: list[str] = []
    if image is not None:
        raw = np.asarray(stack.image.encode([image]), dtype=np.float32)
        out.image_vector = unit(kb.visual_query(raw)[0])
    if question:
        out.text_vector = unit(np.asarray(stack.text.encode([question]), dtype=np.float32)[0])
        out.text_query = question
        image_text = getattr(stack, "image_text", None)
        if image_text is not None:
            raw = np.asarray(image_text.encode([question]), dtype=np.float32)
            out.text_in_image = unit(kb.visual_query(raw)[0])
        else:
            bridge = kb.bridge()
            skill = getattr(bridge, "skill", None)
            if bridge is not None and skill is not None and skill <= 0.0:
                notes.append("the text->image bridge ranks held-out captioned images no better than chance: "
                             "path A uses the image only")
            elif bridge is not None:
                raw = np.asarray(bridge.encode_vectors(out.text_vector[None, :]), dtype=np.float32)
                out.text_in_image = unit(kb.visual_query(raw)[0])
                out.text_in_image_from_bridge = True
                out.bridge_skill = skill
            else:
                notes.append("no text->image encoder and fewer than 2 captioned images: path A uses the image only")
    elif image is not None and describe_image and getattr(stack, "captioner", None) is not None:
        caption = stack.captioner.caption(image, prompt) if prompt else stack.captioner.caption(image)
        if caption:
            out.text_vector = unit(np.asarray(stack.text.encode([caption]), dtype=np.float32)[0])
            out.text_query = caption
            out.text_from_caption = True
    out.notes = tuple(notes)
    return out


__all__ = ["encode_query", "unit"]
