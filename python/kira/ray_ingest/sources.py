"""Bulk ingestion as a Ray Data job: images -> chunks and vectors -> a knowledge base's Milvus collection.

The driver lists the images (a local folder, or any path pyarrow's filesystems read:
``s3://``, ``gs://``, ``hdfs://``, ``file://``), reserves their chunk-id ranges and streams
them through `map_batches` to a pool of actors. Each actor loads the model stack once
(`kira.models.load_default()`), and per batch decodes, chunks, describes and encodes the
images (`kira.knowledge_base.milvus.encode.encode_images`, the knowledge base's own batch path)
and writes the chunks to Milvus itself (`replace_documents`: upserts by chunk id). Only a
small status row per image comes back to the driver, so memory stays bounded whatever the
corpus size (Ray Data's streaming executor; nothing is materialised).

The pool is sized from the CPUs Ray reports, always leaving some for Ray Data's other
tasks: a pool holding every CPU is Ray's known way to hang a pipeline.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig
from kira.ray_ingest.runtime import start_ray, stop_ray

log = logging.getLogger(__name__)


def require_ray() -> Any:
    """Import ray (with Ray Data), or raise an ImportError naming the extra."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ImportError('Ray ingestion needs Ray Data: pip install "kira[ray]"') from exc
    return ray


@dataclass
class RayIngestSummary:
    """What `ingest_ray` did."""

    added: list[str] = field(default_factory=list)  # doc ids written
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    chunks: int = 0  # chunk rows written
    actors: int = 0  # actor pool size used
    seconds: float = 0.0  # wall time of the job (listing to last write)

    def __str__(self) -> str:
        lines = [f"added {len(self.added)} image(s) ({self.chunks} chunks) with {self.actors} actor(s) in "
                 f"{self.seconds:.1f} s, skipped {len(self.skipped)}"]
        lines += [f"  skipped {path}: {reason}" for path, reason in self.skipped]
        return "\n".join(lines)


def actor_pool_size(resources: Mapping[str, float], *, cpus_per_actor: float = 1.0,
                    requested: int | None = None) -> int:
    """How many encode actors fit the cluster's CPUs (`ray.available_resources()`) and leave a quarter of
    a CPU per 1 (at most 1 CPU) free for Ray Data's own tasks; at least 1, at most `requested`.

    ValueError for cpus_per_actor <= 0 or requested < 1, or where not even one actor fits.
    """
    if cpus_per_actor <= 0 or (requested is not None and requested < 1):
        raise ValueError(f"cpus_per_actor must be > 0 and actors >= 1; got {cpus_per_actor}, {requested}")
    cpus = float(resources.get("CPU", 0.0))
    reserve = min(1.0, 0.25 * cpus)
    fits = math.floor((cpus - reserve) / cpus_per_actor + 1e-9)
    if fits < 1:
        raise ValueError(f"Ray reports {cpus:g} CPU(s): no actor of {cpus_per_actor:g} CPU fits with {reserve:g} "
                         "kept free; lower cpus_per_actor or give Ray more CPUs")
    if requested is not None and requested > fits:
        log.warning("%d actors asked, %d fit in %g CPUs at %g each; using %d", requested, fits, cpus,
                    cpus_per_actor, fits)
    return min(fits, requested) if requested is not None else fits


_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})


def walk_order(relative: str) -> list[tuple[int, str]]:
    """Sort key of a relative path in the local ingest's order (`os.walk`, sorted: a folder's files, then its
    sub-folders'), so job ordinals, and so chunk ids, follow the order a local ingest adds the files in."""
    parts = relative.split("/")
    return [(1, p) for p in parts[:-1]] + [(0, parts[-1])]


def list_sources(source: str | os.PathLike, *, follow_links: bool = False) -> list[tuple[str, str]]:
    """(path, doc id) of every image under `source`, sorted by the path relative to it: a local folder or
    file, or a pyarrow filesystem uri. Doc ids are the local ingest's (the relative path without its suffix,
    `kira.knowledge_base.ingest.relative_doc_ids`). ValueError where nothing is there."""
    text = os.fspath(source)
    if "://" not in text:
        from kira.knowledge_base.ingest import collect_paths

        root = Path(text)
        paths = [str(p) for p in collect_paths(root, follow_links=follow_links)]
        rel = [Path(p).relative_to(root).as_posix() if root.is_dir() else Path(p).name for p in paths]
    else:
        from pyarrow import fs

        filesystem, base = fs.FileSystem.from_uri(text)
        kind = filesystem.get_file_info(base).type
        if kind == fs.FileType.NotFound:
            raise ValueError(f"no such file or folder: {text}")
        if kind == fs.FileType.File:
            files, rel = [base], [Path(base).name]
        else:
            infos = filesystem.get_file_info(fs.FileSelector(base, recursive=True))
            files = sorted(i.path for i in infos
                           if i.type == fs.FileType.File and Path(i.path).suffix.lower() in _SUFFIXES)
            rel = [p[len(base):].lstrip("/") for p in files]
        scheme = text.split("://", 1)[0]
        paths = [f"{scheme}://{p}" for p in files]
    from kira.knowledge_base.ingest import relative_doc_ids

    order = sorted(range(len(rel)), key=lambda n: walk_order(rel[n]))  # one order for every filesystem
    paths, rel = [paths[n] for n in order], [rel[n] for n in order]
    return list(zip(paths, relative_doc_ids(rel)))


def _read_image(path: str, max_pixels: int | None = None) -> np.ndarray:
    """The image at a local path or pyarrow uri, as `kira.images.load_image` returns it (larger than
    `max_pixels`: ImageError, as the local ingest skips it)."""
    import warnings

    from PIL import Image

    from kira.images import MAX_PIXELS, load_image

    limit = int(max_pixels or MAX_PIXELS)
    if "://" not in path:
        with warnings.catch_warnings():  # kira's max_pixels is the limit that applies; Pillow's warning would repeat it
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return load_image(Path(path), max_pixels=limit)
    import io

    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(path)
    with filesystem.open_input_stream(inner) as stream:
        data = stream.read()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        with Image.open(io.BytesIO(data)) as im:
            return load_image(im, max_pixels=limit)


class EncodeAndWrite:
    """Ray actor: loads the model stack and a Milvus client once, then encodes and writes batches."""

    def __init__(self, config: dict[str, Any], options: dict[str, Any]) -> None:
        from kira.config import ChunkingConfig
        from kira.models import load_default

        self.stack = load_default(prefer_cuda=False, threads=options["threads"])
        self.collection = MilvusCollection.open(MilvusConfig(**config), create=False)
        self.chunking = ChunkingConfig(**options["chunking"])
        self.levels, self.caption_children = tuple(options["levels"]), options["caption_children"]
        self.tags, self.metadata = options["tags"], options["metadata"]

    def _encode(self, items: list[Any]) -> list[Any]:
        from kira.knowledge_base.milvus.encode import encode_images

        return encode_images(self.stack, items, chunking=self.chunking, levels=self.levels,
                             caption_children=self.caption_children)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from kira.knowledge_base.milvus.encode import ImageItem
        from kira.knowledge_base.milvus.writes import replace_documents
        from kira.images import ImageError

        status: dict[str, tuple[str, str, int]] = {}
        items = []
        for path, doc_id, ordinal in zip(batch["path"], batch["doc_id"], batch["ordinal"]):
            path, doc_id = str(path), str(doc_id)
            try:
                pixels = _read_image(path)
            except (ImageError, OSError) as exc:
                status[path] = ("skipped", str(exc), 0)
                continue
            items.append((path, ImageItem(int(ordinal), doc_id, pixels,
                                          tags=tuple(self.tags(path)) if self.tags else (),
                                          metadata=dict(self.metadata(path)) if self.metadata else {})))
        try:
            groups = [(items, self._encode([it for _, it in items]))] if items else []
        except (ValueError, RuntimeError) as exc:  # one bad image must not sink the batch: one at a time
            log.warning("batch failed (%s); encoding its images one at a time", exc)
            groups = []
            for path, it in items:
                try:
                    groups.append(([(path, it)], self._encode([it])))
                except (ValueError, RuntimeError) as inner:
                    status[path] = ("skipped", str(inner), 0)
        for group_items, records in groups:
            replace_documents(self.collection, records)
            counts: dict[str, int] = {}
            for r in records:
                counts[r.doc_id] = counts.get(r.doc_id, 0) + 1
            for path, it in group_items:
                status[path] = ("added", "", counts.get(it.doc_id, 0))
        paths = [str(p) for p in batch["path"]]
        return {"path": np.array(paths, dtype=object), "doc_id": batch["doc_id"],
                "status": np.array([status[p][0] for p in paths], dtype=object),
                "reason": np.array([status[p][1] for p in paths], dtype=object),
                "chunks": np.array([status[p][2] for p in paths], dtype=np.int64)}


def _lite_server_uri(config: MilvusConfig) -> str:
    """For a Milvus Lite file, the 127.0.0.1 server pymilvus runs for it in this process (actors in other
    processes reach it there; one machine only). A server uri is returned as is."""
    if not config.is_lite:
        return config.uri
    from milvus_lite import server_manager_instance

    uri = server_manager_instance.start_and_get_uri(config.uri)
    if uri is None:
        raise ConnectionError(f"could not start Milvus Lite for {config.uri!r}; see the milvus_lite log")
    return uri


def ingest_ray(
    config: MilvusConfig,
    source: str | os.PathLike,
    *,
    address: str | None = None,
    actors: int | None = None,
    cpus_per_actor: float = 1.0,
    batch_size: int = 16,
    tags: Callable[[str], Iterable[str]] | None = None,
    metadata: Callable[[str], dict[str, Any]] | None = None,
    chunking: Any = None,
    levels: Sequence[str] = ("document", "region", "patch"),
    caption_children: bool = False,
    progress: bool | None = None,
) -> RayIngestSummary:
    """Ingest every image under `source` into the Milvus collection of `config` with Ray Data.

    Parameters
    ----------
    config: the knowledge base's Milvus config (created if absent, checked if present).
    source: a local folder/file or a pyarrow filesystem uri (``s3://bucket/prefix``).
    address: a Ray cluster address; None joins a running local Ray or starts one
        (``ray.init(num_cpus=2)`` here; call ``ray.init`` yourself for other settings).
    actors: encode actors wanted (default: as many as fit, `actor_pool_size`); cpus_per_actor:
        the CPUs each actor reserves (its onnxruntime threads follow it).
    batch_size: images per actor call (and per Milvus write).
    tags, metadata: picklable functions path -> tags / metadata dict.
    chunking, levels, caption_children: as the knowledge base's config (`kira.config.ChunkingConfig`).
    progress: Ray Data's progress bars (default: when this module's logger is at INFO).

    Returns a `RayIngestSummary` (skipped files with reasons). A document ingested again replaces
    its chunks. Raises ImportError without ray (naming ``kira[ray]``), ValueError for bad
    arguments or an empty source, and what `MilvusCollection.open` raises.
    """
    ray = require_ray()
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    from kira.knowledge_base.milvus.encode import encode_images  # noqa: F401  (imports the model side early: fail fast)
    from kira.knowledge_base.milvus.writes import reserve_ordinals
    from kira.config import ChunkingConfig

    started = time.perf_counter()
    sources = list_sources(source)
    summary = RayIngestSummary()
    if not sources:
        return summary
    with MilvusCollection.open(config) as collection:
        first = reserve_ordinals(collection, len(sources))
    worker_config = asdict(replace(config, uri=_lite_server_uri(config)))
    own_ray = not ray.is_initialized()
    if own_ray:
        start_ray(ray, address)
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = bool(progress if progress is not None else log.isEnabledFor(logging.INFO))
        pool = actor_pool_size(ray.available_resources(), cpus_per_actor=cpus_per_actor, requested=actors)
        summary.actors = pool
        options = {"threads": max(1, int(cpus_per_actor)), "chunking": asdict(chunking or ChunkingConfig()),
                   "levels": list(levels), "caption_children": caption_children, "tags": tags, "metadata": metadata}
        rows = [{"path": p, "doc_id": d, "ordinal": first + i} for i, (p, d) in enumerate(sources)]
        ds = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows) // batch_size, 1000)))
        ds = ds.map_batches(EncodeAndWrite, fn_constructor_kwargs={"config": worker_config, "options": options},
                            batch_size=batch_size, batch_format="numpy", num_cpus=cpus_per_actor,
                            compute=ray.data.ActorPoolStrategy(size=pool))
        for batch in ds.iter_batches(batch_size=256, batch_format="numpy"):
            for path, doc_id, status, reason, chunks in zip(batch["path"], batch["doc_id"], batch["status"],
                                                            batch["reason"], batch["chunks"]):
                if status == "added":
                    summary.added.append(str(doc_id))
                    summary.chunks += int(chunks)
                else:
                    summary.skipped.append((str(path), str(reason)))
        with MilvusCollection.open(config, create=False) as collection:
            collection.flush()  # seal the job's rows into indexed segments
    finally:
        if own_ray:
            stop_ray(ray)
    summary.seconds = time.perf_counter() - started
    return summary
