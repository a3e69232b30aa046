"""Stage 2, cross-modal query processing: encode, search both paths, expand, fuse, re-rank.

Path A (visual index) is queried with the query image's embedding and/or the question
embedded into image space (the stack's `image_text` encoder, CLIP's text tower; else
the knowledge base's fitted TextToImageBridge, weighed by its measured held-out skill and left
out when it has none: kira.models.bridge). Path B (text index, chunk
descriptions) is queried with the sentence embedding of the question (or, for an
image-only query, of the captioner's description of the image) and of the expansions,
and with BM25 over document texts (`lexical_rankings`; kira.knowledge_base.lexical).
How the rankings of an image query meet, and feedback, live in kira.pipeline.anchoring.
Every search result list is one ranking for the core's weighted `rrf_fuse`: visual
rankings carry alpha = 0.6, text rankings 1 - alpha = 0.4, expansions 0.4 x their
similarity to the question x 0.5, hop and fine-grained rankings as their path says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from kira import _core
from kira.backends.protocols import search_options
from kira.config import RetrievalConfig
from kira.pipeline.concepts import ConceptBank, top_concepts


@dataclass(frozen=True)
class Ranking:
    """One search's result list (best first) and its weight in fusion."""

    path: str  # "visual", "text", "expansion", "fine", "hop2", ...
    ids: np.ndarray  # int64, -1 padding removed
    scores: np.ndarray  # float32 cosine scores
    weight: float
    query: str = ""  # what was searched (for the trace)
    cosine: bool = True  # scores are cosines (False: BM25 scores, not comparable across paths)
    vector: np.ndarray | None = None  # the query vector, where one was searched with


@dataclass
class QueryVectors:
    """Everything the question and image turn into before any search."""

    question: str
    image_vector: np.ndarray | None = None  # in the visual index's space
    text_in_image: np.ndarray | None = None  # question in the visual index's space
    text_in_image_from_bridge: bool = False  # text_in_image came from the KB's fitted bridge (no CLIP text tower)
    bridge_skill: float | None = None  # that bridge's held-out skill, 0 (chance) - 1 (None: not measured)
    text_vector: np.ndarray | None = None  # question (or image caption) in text space
    text_query: str = ""  # what text_vector encodes
    text_from_caption: bool = False  # text_vector describes the query image (no question)
    notes: tuple[str, ...] = ()


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def encode_query(kb: Any, stack: Any, question: str, image: np.ndarray | None, *,
                 prompt: str | None = None, describe_image: bool = True) -> QueryVectors:
    """Embed the question and image into the spaces the indexes hold (see module doc). An image asked
    about without a question is described by the captioner (with the profile's `prompt`) for path B,
    unless `describe_image` is False (its ranking would weigh nothing)."""
    out = QueryVectors(question=question)
    notes: list[str] = []
    if image is not None:
        raw = np.asarray(stack.image.encode([image]), dtype=np.float32)
        out.image_vector = _unit(kb.visual_query(raw)[0])
    if question:
        out.text_vector = _unit(np.asarray(stack.text.encode([question]), dtype=np.float32)[0])
        out.text_query = question
        image_text = getattr(stack, "image_text", None)
        if image_text is not None:
            raw = np.asarray(image_text.encode([question]), dtype=np.float32)
            out.text_in_image = _unit(kb.visual_query(raw)[0])
        else:
            bridge = kb.bridge()
            skill = getattr(bridge, "skill", None)
            if bridge is not None and skill is not None and skill <= 0.0:
                notes.append("the text->image bridge ranks held-out captioned images no better than chance: "
                             "path A uses the image only")
            elif bridge is not None:
                raw = np.asarray(bridge.encode_vectors(out.text_vector[None, :]), dtype=np.float32)
                out.text_in_image = _unit(kb.visual_query(raw)[0])
                out.text_in_image_from_bridge = True
                out.bridge_skill = skill
            else:
                notes.append("no text->image encoder and fewer than 2 captioned images: path A uses the image only")
    elif image is not None and describe_image and getattr(stack, "captioner", None) is not None:
        caption = stack.captioner.caption(image, prompt) if prompt else stack.captioner.caption(image)
        if caption:
            out.text_vector = _unit(np.asarray(stack.text.encode([caption]), dtype=np.float32)[0])
            out.text_query = caption
            out.text_from_caption = True
    out.notes = tuple(notes)
    return out


def search(
    index: Any, queries: np.ndarray, k: int, allow: np.ndarray | None, groups: Any = None, per_group: int = 1,
    *, ef: int | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Search `index` (a `kira.backends.VectorIndex`) with (m, dim) queries; per query (ids, scores) with
    padding removed.

    groups: a `kira._core.GroupMap`; then at most `per_group` results of one group.
    ef: an HNSW index's candidate list for this call (`RetrievalConfig.search_ef`); None
    keeps the index's own ef_search, and an exact index takes none.
    """
    if index is None or len(index) == 0 or k <= 0:
        return [(np.zeros(0, np.int64), np.zeros(0, np.float32)) for _ in range(len(queries))]
    k = min(k, len(index))
    extra = search_options(index, ef=ef)
    ids, scores = index.search(np.ascontiguousarray(queries, dtype=np.float32), k, allow=allow, groups=groups,
                               per_group=per_group, **extra)
    out = []
    for row_ids, row_scores in zip(np.atleast_2d(ids), np.atleast_2d(scores)):
        keep = row_ids >= 0
        out.append((row_ids[keep].astype(np.int64), row_scores[keep].astype(np.float32)))
    return out


def visual_rankings(kb: Any, q: QueryVectors, config: RetrievalConfig, allow: np.ndarray | None) -> list[Ranking]:
    """Path A: the image embedding and the question in image space against the visual index."""
    # A question mapped by the fitted ridge bridge is weaker evidence than an image or a CLIP text tower, and
    # counts only as far as the bridge ranks held-out captioned images of this knowledge base (its skill).
    bridge = 1.0
    if q.text_in_image_from_bridge:
        bridge = config.bridge_weight_scale * (1.0 if q.bridge_skill is None else q.bridge_skill)
    queries, meta = [], []
    if q.image_vector is not None:
        queries.append(q.image_vector)
        meta.append(("image", config.visual_weight))
    if q.text_in_image is not None:
        queries.append(q.text_in_image)
        meta.append((q.question, config.visual_weight * bridge))
    if not queries:
        return []
    results = search(kb.index("visual"), np.stack(queries), config.candidates, allow, ef=config.search_ef)
    return [Ranking("visual", ids, scores, weight, name) for (ids, scores), (name, weight) in zip(results, meta)]


def text_rankings(
    kb: Any, q: QueryVectors, expansions: Sequence[tuple[str, np.ndarray, float]], config: RetrievalConfig,
    allow: np.ndarray | None,
) -> list[Ranking]:
    """Path B: the question (and each expansion) against the description index, in one search call."""
    queries, meta = [], []
    if q.text_vector is not None:
        queries.append(q.text_vector)
        # A generated description of the query image is weaker evidence than a question.
        meta.append(("text", config.text_weight * (config.caption_query_weight_scale if q.text_from_caption else 1.0), q.text_query))
    for text, vector, sim in expansions:
        queries.append(vector)
        meta.append(("expansion", config.text_weight * config.expansion_weight_scale * max(sim, 0.0), text))
    if not queries:
        return []
    # Region and patch chunks repeat their document's caption, so one document could fill a
    # whole result list; the search keeps at most `text_chunks_per_document` of each document.
    results = search(kb.index("text"), np.stack(queries), config.candidates, allow, kb.document_groups(),
                     config.text_chunks_per_document, ef=config.search_ef)
    return [Ranking(path, ids, scores, w, text) for (ids, scores), (path, w, text) in zip(results, meta)]


def lexical_rankings(kb: Any, q: QueryVectors, config: RetrievalConfig, allow: np.ndarray | None) -> list[Ranking]:
    """Path B's lexical half: BM25 of the question over document texts (`KnowledgeBase.lexical`)."""
    if not q.question or config.lexical_weight_scale <= 0:
        return []
    hits = kb.lexical().search(q.question, config.candidates, allow=allow)
    if not len(hits.ids):
        return []
    return [Ranking("lexical", hits.ids, hits.scores, config.text_weight * config.lexical_weight_scale, q.question,
                    cosine=False)]


def expand_query(
    stack: Any, q: QueryVectors, image: np.ndarray | None, banks: Sequence[ConceptBank], config: RetrievalConfig
) -> list[tuple[str, np.ndarray, float]]:
    """Query expansion: captioner hypotheses + concept-bank concepts, de-duplicated and scored.

    Returns (text, unit text vector, cosine to the question) best first; texts equal to
    the question (case-insensitively) are dropped. Image-only queries get no expansions.
    """
    if q.text_vector is None or q.text_from_caption:
        return []  # expansions are scored against the question; a generated image caption is too weak a query
    candidates: list[str] = []
    captioner = getattr(stack, "captioner", None)
    if captioner is not None and config.expansion_hypotheses > 0:
        candidates += [h for h in captioner.hypotheses(image, q.question or q.text_query, config.expansion_hypotheses) if h]
    candidates += [c for c, _ in top_concepts(banks, stack.text, q.text_vector, config.expansion_concepts)]
    seen = {(q.text_query or "").strip().lower()}
    unique = []
    for text in candidates:
        key = " ".join(text.lower().split())
        if key and key not in seen:
            seen.add(key)
            unique.append(text.strip())
    if not unique:
        return []
    vectors = np.asarray(stack.text.encode(unique), dtype=np.float32)
    sims = vectors @ q.text_vector
    order = np.argsort(-sims, kind="stable")
    limit = config.expansion_hypotheses + config.expansion_concepts
    return [(unique[i], vectors[i], float(sims[i])) for i in order[:limit]]


@dataclass
class Fused:
    """The fused candidate list: ids best first, normalised scores (top = 1), paths per id."""

    ids: np.ndarray
    scores: np.ndarray
    paths: dict[int, list[str]]
    cosine: dict[int, float]


def fuse(rankings: Sequence[Ranking], config: RetrievalConfig) -> Fused:
    """Weighted RRF over every ranking (kira._core.rrf_fuse, k = config.rrf_k), scores scaled to top = 1."""
    rankings = [r for r in rankings if len(r.ids) and r.weight > 0]
    if not rankings:
        return Fused(np.zeros(0, np.int64), np.zeros(0, np.float32), {}, {})
    ids, scores = _core.rrf_fuse([r.ids for r in rankings], [r.weight for r in rankings], config.rrf_k,
                                 limit=config.candidates)
    ids = np.asarray(ids, np.int64)
    # Paths and best cosine of the fused ids only (the rankings hold several times as many).
    paths: dict[int, list[str]] = {i: [] for i in ids.tolist()}
    cosine: dict[int, float] = {}
    fused_sorted = np.sort(ids)
    for r in rankings:
        hit = fused_sorted[np.minimum(np.searchsorted(fused_sorted, r.ids), len(ids) - 1)] == r.ids
        for i, s in zip(r.ids[hit].tolist(), r.scores[hit].tolist()):
            if r.path not in paths[i]:
                paths[i].append(r.path)
            if r.cosine:
                cosine[i] = max(cosine.get(i, -1.0), s)
    scores = np.asarray(scores, dtype=np.float64)
    top = float(scores[0]) if len(scores) and scores[0] > 0 else 1.0
    return Fused(ids, (scores / top).astype(np.float32), paths, cosine)


def rerank(stack: Any, question: str, fused: Fused, descriptions: dict[int, str], config: RetrievalConfig, n: int) -> bool:
    """Blend the top `n` fused scores with the cross-encoder's: 0.4 * fused + 0.6 * cross (in place).

    Cross-encoder scores outside [0, 1] are squashed with a sigmoid. Returns whether it ran.
    """
    reranker = getattr(stack, "reranker", None)
    if reranker is None or not question or not len(fused.ids):
        return False
    head = fused.ids[:n]
    cross = np.asarray(reranker.score(question, [descriptions.get(int(i), "") for i in head]), dtype=np.float64)
    if cross.size and (cross.min() < 0 or cross.max() > 1):
        cross = 1.0 / (1.0 + np.exp(-cross))
    blended = config.rerank_original_weight * fused.scores[: len(head)] + config.rerank_cross_weight * cross
    order = np.argsort(-blended, kind="stable")
    fused.ids[: len(head)] = head[order]
    fused.scores[: len(head)] = blended[order].astype(np.float32)
    for i in fused.ids[: len(head)].tolist():
        fused.paths.setdefault(int(i), []).append("rerank")
    return True
