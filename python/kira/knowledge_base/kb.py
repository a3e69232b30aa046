"""`KnowledgeBase`: a persistent, durable store of chunked, embedded images and passages.

A knowledge base is a directory::

    kira.sqlite (+ -wal, -shm)   documents, chunks, vectors (BLOBs), tags, groups, provenance
    visual.index, text.index     the core's index files (a cache of the database's vectors)
    manifest.json                which database generation the index files match
    config.json                  the KiraConfig it was built with
    profile.json                 the user's DomainProfile (domain knowledge; empty by default)
    bridge.*                     the fitted text->image bridge (default stack only)
    adapter/                     the domain adapter, when one is set

Writes go into one open transaction; `commit()` makes them durable (the database), then
saves the index files and the manifest once enough rows changed since they were last
saved (`checkpoint_share`), and `close()` always does. `ingest` commits every batch. Any number of
processes may open a knowledge base with ``read_only=True`` while one writer works;
a second writer is refused. See `kira.knowledge_base.vectors` for how index files that
are behind the database (a deferred checkpoint, a crash) are brought up to date on open.
"""

from __future__ import annotations

import io
import zipfile
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from kira import _core
from kira.config import KiraConfig
from kira.images import ImageLike, load_image
from kira.knowledge_base.adapters import adapter_name, is_registered, registered_adapters, resolve_adapter
from kira.knowledge_base.inputs import clean_text, tags_arg
from kira.knowledge_base.chunker import LEVELS, ImagePlan, describe, plan_image
from kira.knowledge_base.store import DocumentRow, Store
from kira.knowledge_base.vectors import (INDEX_CHECKPOINT_SHARE, RepairReport, VectorSpaces, remove_stale_temporaries,
                                         write_json_atomic)

log = logging.getLogger(__name__)
T = TypeVar("T")
BRIDGE_REFIT_SHARE = 0.05  # refit the text->image bridge once the captioned documents changed by this share (`bridge`)

CONFIG_FILE = "config.json"
PROFILE_FILE = "profile.json"  # the user's DomainProfile (kira.profile)
LOCK_FILE = "writer.lock"
THUMBNAIL_SIDE = 160
ENCODE_BATCH = 64  # crops / texts per encoder call


MAX_LEXICAL_CHARS = 20_000
"""What of one chunk's text the lexical (BM25) index reads: a few thousand words, well past
any caption or passage it ranks by, so a 10 MB caption no longer costs seconds per commit."""


def _thumbnail_png(image: np.ndarray) -> bytes:
    from PIL import Image

    im = Image.fromarray(image)
    im.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


MAX_ENCODED_CHARS = 8192
"""What of one text is handed to the text encoder: far past any sentence encoder's own token
limit (all-MiniLM-L6-v2 reads 256 tokens), so no vector changes, while a 10 MB caption is no
longer tokenised whole (19 s per add_image). The stored caption and description keep the
full text."""


def _encode_texts(encoder: Any, texts: Sequence[str]) -> np.ndarray:
    """Encode each distinct text once (its first `MAX_ENCODED_CHARS` characters)."""
    texts = [t[:MAX_ENCODED_CHARS] for t in texts]
    unique = list(dict.fromkeys(texts))
    vectors = _encode(encoder, unique)
    if len(unique) == len(texts):
        return vectors
    row = {t: i for i, t in enumerate(unique)}
    return np.ascontiguousarray(vectors[[row[t] for t in texts]]) if texts else vectors


def _encode(encoder: Any, items: Sequence[Any]) -> np.ndarray:
    parts = [np.asarray(encoder.encode(list(items[i : i + ENCODE_BATCH])), dtype=np.float32)
             for i in range(0, len(items), ENCODE_BATCH)]
    if not parts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(parts, axis=0))


def _group_arg(value: Any, what: str) -> tuple[str, float | None] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value, None
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return str(value[0]), float(value[1])
    raise ValueError(f"{what} must be a group id (str) or (group_id, position); got {value!r}")


def _check_archive(path: Path) -> None:
    """Raise zipfile.BadZipFile when `path` is a .npz archive that is damaged (each member's
    checksum is read), before numpy opens it: a damaged archive must mean a refit, not an
    error on every text ask."""
    if path.suffix != ".npz" or not path.is_file():
        return
    with open(path, "rb") as fh, zipfile.ZipFile(fh) as archive:
        bad = archive.testzip()
    if bad is not None:
        raise zipfile.BadZipFile(f"{path}: member {bad} is damaged")


def _read_config(path: Path) -> KiraConfig:
    """The stored KiraConfig (the defaults when the file is absent). Raises ValueError naming the
    file when it is not a JSON object of config fields."""
    if not path.is_file():
        return KiraConfig()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); restore it, or delete it to answer with the "
                         "default constants") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object of config fields; restore it, "
                         "or delete it to answer with the default constants")
    try:
        return KiraConfig.from_dict(data)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise ValueError(f"{path} does not hold a kira configuration ({exc}); restore it, or delete it to "
                         "answer with the default constants") from None


class KnowledgeBase:
    """A knowledge base directory opened for reading or writing. Use `create` or `open`.

    Thread safety: one instance belongs to one thread. Several processes may read at once
    (``read_only=True``) while one process writes.
    """

    def __init__(self, path: Path, store: Store, config: KiraConfig, models: Any, *, read_only: bool) -> None:
        self.path = Path(path)
        self.store = store
        self.config = config
        self._models = models
        self.read_only = read_only
        self._lock_fd: int | None = None
        self._adapter: Any = None
        self._profile: Any = None
        self._caches: dict[str, Any] = {}
        self._adapter_version = store.get_meta("adapter_version", "0")  # what the loaded visual index was projected with
        # derived views kept across commits and updated with what changed ({name: (largest chunk id
        # seen, removal-log position read, view)}); a rollback drops them (they may hold undone rows)
        self._derived: dict[str, tuple[int, int, Any]] = {}
        # a commit saves the index files once this share of their rows has changed (`commit`)
        self.checkpoint_share = INDEX_CHECKPOINT_SHARE
        self._seen_generation = store.generation()
        self.repair: RepairReport | None = None
        self.levels: tuple[str, ...] = tuple(json.loads(store.get_meta("levels", json.dumps(LEVELS)) or "[]"))
        self.caption_children = (store.get_meta("caption_children", "1") == "1")
        dims = json.loads(store.get_meta("dims", "null") or "null")
        self.vectors: VectorSpaces | None = None
        if dims is not None:
            self._open_vectors(dims)

    @property
    def profile(self) -> Any:
        """The knowledge base's `kira.DomainProfile` (``profile.json``; the empty profile when none is stored)."""
        if self._profile is None:
            from kira.profile import DomainProfile

            file = self.path / PROFILE_FILE
            self._profile = DomainProfile.load(file) if file.is_file() else DomainProfile()
        return self._profile

    def set_profile(self, profile: Any) -> None:
        """Store `profile` (a `kira.DomainProfile`, a mapping or a .toml/.json file; None: empty) with the
        knowledge base, atomically. It takes effect for the next `Kira` built on this knowledge base."""
        self._writable()
        from kira.profile import as_profile

        profile = as_profile(profile)
        profile.save(self.path / PROFILE_FILE)
        self._profile = profile

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        config: KiraConfig | None = None,
        models: Any = None,
        *,
        index: str = "flat",
        levels: Sequence[str] = LEVELS,
        caption_children: bool = False,
        profile: Any = None,
    ) -> KnowledgeBase:
        """Create a new, empty knowledge base directory at `path` and open it for writing.

        Parameters
        ----------
        config: the constants to build and answer with (stored with the knowledge base).
        models: a `kira.models.stack.ModelStack`; `kira.models.load_default()` when None
            (loaded on first use).
        index: 'flat' (exact search) or 'hnsw' (graph index for large bases).
        levels: chunk levels to store per image (the document level is always stored).
        caption_children: describe each region/patch crop with the captioner too (one
            sentence-encoder pass per chunk instead of per document: slower ingest).
        profile: the user's domain knowledge (`kira.DomainProfile`, a mapping, or a .toml /
            .json file); stored with the knowledge base. None: the empty profile.

        Raises ValueError if `path` already holds a knowledge base or a non-empty directory.
        """
        path = Path(path)
        from kira.profile import as_profile

        profile = as_profile(profile)  # validated before anything is written
        if index not in ("flat", "hnsw"):
            raise ValueError(f"index must be 'flat' or 'hnsw'; got {index!r}")
        bad = set(levels) - set(LEVELS)
        if bad:
            raise ValueError(f"unknown chunk levels {sorted(bad)}; choose from {LEVELS}")
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ValueError(f"{path} exists and is not an empty directory; use KnowledgeBase.open or pick a new path")
        path.mkdir(parents=True, exist_ok=True)
        config = config or KiraConfig()
        store = Store(path, create=True)
        kb = cls(path, store, config, models, read_only=False)
        kb._take_lock()
        store.set_meta("index_kind", index)
        store.set_meta("levels", json.dumps(list(dict.fromkeys(["document", *levels]))))
        store.set_meta("caption_children", "1" if caption_children else "0")
        store.commit()
        kb.levels = tuple(json.loads(store.get_meta("levels") or "[]"))
        kb.caption_children = caption_children
        write_json_atomic(path / CONFIG_FILE, config.to_dict())
        profile.save(path / PROFILE_FILE)
        kb._profile = profile
        return kb

    @classmethod
    def open(cls, path: str | os.PathLike, models: Any = None, *, read_only: bool = False) -> KnowledgeBase:
        """Open an existing knowledge base; index files are loaded, never rebuilt
        (a gap left by a crash is repaired from the stored vectors).

        Raises ValueError if `path` is not a knowledge base, or (writing) if another
        process holds it open for writing.
        """
        path = Path(path)
        if not (path / "kira.sqlite").is_file():
            raise ValueError(f"{path} is not a kira knowledge base (no kira.sqlite); create one with "
                             f"`kira ingest {path} FOLDER` or KnowledgeBase.create")
        config = _read_config(path / CONFIG_FILE)
        lock_fd = None
        if not read_only:
            probe = cls.__new__(cls)
            probe.path = path
            probe._lock_fd = None
            probe._take_lock()
            lock_fd = probe._lock_fd
        store = None
        try:
            if lock_fd is not None:
                remove_stale_temporaries(path)  # the lock is ours: no save is in flight
            store = Store(path, read_only=read_only)
            kb = cls(path, store, config, models, read_only=read_only)
        except BaseException:
            if store is not None:
                store.close()
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        kb._lock_fd = lock_fd
        return kb

    def _take_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory lock
            return
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ValueError(
                f"{self.path} is open for writing in another process; open it with read_only=True to read"
            ) from None
        self._lock_fd = fd

    def _open_vectors(self, dims: dict[str, int]) -> None:
        kind = self.store.get_meta("index_kind", "flat") or "flat"
        self._adapter_version = self.store.get_meta("adapter_version", "0")
        self._adapter = self._load_adapter()
        transform, vdim = self._adapter_transform(dims["visual"])
        self.vectors = VectorSpaces(self.path, kind, dims, transform=transform, visual_dim=vdim)
        self.repair = self.vectors.open(self.store)
        if not self.repair.clean and not self.read_only:
            self.vectors.save(self.store.generation())
        elif self.vectors.manifest_outdated and not self.read_only and not self.vectors.unsaved:
            self.vectors.write_manifest(self.store.generation())  # the files hold every row: add the digests

    # ---- models -----------------------------------------------------------------------
    @property
    def models(self) -> Any:
        """The model stack (loaded with `kira.models.load_default()` on first use)."""
        if self._models is None:
            from kira.models import load_default
            from kira.models.stack import image_encoder_choice

            self._models = load_default(image_encoder=image_encoder_choice(self.built_with().get("image")))
        return self._models

    def built_with(self) -> dict[str, str]:
        """Part -> model identity of the stack that built this knowledge base ({} before the first image).

        Knowledge bases from before identities were stored give the encoders' class names.
        """
        stored = self.store.get_meta("model_identity")
        if stored:
            return dict(json.loads(stored))
        return dict(json.loads(self.store.get_meta("models", "{}") or "{}"))

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
            from kira.models.stack import image_encoder_choice

            choice = image_encoder_choice(built)
            hint = (f"load it with kira.models.load_default(image_encoder={choice!r})" if choice
                    else "load the model stack it was built with")
            raise ValueError(f"{self.path} was built with the image encoder {built}, but this model stack encodes "
                             f"images with {mine or type(stack.image).__name__}; {hint}")

    def _ensure_dims(self) -> VectorSpaces:
        stack = self.models
        dims = {"visual": int(stack.image.dim), "text": int(stack.text.dim)}
        if self.vectors is None:
            self.store.set_meta("dims", json.dumps(dims))
            self.store.set_meta(
                "models",
                json.dumps({"image": type(stack.image).__name__, "text": type(stack.text).__name__}),
            )
            if hasattr(stack, "identity"):
                self.store.set_meta("model_identity", json.dumps(stack.identity()))
            self._open_vectors(dims)
        else:
            self.check_models(stack)
        if dims != self.vectors.dims:
            raise ValueError(
                f"the model stack encodes {dims} but this knowledge base was built with {self.vectors.dims}; "
                "open it with the models it was built with"
            )
        assert self.vectors is not None
        return self.vectors

    # ---- writing ----------------------------------------------------------------------
    def _writable(self) -> None:
        if self.read_only:
            raise ValueError(f"{self.path} is open read-only; open it without read_only=True to change it")

    def add_image(
        self,
        image: ImageLike,
        *,
        doc_id: str | None = None,
        caption: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        sequence: str | tuple[str, float] | None = None,
        view: str | tuple[str, float] | None = None,
    ) -> str:
        """Chunk, describe, encode and store one image; returns its doc id.

        Parameters
        ----------
        image: a path, a PIL image or an array (see `kira.images.load_image`).
        doc_id: unique id; defaults to the file stem for a path, else ``doc-<n>``.
        caption, tags, metadata: the user's text and facts about the image.
        sequence: temporal group id (or (group id, position)): members of a sequence
            pull each other into results at 0.8x score.
        view: multiview group id (or (group id, position)): pulled in at 0.7x.

        Raises ValueError (kira.images.ImageError) for an unusable image, a duplicate
        doc id, or a read-only knowledge base. Nothing is stored on error.
        """
        self._writable()
        caption, tags = clean_text(caption, "caption"), tags_arg(tags)
        source = str(image) if isinstance(image, (str, os.PathLike)) else None
        pixels = load_image(image)
        if doc_id is None:
            doc_id = Path(source).stem if source else f"doc-{self.store.count_documents() + 1}"
        doc_id = clean_text(str(doc_id), "doc_id")
        self._add_images([
            dict(pixels=pixels, doc_id=str(doc_id), caption=caption, tags=tags, metadata=dict(metadata or {}),
                 source=source, sequence=sequence, view=view)
        ])
        return str(doc_id)

    def add_document(
        self,
        doc_id: str,
        *,
        images: Sequence[ImageLike] = (),
        passages: Sequence[str] = (),
        caption: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Store a document with text passages (a knowledge-base page, as in KB-VQA) and images.

        The first image is the document's image (doc id `doc_id`); further images become
        documents ``<doc_id>#<i>`` in one multiview set with it. Each passage becomes a
        'passage' chunk (text space only) under the document chunk. A document with no
        image is stored text-only. Raises ValueError for a duplicate id or no content.
        """
        self._writable()
        caption, tags = clean_text(caption, "caption"), tags_arg(tags)
        if isinstance(passages, str):
            raise TypeError("passages must be a list of strings, not one string; wrap it: passages=[text]")
        passages = [p for p in (clean_text(p, "each passage") for p in passages) if p]
        if not images and not passages and not caption:
            raise ValueError("add_document needs images, passages or a caption")
        items = []
        for i, image in enumerate(images):
            did = str(doc_id) if i == 0 else f"{doc_id}#{i}"
            items.append(dict(
                pixels=load_image(image), doc_id=did, caption=caption, tags=tuple(tags), metadata=dict(metadata or {}),
                source=str(image) if isinstance(image, (str, os.PathLike)) else None,
                sequence=None, view=(str(doc_id), float(i)) if len(images) > 1 else None,
                passages=tuple(passages) if i == 0 else (),
            ))
        if not items:
            items.append(dict(pixels=None, doc_id=str(doc_id), caption=caption, tags=tuple(tags),
                              metadata=dict(metadata or {}), source=None, sequence=None, view=None,
                              passages=tuple(passages)))
        self._add_images(items)
        return str(doc_id)

    def _add_images(self, items: list[dict[str, Any]]) -> list[str]:
        """Encode and insert a batch (one encoder call per space); all or nothing on error."""
        vectors = self._ensure_dims()
        stack = self.models
        seen: set[str] = set()
        for item in items:
            if item["doc_id"] in seen or self.store.has_document(item["doc_id"]):
                raise ValueError(f"document {item['doc_id']!r} is already in the knowledge base; remove it first or pick another id")
            seen.add(item["doc_id"])
        plans: list[ImagePlan | None] = []
        crops: list[np.ndarray] = []
        texts: list[str] = []
        # an encoder with encode_boxes (the CNN) gives every chunk's vector from one pass per image
        boxed = callable(getattr(stack.image, "encode_boxes", None))
        box_rows: list[np.ndarray] = []
        tagger = getattr(getattr(stack, "captioner", None), "labels", None)
        labels: dict[str, list[dict[str, Any]]] = {}
        read_lines: dict[str, list[dict[str, Any]]] = {}  # OCR lines with their boxes, kept as provenance
        for item in items:
            if item["pixels"] is None:
                plans.append(None)
                texts.append(item["caption"] or "; ".join(item["tags"]) or item["doc_id"])
            else:
                plan = plan_image(item["pixels"], getattr(stack, "regions", None), self.config.chunking, self.levels)
                reader = getattr(stack, "ocr", None)
                lines = reader.read(plan.image) if reader is not None else []
                if lines:
                    read_lines[item["doc_id"]] = [{"text": ln.text, "box": list(ln.box), "score": round(ln.score, 4)}
                                                  for ln in lines]
                describe(plan, item["caption"], item["tags"], getattr(stack, "captioner", None),
                         caption_children=self.caption_children, lines=lines)
                plans.append(plan)
                if boxed:
                    box_rows.append(stack.image.encode_boxes(plan.image, [c.box for c in plan.chunks]))
                else:
                    crops += plan.crops()
                if callable(tagger):
                    labels[item["doc_id"]] = [{"label": lb.name, "p": round(lb.probability, 4)}
                                              for lb in tagger(plan.image)]
                texts += [c.embed_text or c.description or item["doc_id"] for c in plan.chunks]
            texts += list(item.get("passages", ()))
        if boxed:
            visual = np.concatenate(box_rows) if box_rows else np.zeros((0, stack.image.dim), np.float32)
        else:
            visual = _encode(stack.image, crops)
        image_identity = stack.identity().get("image") if hasattr(stack, "identity") else None
        text = _encode_texts(stack.text, texts)
        new_ids: dict[str, list[int]] = {"visual": [], "text": []}
        new_rows: dict[str, list[np.ndarray]] = {"visual": [], "text": []}
        vi = ti = 0
        was_open = self.store.in_transaction
        savepoint = "kira_batch"
        self.store.begin()
        self.store.conn.execute(f"SAVEPOINT {savepoint}")
        try:
            for item, plan in zip(items, plans):
                pixels = item["pixels"]
                h, w = (pixels.shape[:2] if pixels is not None else (0, 0))
                self.store.insert_document(
                    item["doc_id"], source=item["source"], caption=item["caption"], width=w, height=h,
                    metadata=item["metadata"], tags=item["tags"],
                    thumbnail=_thumbnail_png(pixels) if pixels is not None else None,
                    provenance={
                        "source": item["source"] or "(in memory)",
                        "image_encoder": image_identity or type(stack.image).__name__,
                        "text_encoder": type(stack.text).__name__,
                        "described_by": "user caption/tags" if (item["caption"] or item["tags"]) else "captioner",
                        **({"labels": labels[item["doc_id"]]} if labels.get(item["doc_id"]) else {}),
                        **({"text_read": read_lines[item["doc_id"]]} if read_lines.get(item["doc_id"]) else {}),
                    },
                )
                chunk_ids: list[int] = []
                if plan is None:
                    cid = self.store.insert_chunk(item["doc_id"], "document", parent_id=None, box=None,
                                                  description=texts[ti], visual=None, text=text[ti])
                    new_ids["text"].append(cid)
                    new_rows["text"].append(text[ti])
                    chunk_ids.append(cid)
                    ti += 1
                else:
                    for chunk in plan.chunks:
                        parent = chunk_ids[chunk.parent] if chunk.parent is not None else None
                        cid = self.store.insert_chunk(item["doc_id"], chunk.level, parent_id=parent, box=chunk.box,
                                                      description=chunk.description or texts[ti], visual=visual[vi],
                                                      text=text[ti])
                        new_ids["visual"].append(cid)
                        new_rows["visual"].append(visual[vi])
                        new_ids["text"].append(cid)
                        new_rows["text"].append(text[ti])
                        chunk_ids.append(cid)
                        vi += 1
                        ti += 1
                for order, passage in enumerate(item.get("passages", ())):
                    cid = self.store.insert_chunk(item["doc_id"], "passage", parent_id=chunk_ids[0], box=None,
                                                  description=passage, visual=None, text=text[ti])
                    self.store.insert_passage(cid, item["doc_id"], order, passage)
                    new_ids["text"].append(cid)
                    new_rows["text"].append(text[ti])
                    ti += 1
                for kind, arg in (("temporal", item["sequence"]), ("multiview", item["view"])):
                    group = _group_arg(arg, "sequence" if kind == "temporal" else "view")
                    if group is not None:
                        gid, pos = group
                        if pos is None:
                            pos = float(self.store.group_size(kind, gid))
                        self.store.add_to_group(kind, gid, item["doc_id"], pos)
            self.store.conn.execute(f"RELEASE {savepoint}")
        except BaseException:
            self.store.conn.execute(f"ROLLBACK TO {savepoint}")
            self.store.conn.execute(f"RELEASE {savepoint}")
            if not was_open:
                self.store.rollback()
                self._derived.clear()
            raise
        for space in ("visual", "text"):
            if new_ids[space]:
                vectors.add(space, np.array(new_ids[space], dtype=np.int64), np.stack(new_rows[space]))
        self._caches.clear()
        return [item["doc_id"] for item in items]

    def remove(self, doc_id: str) -> None:
        """Remove a document and all its chunks. Unknown id -> ValueError."""
        self._writable()
        if not self.store.has_document(doc_id):
            raise ValueError(f"no document {doc_id!r} in the knowledge base")
        ids = self.store.delete_document(doc_id)
        if self.vectors is not None:
            self.vectors.remove(np.array(ids, dtype=np.int64))
        self._caches.clear()

    def ingest(self, folder_or_paths: str | os.PathLike | Iterable[str | os.PathLike], **kwargs: Any):
        """Add every image under a folder (or in a list of paths); see `kira.knowledge_base.ingest.ingest`."""
        from kira.knowledge_base.ingest import ingest

        return ingest(self, folder_or_paths, **kwargs)

    def commit(self, *, checkpoint: bool | None = None) -> int:
        """Make every change since the last commit durable; returns the new generation.

        The database commits first (one transaction): that is what makes the change
        durable. Then the index files and the manifest, a cache of the database, are
        saved atomically when `checkpoint` is True, or (None, the default) when the rows
        changed since they were last saved exceed `checkpoint_share` of the indexes
        (see kira.knowledge_base.vectors): a 10-chunk commit to a 100k-chunk knowledge
        base does not rewrite 280 MB of index files. False: never now. `close` always
        checkpoints. Files behind the database (a deferred checkpoint, or a crash in
        between) are brought up to date from the stored vectors on the next open.
        """
        self._writable()
        generation = self.store.commit()
        self._seen_generation = generation
        if self.vectors is not None:
            self.vectors.checkpoint(generation, force=checkpoint, share=self.checkpoint_share)
        self._caches.clear()
        if self.vectors is not None and self._models is not None and getattr(self._models, "image_text", None) is None:
            self.bridge()  # refit and save now, so read-only openers find it current
        return generation

    def commit_database(self) -> int:
        """Commit the database only (index files are checkpointed later by `commit`)."""
        self._writable()
        generation = self.store.commit()
        self._seen_generation = generation
        self._caches.clear()
        return generation

    def rollback(self) -> None:
        """Discard uncommitted changes (database and in-memory indexes)."""
        if self.read_only:
            return
        self.store.rollback()
        if self.vectors is not None:
            for space in ("visual", "text"):
                self.vectors._sync(self.store, space)
        self._caches.clear()
        self._derived.clear()

    def close(self) -> None:
        """Commit pending changes (writers), then release files. Safe to call twice."""
        if self.store is None:
            return
        try:
            if not self.read_only:
                self.commit(checkpoint=bool(self.vectors is not None and self.vectors.unsaved))
        finally:
            self.store.close()
            self.store = None  # type: ignore[assignment]
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and not self.read_only and self.store is not None:
            self.rollback()
        self.close()

    # ---- reading ----------------------------------------------------------------------
    def refresh(self) -> bool:
        """Pick up commits made by another process since this one looked; returns whether any were."""
        if self.store is None or self.store.in_transaction:
            return False
        with self.store.snapshot():  # the generation and every row read below from one committed state
            return self._refresh()

    def _refresh(self) -> bool:
        generation = self.store.generation()
        if generation == self._seen_generation:
            return False
        adapter_version = self.store.get_meta("adapter_version", "0")
        if self.vectors is None or adapter_version != self._adapter_version:
            # first vectors, or the writer set another domain adapter: load the (re-projected) indexes
            dims = json.loads(self.store.get_meta("dims", "null") or "null")
            if dims is not None:
                self._open_vectors(dims)
        else:
            for space in ("visual", "text"):
                self.vectors.catch_up(self.store, space)  # what changed since this process last looked
        self._caches.clear()
        self._seen_generation = generation
        return True

    def index(self, space: str) -> Any:
        """The core index of `space` ('visual' or 'text'), or None for an empty knowledge base."""
        if self.vectors is None:
            return None
        return self.vectors.indexes[space]

    def __len__(self) -> int:
        return self.store.count_documents()

    def stats(self) -> dict[str, Any]:
        """What the knowledge base holds: documents, chunks per level, groups, index sizes."""
        groups = self.store.groups()
        return {
            "path": str(self.path),
            "documents": self.store.count_documents(),
            "chunks": self.store.count_chunks(),
            "groups": {k: sum(1 for g in groups if g[0] == k) for k in ("temporal", "multiview")},
            "index_kind": self.store.get_meta("index_kind", "flat"),
            "index_sizes": {s: len(ix) for s, ix in (self.vectors.indexes.items() if self.vectors else [])},
            "dims": self.vectors.index_dims if self.vectors else None,
            "generation": self.store.generation(),
            "adapter": self.store.get_meta("adapter_class"),
            "levels": list(self.levels),
            "models": self.built_with(),
            "profile": "" if self.profile.empty else (self.profile.name or "(unnamed)"),
        }

    def level_ids(self, levels: Iterable[str]) -> np.ndarray:
        """Sorted int64 ids of chunks at `levels` (cached per commit, updated with what changed)."""
        key = ("levels", tuple(sorted(set(levels))))
        if key not in self._caches:
            self._caches[key] = self.kept_view(
                f"levels:{','.join(key[1])}",
                read=lambda after, upto: self.store.chunk_ids(levels=key[1], after=after, upto=upto),
                build=lambda ids: ids,
                update=lambda ids, new, gone: np.concatenate([ids[~np.isin(ids, gone)], new]))
        return self._caches[key]

    def kept_view(self, name: str, *, read: Callable[[int, int], Any], build: Callable[[Any], T],
                   update: Callable[[T, Any, np.ndarray], T]) -> T:
        """A view of the chunks kept across commits and updated with what changed since it was
        last built, instead of being rebuilt (documents and chunks are only ever added or removed).

        read(after, upto): what the view needs of the chunks with after < id <= upto;
        build(read(0, top)): the view from scratch; update(previous, read(last, top), removed
        chunk ids): the view now. Without a removal log (a version-1 database) it is built from
        scratch each time. The log position and the largest id are read first, so whatever
        commits meanwhile is read next time (see VectorSpaces.catch_up); a rollback drops
        every kept view (they may hold rows it undid).
        """
        position = self.store.removal_log_position()
        top = self.store.max_chunk_id()
        state = self._derived.get(name)
        if state is not None and position is not None:
            last_top, last_position, previous = state
            gone, position = self.store.removed_since(last_position) or (np.zeros(0, np.int64), last_position)
            value = update(previous, read(last_top, top), gone)
            top = max(top, last_top)
        else:
            value = build(read(0, top))
        if position is not None:
            self._derived[name] = (top, position, value)
        return value

    def documents(self, doc_ids: Iterable[str] | None = None) -> dict[str, DocumentRow]:
        return self.store.documents(doc_ids)

    def compound_groups(self) -> tuple[Any, dict[tuple[int, int], str]]:
        """(kira._core.CompoundGroups over document-chunk ids, {(a, b): kind} for member pairs)."""
        if "groups" not in self._caches:
            groups = _core.CompoundGroups()
            kinds: dict[tuple[int, int], str] = {}
            rows = self.store.groups()
            doc_chunk = self.store.document_chunk_ids({d for _, _, docs in rows for d in docs})
            for kind, _gid, docs in rows:
                members = [doc_chunk[d] for d in docs if d in doc_chunk]
                if len(members) < 2:
                    continue
                (groups.add_temporal if kind == "temporal" else groups.add_multiview)(np.array(members, dtype=np.int64))
                for a in members:
                    for b in members:
                        if a != b:
                            kinds.setdefault((a, b), kind)
            self._caches["groups"] = (groups, kinds)
        return self._caches["groups"]

    def group_partners(self) -> dict[int, frozenset[int]]:
        """{document chunk id: the document chunks sharing a temporal or multiview group with it} (cached)."""
        if "partners" not in self._caches:
            partners: dict[int, set[int]] = {}
            for a, b in self.compound_groups()[1]:
                partners.setdefault(a, set()).add(b)
            self._caches["partners"] = {d: frozenset(p) for d, p in partners.items()}
        return self._caches["partners"]

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """`build()`'s value, computed once per commit and kept until the next (for derived
        views of the stored contents that readers such as kira.pipeline.change need)."""
        key = f"memo:{key}"
        if key not in self._caches:
            self._caches[key] = build()
        return self._caches[key]

    def compound_of(self) -> dict[str, str]:
        """{doc_id: its compound document's key} for every document in a temporal or multiview group (cached).

        Groups that share a document are one compound document (a subject's follow-ups and
        views); its key is the smallest member doc id. Documents in no group are absent.
        """
        def build() -> dict[str, str]:
            parent: dict[str, str] = {}

            def root(d: str) -> str:
                while parent[d] != d:
                    parent[d] = parent[parent[d]]
                    d = parent[d]
                return d

            for _kind, _gid, docs in self.store.groups():
                for d in docs if len(docs) >= 2 else ():
                    parent.setdefault(d, d)
                for d in docs[1:]:
                    a, b = root(docs[0]), root(d)
                    if a != b:
                        parent[max(a, b)] = min(a, b)
            return {d: root(d) for d in parent}

        return self.memo("compound_of", build)

    def view_set_of(self) -> dict[str, str]:
        """{doc_id: its multiview group's id} for every document in a multiview group of 2+ (cached).

        A multiview group is one subject seen several ways at once (a PA and a lateral film,
        faces of one part); unlike `compound_of` it leaves out the subject's other times.
        """
        def build() -> dict[str, str]:
            return {d: gid for kind, gid, docs in self.store.groups() if kind == "multiview" and len(docs) >= 2
                    for d in docs}

        return self.memo("view_set_of", build)

    def lexical(self) -> Any:
        """The `kira.knowledge_base.lexical.LexicalIndex` over document and passage chunks (cached per commit).

        Each document chunk is indexed with its description, its doc id and its metadata
        values; each passage chunk with its text.
        """
        if "lexical" not in self._caches:
            self._caches["lexical"] = self._lexical_index()
        return self._caches["lexical"]

    def _lexical_texts(self, after: int, upto: int) -> tuple[list[int], list[str]]:
        """(ids, indexed texts) of the document and passage chunks with after < id <= upto, by id."""
        rows = self.store.conn.execute(
            "SELECT c.id, c.description, c.doc_id, d.metadata FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
            "WHERE c.level IN ('document', 'passage') AND c.id > ? AND c.id <= ? ORDER BY c.id", (int(after), int(upto))
        ).fetchall()
        texts = []
        for _cid, description, doc_id, metadata in rows:
            values = json.loads(metadata or "{}") if metadata else {}
            extra = " ".join(str(v) for v in values.values()) if isinstance(values, dict) else ""
            texts.append(f"{(description or '')[:MAX_LEXICAL_CHARS]} {doc_id.replace('-', ' ')} {extra[:MAX_LEXICAL_CHARS]}")
        return [int(r[0]) for r in rows], texts

    def _lexical_index(self) -> Any:
        """The lexical index, kept across commits (`kept_view`): only the chunks added since it
        was last built are read and tokenised, the removed ones dropped."""
        from kira.knowledge_base.lexical import LexicalIndex

        return self.kept_view("lexical", read=self._lexical_texts, build=lambda rows: LexicalIndex.build(*rows),
                               update=lambda index, rows, gone: index.updated(gone, *rows))

    def warm(self) -> dict[str, float]:
        """Pick up new commits (`refresh`), then build the derived views a query reads, so the
        first query after a commit does not pay for them.

        They are cached per commit and dropped by `commit`, `rollback` and a `refresh` that
        finds new commits: the lexical index, the chunk -> document map, the compound groups
        and their partners, compound documents and multiview sets, and with a model stack
        that has no text tower in image space the text->image bridge (at 100k chunks they cost
        the first query some 70-85 ms; see benchmarks/latency_ask.py --first). A writer calls
        this after `commit()`; a reader calls it now and then (each `ask` refreshes too,
        and would then build them itself): with nothing new it returns at once.
        `kira.Kira.warm` also builds the pipeline's own views. Returns {view: seconds
        spent on it} (about 0 for a view already built).
        Raises ValueError when the knowledge base is closed.
        """
        if self.store is None:
            raise ValueError(f"{self.path} is closed; open it again with KnowledgeBase.open before warming it")
        self.refresh()
        steps: dict[str, Callable[[], Any]] = {
            "lexical": self.lexical, "document_groups": self.document_groups,
            "compound_groups": self.compound_groups, "group_partners": self.group_partners,
            "compound_of": self.compound_of, "view_set_of": self.view_set_of,
        }
        if self.vectors is not None and getattr(self.models, "image_text", None) is None:
            steps["bridge"] = self.bridge  # how a text question reaches the visual index (`bridge`)
        seconds: dict[str, float] = {}
        for name, build in steps.items():
            start = time.perf_counter()
            build()
            seconds[name] = time.perf_counter() - start
        return seconds

    def _document_chunk_map(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk ids ascending, their document chunk ids), cached per commit and kept across
        commits (`kept_view`)."""
        def rows(after: int, upto: int) -> tuple[np.ndarray, np.ndarray]:
            found = self.store.conn.execute(
                "SELECT c.id, d.id FROM chunks c JOIN chunks d ON d.doc_id = c.doc_id AND d.level = 'document' "
                "WHERE c.id > ? AND c.id <= ? ORDER BY c.id", (int(after), int(upto))
            ).fetchall()
            return np.array([r[0] for r in found], dtype=np.int64), np.array([r[1] for r in found], dtype=np.int64)

        def update(previous: tuple[np.ndarray, np.ndarray], new: tuple[np.ndarray, np.ndarray],
                   gone: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            keep = ~np.isin(previous[0], gone)
            return np.concatenate([previous[0][keep], new[0]]), np.concatenate([previous[1][keep], new[1]])

        return self.memo("doc_chunk_map", lambda: self.kept_view("doc_chunk_map", read=rows, build=lambda r: r,
                                                                  update=update))

    def document_groups(self) -> Any:
        """A `kira._core.GroupMap` from chunk id to its document chunk id (cached per commit).

        Pass it to an index search as `groups=` with `per_group=n` to get at most n chunks
        of any one document back.
        """
        return self.memo("document_groups", lambda: _core.GroupMap(*self._document_chunk_map()))

    def document_chunk_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document-level chunk id of each chunk id (-1 for unknown ids); an in-memory map cached per commit."""
        keys, values = self._document_chunk_map()
        ids = np.asarray(chunk_ids, dtype=np.int64)
        if not len(keys):
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
        return np.where(keys[pos] == ids, values[pos], -1)

    def thumbnail(self, doc_id: str) -> np.ndarray | None:
        """The stored <= 160 px preview of a document's image (uint8 RGB), or None."""
        png = self.store.thumbnail(doc_id)
        if not png:
            return None
        from PIL import Image

        with Image.open(io.BytesIO(png)) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)

    # ---- domain adapter ---------------------------------------------------------------
    @property
    def adapter(self) -> Any:
        return self._adapter

    def set_adapter(self, adapter: Any) -> None:
        """Store a domain adapter with the knowledge base and re-project the visual index.

        `adapter` has ``apply(vectors) -> vectors``, ``save(path)`` and a ``load(path)``
        classmethod, and its class is registered in `kira.knowledge_base.adapters` (only
        those are imported on open: no code is named by the knowledge base itself).
        None removes the adapter. Raises ValueError for an unregistered class.
        Queries in the visual space go through the same ``apply``. Commits.
        """
        self._writable()
        vectors = self._ensure_dims()
        target = self.path / "adapter"
        if adapter is None:
            shutil.rmtree(target, ignore_errors=True)
            self.store.set_meta("adapter_class", "")
        else:
            cls = type(adapter)
            if not is_registered(cls):
                raise ValueError(
                    f"{cls.__module__}.{cls.__qualname__} is not a registered adapter (allowed: "
                    f"{', '.join(registered_adapters())}); register it with "
                    "kira.knowledge_base.adapters.register_adapter"
                )
            tmp = self.path / "adapter.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            adapter.save(tmp / "adapter.npz")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(tmp, target)
            self.store.set_meta("adapter_class", adapter_name(cls))
        # readers compare this on refresh: a changed adapter means a re-projected visual index to load
        self.store.set_meta("adapter_version", str(int(self.store.get_meta("adapter_version", "0") or 0) + 1))
        self._adapter = adapter
        transform, dim = self._adapter_transform(vectors.dims["visual"])
        vectors.reproject_visual(self.store, transform, dim)
        self.commit(checkpoint=True)  # the files hold the re-projected index before any reader reloads

    def _load_adapter(self) -> Any:
        name = self.store.get_meta("adapter_class") or ""
        if not name:
            return None
        return resolve_adapter(name).load(self.path / "adapter" / "adapter.npz")

    def _adapter_transform(self, raw_dim: int):
        if self._adapter is None:
            return None, raw_dim
        probe = np.zeros((1, raw_dim), dtype=np.float32)
        probe[0, 0] = 1.0
        out_dim = int(np.asarray(self._adapter.apply(probe)).shape[1])
        return self._adapter.apply, out_dim

    def visual_query(self, vectors: np.ndarray) -> np.ndarray:
        """Raw image-space query vectors -> the visual index's space (through the adapter, if set)."""
        assert self.vectors is not None
        return self.vectors.prepare("visual", np.atleast_2d(vectors))

    # ---- text -> image bridge (default stack) -----------------------------------------
    def bridge(self) -> Any:
        """The TextToImageBridge fitted on this knowledge base's captioned images, or None.

        Fitted on (document description text vector, raw image vector) pairs of documents
        with a caption or tags; saved beside the database and refitted when the number of
        such documents has changed by more than `BRIDGE_REFIT_SHARE` of the number it was
        fitted on (a fit costs about 0.45 s at 1,000 pairs and 1.6 s at 10,000, and a
        linear map fitted on 95% of the pairs is all but the same map). Needs at least 2
        captioned documents.
        """
        if "bridge" in self._caches:
            return self._caches["bridge"]
        from kira.models.bridge import TextToImageBridge

        ids = self.store.captioned_document_ids()
        bridge = None
        path = self.path / "bridge.npz"
        fitted_on = int(self.store.get_meta("bridge_fitted_on", "0") or 0)
        if len(ids) >= 2 and self.vectors is not None:
            current = fitted_on >= 2 and abs(len(ids) - fitted_on) <= BRIDGE_REFIT_SHARE * fitted_on
            if current and self.store.get_meta("bridge_file"):
                try:
                    stored = self.path / (self.store.get_meta("bridge_file") or "")
                    _check_archive(stored)
                    bridge = TextToImageBridge.load(stored)
                except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
                    log.warning("stored bridge is unreadable (%s); refitting", exc)
            if bridge is None:
                text = self.store.vectors("text", ids, self.vectors.dims["text"])
                image = self.store.vectors("visual", ids, self.vectors.dims["visual"])
                bridge = TextToImageBridge()
                bridge.fit(text, image)
                if not self.read_only and not self.store.in_transaction:
                    saved = bridge.save(path)
                    saved_path = Path(saved) if isinstance(saved, (str, os.PathLike)) else path
                    self.store.set_meta("bridge_file", saved_path.name if saved_path.exists() else path.name)
                    self.store.set_meta("bridge_fitted_on", str(len(ids)))
                    self.store.commit_meta()
        self._caches["bridge"] = bridge
        return bridge
