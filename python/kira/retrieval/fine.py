"""ReAG fine-grained retrieval: crop the query image's subject and query the region/patch chunks.

For an image query, the region proposer finds salient areas of the *query* image (via
the core's extract_regions); the area that best matches the question (cosine between
each crop's embedding and the question in image space) is cropped, re-encoded and
searched against the knowledge base's region and patch chunks. Without a question the
most salient area is used. The result is one more ranking for fusion (path "fine").
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from kira.config import KiraConfig
from kira.knowledge_base.chunker import region_boxes
from kira.knowledge_base.protocols import KnowledgeBaseLike
from kira.models.stack import ModelStack
from kira.query_state import QueryVectors, Ranking, RetrievalPath
from kira.retrieval.search import search

FINE_LEVELS = ("region", "patch")  # what a crop is searched against


@dataclass(frozen=True)
class FineQuery:
    """The crop chosen for fine-grained retrieval."""

    box: tuple[int, int, int, int]
    vector: np.ndarray  # the crop in the visual index's space
    match: float  # cosine to the question in image space (nan without a question)


def choose_region(kb: KnowledgeBaseLike, stack: ModelStack, image: np.ndarray, q: QueryVectors, config: KiraConfig) -> FineQuery | None:
    """The query image's region matching the question (see module doc), or None when there is none."""
    proposer = getattr(stack, "regions", None)
    if proposer is None or min(image.shape[:2]) < 8:
        return None
    boxes = region_boxes(image, proposer, config.chunking)
    h, w = image.shape[:2]
    boxes = [(b, s) for b, s in boxes if (b[2] - b[0]) * (b[3] - b[1]) < 0.9 * w * h]  # the whole image adds nothing
    if not boxes:
        return None
    crops = [np.ascontiguousarray(image[y0:y1, x0:x1]) for (x0, y0, x1, y1), _ in boxes]
    raw = np.asarray(stack.image.encode(crops), dtype=np.float32)
    vecs = kb.visual_query(raw)
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    if q.text_in_image is not None:
        sims = vecs @ q.text_in_image
        best = int(np.argmax(sims))
        return FineQuery(boxes[best][0], vecs[best], float(sims[best]))
    return FineQuery(boxes[0][0], vecs[0], float("nan"))


def fine_ranking(kb: KnowledgeBaseLike, fine: FineQuery, config: KiraConfig, allow: np.ndarray | None) -> Ranking:
    """Search the crop against region and patch chunks (within `allow`)."""
    parts = kb.level_ids(FINE_LEVELS)
    if allow is not None:
        parts = np.intersect1d(parts, allow, assume_unique=True)
    if not len(parts):
        return Ranking(RetrievalPath.FINE, np.zeros(0, np.int64), np.zeros(0, np.float32), 0.0, "crop")
    (ids, scores), = search(kb.index("visual"), fine.vector[None, :], config.retrieval.candidates, parts,
                            ef=config.retrieval.search_ef)
    weight = config.retrieval.visual_weight * config.retrieval.fine_weight_scale
    return Ranking(RetrievalPath.FINE, ids, scores, weight, f"crop {fine.box}")
