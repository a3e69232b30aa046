"""What a Ray ingest reads and how big its pool is: the images it lists, decodes, and the actors it starts.

The driver lists the images (a local folder, or any path pyarrow's filesystems read:
``s3://``, ``gs://``, ``hdfs://``, ``file://``) in the local ingest's order and doc ids
(`list_sources`); actors decode them (`read_image`). The pool is sized from the CPUs Ray
reports, always leaving some for Ray Data's other tasks: a pool holding every CPU is Ray's
known way to hang a pipeline (`actor_pool_size`). kira.ray_ingest.kb runs the job.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from kira.knowledge_base.milvus.schema import MilvusConfig

log = logging.getLogger(__name__)


def require_ray() -> Any:
    """Import ray (with Ray Data), or raise an ImportError naming the extra."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ImportError('Ray ingestion needs Ray Data: pip install "kira[ray]"') from exc
    return ray


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


def list_sources(source: str | os.PathLike[str], *, follow_links: bool = False) -> list[tuple[str, str]]:
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


def read_image(path: str, max_pixels: int | None = None) -> np.ndarray:
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


def lite_server_uri(config: MilvusConfig) -> str:
    """For a Milvus Lite file, the 127.0.0.1 server pymilvus runs for it in this process (actors in other
    processes reach it there; one machine only). A server uri is returned as is."""
    if not config.is_lite:
        return config.uri
    from milvus_lite import server_manager_instance

    uri: str | None = server_manager_instance.start_and_get_uri(config.uri)
    if uri is None:
        raise ConnectionError(f"could not start Milvus Lite for {config.uri!r}; see the milvus_lite log")
    return uri
