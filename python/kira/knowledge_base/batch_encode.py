"""Chunk, describe and encode a batch of images: the one path every ingest takes.

The knowledge base's own writes (`KnowledgeBase.add_image`, `ingest`) and the Milvus
backend's distributed ingest (kira.ray_ingest, in Ray actors) both call
`encode_batch`, so a chunk's vectors and description are the same whichever stores them.
Per image: the chunk plan (document, regions, patches), OCR lines when the stack reads
text, the descriptions, one forward pass for every chunk's visual vector when the image
encoder offers ``encode_boxes`` (the CNN; else one call per crop, batched), and the
tagger's labels. A CNN runs once over the whole batch first (batched), and each image's
region proposal, tags and chunk vectors read that pass from the CNN's cache.

Texts are encoded once each, in a second thread: the images' distinct new texts are handed
to it as they are described (`FEED_TEXTS` at a time), then every text piece of the batch (what
the grounding verifier, the critic and the relevance judge read, when the writer asks for them),
and it encodes them while this thread describes the next images and computes the chunks' image
vectors (onnxruntime releases the GIL, so on two cores the text encoder and the image side run at
once). What is stored does not depend on the batching or the threads beyond float rounding.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from kira.config import ChunkingConfig
from kira.knowledge_base.chunker import ImagePlan, describe, plan_image

ENCODE_BATCH = 64  # crops / texts per encoder call
FEED_TEXTS = 8  # new texts gathered before the text thread gets them
MAX_ENCODED_CHARS = 8192
"""What of one text is handed to the text encoder: far past any sentence encoder's own token
limit (all-MiniLM-L6-v2 reads 256 tokens), so no vector changes, while a 10 MB caption is no
longer tokenised whole (19 s per add_image). The stored caption and description keep the
full text."""


class PiecesOf(Protocol):
    """An item's further texts to encode beside its chunk texts: called with the item, its `ImagePlan` (None
    without an image), its chunk texts (as encoded), the tagger's labels and the OCR lines (or None)."""

    def __call__(self, item: Mapping[str, Any], plan: ImagePlan | None, texts: Sequence[str],
                 labels: Sequence[Mapping[str, Any]] | None, read: Sequence[Mapping[str, Any]] | None) -> list[str]: ...


@dataclass
class EncodedBatch:
    """What `encode_batch` returns. Rows of `visual` follow the chunks of the plans in order; rows of
    `text` and `texts` follow, per item, its chunks (or its one text when it has no image) then its passages."""

    plans: list[ImagePlan | None]
    texts: list[str]
    visual: np.ndarray
    text: np.ndarray
    labels: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # doc id -> the tagger's labels
    read_lines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # doc id -> OCR lines with boxes
    pieces: list[list[str]] = field(default_factory=list)  # per item, what `pieces_of` gave (when given)
    encoded: dict[str, np.ndarray] = field(default_factory=dict)  # every text encoded or reused -> its vector


def encode_batch(stack: Any, items: Sequence[Mapping[str, Any]], chunking: ChunkingConfig, levels: Sequence[str],
                 *, caption_children: bool = False, pieces_of: PiecesOf | None = None,
                 stored: Callable[[list[str]], Mapping[str, np.ndarray]] | None = None) -> EncodedBatch:
    """Chunk, describe and encode `items` (mappings with ``doc_id``, ``pixels`` (uint8 RGB or None),
    ``caption``, ``tags`` and optionally ``passages`` and ``metadata``) with the model `stack` (module docstring).
    With `pieces_of`, each item's further texts (its text pieces: `PiecesOf`) are encoded in the same text
    thread once the batch's items are described, by length, but those `stored(texts)` -> {text: vector}
    already holds (another document's pieces); they and the chunk texts are in the result's ``encoded``.
    Each item's doc id and metadata are checked first (`kira.knowledge_base.inputs.check_items`: ValueError or
    TypeError naming the problem; metadata is converted in place)."""
    from kira.knowledge_base.inputs import check_items

    check_items(items)  # type: ignore[arg-type]  # the items are the writers' dicts
    plans: list[ImagePlan | None] = []
    texts: list[str] = []
    out = EncodedBatch([], [], np.zeros(0), np.zeros(0))
    with _forwarded(stack.image, [item["pixels"] for item in items if item["pixels"] is not None]):
        with ThreadPoolExecutor(1, thread_name_prefix="kira-encode-text") as pool:
            feed = _TextFeed(stack.text, pool)
            try:
                for item in items:  # the images' texts go to the text thread as they are described
                    if item["pixels"] is None:
                        plans.append(None)
                        mine = [item["caption"] or "; ".join(item["tags"]) or item["doc_id"]]
                    else:
                        plan = plan_image(item["pixels"], getattr(stack, "regions", None), chunking, levels)
                        reader = getattr(stack, "ocr", None)
                        lines = reader.read(plan.image) if reader is not None else []
                        if lines:
                            out.read_lines[item["doc_id"]] = [
                                {"text": ln.text, "box": list(ln.box), "score": round(ln.score, 4)} for ln in lines]
                        describe(plan, item["caption"], item["tags"], getattr(stack, "captioner", None),
                                 caption_children=caption_children, lines=lines)
                        _tag(stack, item["doc_id"], plan, out.labels)
                        plans.append(plan)
                        mine = [c.embed_text or c.description or item["doc_id"] for c in plan.chunks]
                    mine += list(item.get("passages", ()))
                    feed.add(mine)
                    texts += mine
                    if pieces_of is not None:
                        doc_id = item["doc_id"]
                        out.pieces.append(pieces_of(item, plans[-1], mine, out.labels.get(doc_id),
                                                    out.read_lines.get(doc_id)))
                feed.flush()
                if out.pieces:  # once, by length: each encoder call then pads to about its own length
                    feed.add(sorted(dict.fromkeys(p for wanted in out.pieces for p in wanted), key=len), stored)
                    feed.flush()
                out.visual = _visual_vectors(stack, plans)  # meanwhile the text thread encodes
            finally:
                feed.wait()
            out.text = feed.vectors(texts)
            out.encoded = feed.found()
    out.plans, out.texts = plans, texts
    return out


class _TextFeed:
    """Texts handed to a text encoder running in `pool`'s thread (onnxruntime releases the GIL, so it runs
    beside this thread's image work on a second core), each distinct text once (its first
    `MAX_ENCODED_CHARS` characters), in calls of at least `FEED_TEXTS` new texts (one text per call costs a
    fifth more per text) or what `flush` sends."""

    def __init__(self, encoder: Any, pool: ThreadPoolExecutor) -> None:
        self.encoder, self.pool = encoder, pool
        self.jobs: list[tuple[list[str], Future[np.ndarray]]] = []
        self.sent: set[str] = set()
        self.waiting: list[str] = []
        self.reused: dict[str, np.ndarray] = {}

    def add(self, texts: Sequence[str], stored: Callable[[list[str]], Mapping[str, np.ndarray]] | None = None) -> None:
        """Encode what of `texts` is new, but what `stored` (when given) already holds."""
        fresh = [t for t in dict.fromkeys(t[:MAX_ENCODED_CHARS] for t in texts) if t not in self.sent]
        if fresh and stored is not None:
            held = {t: np.asarray(v, dtype=np.float32) for t, v in stored(fresh).items() if t in fresh}
            self.reused.update(held)
            self.sent.update(held)
            fresh = [t for t in fresh if t not in held]
        self.sent.update(fresh)
        self.waiting += fresh
        if len(self.waiting) >= FEED_TEXTS:
            self.flush()

    def flush(self) -> None:
        """Send what waits to the encoder's thread."""
        if self.waiting:
            self.jobs.append((self.waiting, self.pool.submit(encode_texts, self.encoder, self.waiting)))
            self.waiting = []

    def wait(self) -> None:
        wait([job for _, job in self.jobs])

    def found(self) -> dict[str, np.ndarray]:
        """Every text sent (its first `MAX_ENCODED_CHARS` characters) -> its vector; raises what the encoder raised."""
        out = dict(self.reused)
        for fresh, job in self.jobs:
            out.update(zip(fresh, job.result()))
        return out

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """float32 rows of `texts` (each sent before); raises what the encoder raised."""
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        found = self.found()
        return np.ascontiguousarray(np.stack([found[t[:MAX_ENCODED_CHARS]] for t in texts]), dtype=np.float32)


def _tag(stack: Any, doc_id: str, plan: ImagePlan, labels: dict[str, list[dict[str, Any]]]) -> None:
    """The image's tagger labels (the captioner's ``labels``, where it has one) into `labels`."""
    tagger = getattr(getattr(stack, "captioner", None), "labels", None)
    if callable(tagger):
        labels[doc_id] = [{"label": lb.name, "p": round(lb.probability, 4)} for lb in tagger(plan.image)]


def _visual_vectors(stack: Any, plans: Sequence[ImagePlan | None]) -> np.ndarray:
    """Every chunk's image vector, rows in plan order (one `encode_boxes` call per image where the encoder
    offers it, else its crops in batches)."""
    boxed = callable(getattr(stack.image, "encode_boxes", None))
    rows: list[np.ndarray] = []
    crops: list[np.ndarray] = []
    for plan in plans:
        if plan is None:
            continue
        if boxed:
            rows.append(stack.image.encode_boxes(plan.image, [c.box for c in plan.chunks]))
        else:
            crops += plan.crops()
    if not boxed:
        return encode_all(stack.image, crops)
    return np.concatenate(rows) if rows else np.zeros((0, stack.image.dim), np.float32)


@contextlib.contextmanager
def _forwarded(encoder: Any, images: list[np.ndarray]) -> Iterator[None]:
    """One batched forward pass over the batch's images where the image encoder (or the CNN inside a fused
    one) keeps a content-keyed cache of forward passes (`forward`): the region proposer, the tagger and the
    chunk vectors of each image then read that cache instead of running the network one image at a time.
    Within the block the images are pinned (`pinned`: each image's content key is computed once)."""
    for part in (encoder, getattr(encoder, "cnn", None)):
        forward = getattr(part, "forward", None)
        if not callable(forward) or not images:
            continue
        pinned = getattr(part, "pinned", None)
        with pinned(images) if callable(pinned) else contextlib.nullcontext():
            cache_items = getattr(getattr(part, "config", None), "cache_items", 0)
            if isinstance(cache_items, int) and cache_items >= len(images):
                forward(images)
            yield
        return
    yield


def prefetch_forward(encoder: Any, images: list[np.ndarray]) -> bool:
    """Run the image encoder's (or its CNN's) forward pass over `images` ahead of `encode_batch`, e.g. in the
    thread that decodes the next batch while this one is encoded: its cache then answers that batch's
    `_forwarded`. Only where the cache holds this batch and the one being encoded (twice `len(images)`), so
    nothing is computed twice; True when it ran. Nothing is stored: a crash loses no more than before."""
    for part in (encoder, getattr(encoder, "cnn", None)):
        forward = getattr(part, "forward", None)
        cache_items = getattr(getattr(part, "config", None), "cache_items", 0)
        if callable(forward) and images and isinstance(cache_items, int) and cache_items >= 2 * len(images):
            forward(images)
            return True
    return False


def encode_texts(encoder: Any, texts: Sequence[str]) -> np.ndarray:
    """Encode each distinct text once (its first `MAX_ENCODED_CHARS` characters); rows follow `texts`."""
    texts = [t[:MAX_ENCODED_CHARS] for t in texts]
    unique = list(dict.fromkeys(texts))
    vectors = encode_all(encoder, unique)
    if len(unique) == len(texts):
        return vectors
    row = {t: i for i, t in enumerate(unique)}
    return np.ascontiguousarray(vectors[[row[t] for t in texts]]) if texts else vectors


def encode_all(encoder: Any, items: Sequence[Any]) -> np.ndarray:
    """`encoder.encode` over `items` in batches of `ENCODE_BATCH`, float32 rows."""
    parts = [np.asarray(encoder.encode(list(items[i : i + ENCODE_BATCH])), dtype=np.float32)
             for i in range(0, len(items), ENCODE_BATCH)]
    if not parts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(parts, axis=0))
