"""`kira ingest KB SOURCE --engine ray`: a Ray Data job that fills a Milvus-backed knowledge base.

The driver lists the images as the local ingest does (`kira.ray_ingest.sources.list_sources`:
a local folder or any pyarrow filesystem uri; the same doc ids, in the same order), leaves out
documents already stored (as the local ingest skips them), reserves the chunk-id ranges of the
rest, and streams them through `map_batches` to an actor pool sized from the CPUs Ray reports.
Each actor loads the model stack and a Milvus client once; per batch it decodes the images,
reads their captions (the ``captions`` mapping, or ``<stem>.txt`` beside each image, as the
local ingest reads them), and writes them with the knowledge base's own write path
(`kira.knowledge_base.writing.prepare_batch`, text pieces included, then
`kira.knowledge_base.milvus.kb_writes.milvus_rows` / `write_items`), so a Ray ingest stores the same
chunk ids, vectors, pieces and documents as `KnowledgeBase.ingest` on the same files. Only a status row
per image comes back (bounded memory); the driver shows a progress bar and returns the local
ingest's `IngestSummary`, skipped files with reasons.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from kira.ray_ingest.sources import actor_pool_size, lite_server_uri, list_sources, read_image, require_ray
from kira.ray_ingest.runtime import start_ray, stop_ray

log = logging.getLogger(__name__)
ACTOR_START_TIMEOUT_S = 180  # how long a Ray ingest waits for its encode pool (each actor loads the models)


def _caption(path: str, captions: Mapping[str, str] | None, root: str | None) -> str | None:
    """The caption the local ingest would read for `path` (a mapping entry, else ``<stem>.txt`` beside it)."""
    if "://" not in path:
        from kira.knowledge_base.ingest import _caption_for

        return _caption_for(Path(path), captions, Path(root) if root else None)
    if captions is not None:
        name = path.rsplit("/", 1)[-1]
        for key in (path, name, name.rsplit(".", 1)[0]):
            if key in captions:
                return captions[key]
        return None
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(path.rsplit(".", 1)[0] + ".txt")
    if filesystem.get_file_info(inner).type != fs.FileType.File:
        return None
    with filesystem.open_input_stream(inner) as stream:
        return stream.read().decode("utf-8", errors="replace").strip() or None


def _node_id() -> str:
    """The Ray node id of this process ("" outside Ray)."""
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id()) if ray.is_initialized() else ""
    except Exception:  # noqa: BLE001 - a Ray without a runtime context here: not on a node
        return ""


class KbEncodeAndWrite:
    """Ray actor: the model stack and a Milvus client, loaded once; encodes and writes batches of images."""

    def __init__(self, target: dict[str, Any], options: dict[str, Any]) -> None:
        from kira.config import KiraConfig
        from kira.knowledge_base.milvus.records import KbRecords
        from kira.knowledge_base.milvus.connection import connect
        from kira.knowledge_base.milvus.schema import MilvusCollection, MilvusConfig
        from kira.models import load_default

        self.stack = load_default(prefer_cuda=False, threads=options["threads"], image_encoder=options["image_encoder"])
        self.client = connect(target["uri"], target["token"], target["timeout"])
        self.collection = MilvusCollection.attach(self.client, MilvusConfig(**target), create=False)
        self.records = KbRecords(self.client, target["collection"])
        self.config = KiraConfig.from_dict(options["config"])
        self.levels, self.caption_children = tuple(options["levels"]), options["caption_children"]
        self.captions, self.root = options["captions"], options["root"]
        self.tags, self.metadata, self.max_pixels = options["tags"], options["metadata"], options["max_pixels"]
        self.node = _node_id()  # which Ray node this actor runs on (the driver counts them)

    def _write(self, items: list[dict[str, Any]], ordinals: list[int]) -> dict[str, int]:
        from kira.knowledge_base.milvus.kb_writes import milvus_rows, write_items
        from kira.knowledge_base.writing import prepare_batch

        batch = prepare_batch(self.stack, items, config=self.config, levels=self.levels,
                              caption_children=self.caption_children)
        rows = milvus_rows(batch, ordinals)
        write_items(self.collection, self.records, rows)
        return rows.chunks_per_doc

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from kira.images import ImageError
        from kira.knowledge_base.ingest import file_digest
        from kira.knowledge_base.inputs import clean_text, tags_arg

        status: dict[str, tuple[str, str, int]] = {}
        items: list[dict[str, Any]] = []
        ordinals: list[int] = []
        for path, doc_id, ordinal in zip(batch["path"], batch["doc_id"], batch["ordinal"]):
            path, doc_id = str(path), str(doc_id)
            try:
                caption = _caption(path, self.captions, self.root)
                pixels = read_image(path, self.max_pixels)
                tags = tags_arg(self.tags(Path(path) if "://" not in path else path)) if self.tags else ()
                metadata = dict(self.metadata(Path(path) if "://" not in path else path)) if self.metadata else {}
            except (ImageError, OSError, ValueError) as exc:
                status[path] = ("skipped", str(exc), 0)
                continue
            items.append({"pixels": pixels, "doc_id": doc_id, "caption": clean_text(caption, f"the caption of {path}"),
                          "tags": tags, "metadata": metadata, "source": path, "sequence": None, "view": None,
                          "digest": file_digest(path) if "://" not in path else None})
            ordinals.append(int(ordinal))
        try:
            counts = self._write(items, ordinals) if items else {}
            done = {item["source"]: counts.get(item["doc_id"], 0) for item in items}
        except (ValueError, OSError, RuntimeError) as exc:  # one bad image must not sink the batch: one at a time
            log.warning("batch failed (%s); writing its images one at a time", exc)
            done = {}
            for item, ordinal in zip(items, ordinals):
                try:
                    done[item["source"]] = self._write([item], [ordinal]).get(item["doc_id"], 0)
                except (ValueError, OSError, RuntimeError) as inner:
                    status[item["source"]] = ("skipped", str(inner), 0)
        for path, chunks in done.items():
            status[path] = ("added", "", chunks)
        paths = [str(p) for p in batch["path"]]
        return {"path": np.array(paths, dtype=object), "doc_id": batch["doc_id"],
                "status": np.array([status[p][0] for p in paths], dtype=object),
                "reason": np.array([status[p][1] for p in paths], dtype=object),
                "chunks": np.array([status[p][2] for p in paths], dtype=np.int64),
                "node": np.array([self.node] * len(paths), dtype=object)}


def ingest_ray_kb(kb: Any, source: str | os.PathLike[str], *, address: str | None = None, actors: int | None = None,
                  cpus_per_actor: float = 1.0, batch_size: int = 16, captions: Mapping[str, str] | None = None,
                  tags: Callable[[Any], Iterable[str]] | None = None,
                  metadata: Callable[[Any], dict[str, Any]] | None = None, follow_links: bool = False,
                  max_pixels: int | None = None, progress: bool | None = None) -> Any:
    """Add every image under `source` to the Milvus-backed knowledge base `kb` with a Ray Data job (module
    docstring); returns an `IngestSummary` and commits.

    address: a Ray cluster address (None: a running local Ray, else ``ray.init(num_cpus=2)``);
    actors / cpus_per_actor: the encode pool (default as many as fit, `actor_pool_size`);
    batch_size: images per actor call and per Milvus write; captions: file name / stem -> caption
    (default: ``<stem>.txt`` beside each image); tags, metadata: picklable functions path -> tags /
    metadata dict (as `KnowledgeBase.ingest` takes; a pyarrow uri is passed as a str);
    follow_links, max_pixels: as the local ingest; progress: a progress bar (default: when
    kira.knowledge_base.ingest logs at INFO). Raises ValueError for an embedded knowledge base
    (naming the fix), a read-only one, or batch_size < 1; ImportError naming ``kira[ray]``.
    """
    from kira.knowledge_base.ingest import IngestSummary, _changed, _progress, file_digest

    if kb.backend != "milvus":
        raise ValueError(f"{kb.path} is an embedded knowledge base; --engine ray writes to a knowledge base created "
                         "with the Milvus backend (KnowledgeBase.create(..., backend='milvus'), or `kira ingest` of a "
                         "new knowledge base with --backend milvus); ingest this one without --engine ray")
    storage = kb.external_writers()  # writable, with the collection, dims and models' identity before any actor
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}")
    ray = require_ray()
    from kira.knowledge_base.milvus.writes import reserve_ordinals

    listed = list_sources(source, follow_links=follow_links)
    summary = IngestSummary(found=len(listed))
    stored = set(kb.documents([d for _, d in listed]))
    todo = []
    for path, doc_id in listed:
        if doc_id not in stored:
            todo.append((path, doc_id))
            continue
        try:  # as the local ingest: unchanged files counted, a changed one reported (a uri: by its source)
            change = _changed(kb, doc_id, Path(path) if "://" not in path else path,
                              file_digest(path) if "://" not in path else "")
        except OSError as exc:
            change = f"cannot read it ({exc.strerror or exc})"
        (summary.unchanged.append(doc_id) if change is None else summary.skipped.append((path, change)))
    if not todo:
        return summary
    collection = storage.collection
    first = reserve_ordinals(collection, len(todo))
    config = collection.config
    target = {**asdict(config), "uri": lite_server_uri(config)}
    from kira.models.stack import image_encoder_choice

    root = os.fspath(source) if "://" not in os.fspath(source) and Path(source).is_dir() else None
    options = {"threads": max(1, int(cpus_per_actor)), "config": kb.config.to_dict(),
               "levels": list(kb.levels), "caption_children": kb.caption_children, "captions": captions,
               "root": root, "image_encoder": image_encoder_choice(kb.built_with().get("image")),
               "tags": tags, "metadata": metadata, "max_pixels": max_pixels}
    own_ray = not ray.is_initialized()
    if own_ray:
        start_ray(ray, address)
    bar = _progress(len(todo), progress)
    nodes: set[str] = set()
    context = ray.data.DataContext.get_current()  # this process's: what kira sets here is put back at the end
    before = {key: getattr(context, key) for key in ("enable_progress_bars", "wait_for_min_actors_s")}
    try:
        context.enable_progress_bars = False  # kira's own bar counts images
        # the whole pool starts (each actor loads the models) before the first batch is handed out, so a node
        # whose actor starts last still gets its share instead of idling while the first actor takes every batch
        context.wait_for_min_actors_s = ACTOR_START_TIMEOUT_S
        pool = actor_pool_size(ray.available_resources(), cpus_per_actor=cpus_per_actor, requested=actors)
        rows = [{"path": p, "doc_id": d, "ordinal": first + i} for i, (p, d) in enumerate(todo)]
        ds = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows) // batch_size, 1000)))
        ds = ds.map_batches(KbEncodeAndWrite, fn_constructor_kwargs={"target": target, "options": options},
                            batch_size=batch_size, batch_format="numpy", num_cpus=cpus_per_actor,
                            compute=ray.data.ActorPoolStrategy(size=pool))
        for batch in ds.iter_batches(batch_size=batch_size, batch_format="numpy"):
            storage.note_external_writes()  # the actors wrote; the writer lease is checked and renewed (milvus.lease)
            summary.batches += 1
            nodes.update(str(n) for n in batch.get("node", ()) if n)
            for path, doc_id, status, reason in zip(batch["path"], batch["doc_id"], batch["status"], batch["reason"]):
                if status == "added":
                    summary.added.append(str(doc_id))
                else:
                    summary.skipped.append((str(path), str(reason)))
                    log.info("skipped %s: %s", path, reason)
            if bar is not None:
                bar.update(len(batch["path"]))
    finally:
        for key, value in before.items():
            setattr(context, key, value)
        if bar is not None:
            bar.close()
        if own_ray:
            stop_ray(ray)  # and Ray's authentication state as it was (kira.ray_ingest.runtime): a next job starts clean
    storage.note_external_writes()  # the actors wrote: flush and publish their writes
    kb.commit()
    log.info("ray ingest: %d added, %d skipped with %d actor(s) on %d node(s)", len(summary.added),
             len(summary.skipped), pool, len(nodes))
    return summary
