"""`KnowledgeBase`: a persistent, durable store of chunked, embedded images and passages, on any backend.

One class, composed over a `kira.knowledge_base.storage.Storage`: the embedded backend (SQLite
and the core's index files in a directory, kira.knowledge_base.embedded) or Milvus (Milvus Lite
in a directory, or a server at a uri, kira.knowledge_base.milvus); `kira.knowledge_base.opening`
picks it. The knowledge base owns what is the same on both: writing (one path,
kira.knowledge_base.writing, builds the typed batch every backend stores all or nothing), the
derived views (kira.knowledge_base.views, read through kira.knowledge_base.kb_reads), the profile,
the models' identity, and the domain adapter and text->image bridge (kira.knowledge_base.adaptation).

Writes go into the storage's open transaction (embedded) or straight to Milvus; `commit()` makes
them durable and visible to other processes, `close()` commits and releases. Any number of
processes may open a knowledge base with ``read_only=True`` while one writer works.
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import nullcontext
from pathlib import Path
from types import TracebackType
from typing import Any, Iterable, Mapping, Sequence

from kira.config import KiraConfig
from kira.images import ImageLike
from kira.knowledge_base.adaptation import AdapterAndBridge
from kira.knowledge_base.batch_encode import MAX_ENCODED_CHARS
from kira.knowledge_base.chunker import LEVELS, levels_arg
from kira.knowledge_base.kb_reads import KnowledgeBaseReads
from kira.knowledge_base.model_identity import RecordedModels, default_stack_for
from kira.knowledge_base.storage import KeepsBridge, ReportsUnavailable, Storage
from kira.knowledge_base.views import DerivedViews
from kira.knowledge_base.writing import document_items, image_item, prepare_for

log = logging.getLogger(__name__)
__all__ = ["KnowledgeBase", "MAX_ENCODED_CHARS"]


class KnowledgeBase(KnowledgeBaseReads):
    """A knowledge base opened for reading or writing. Use `create` or `open`.

    Thread safety: one instance belongs to one thread. Several processes may read at once
    (``read_only=True``) while one process writes.
    """

    def __init__(self, storage: Storage, models: Any = None) -> None:
        self.storage = storage
        self.path = Path(storage.path)
        self.read_only = storage.read_only
        self._models = models
        self._profile: Any = None
        self._dirty = False  # written since the last commit
        self._closed = False
        self.views = DerivedViews(storage)
        self.recorded = RecordedModels(storage)
        self.adaptation_part = AdapterAndBridge(self)
        try:
            self.config = KiraConfig.from_dict(json.loads(storage.get_setting("config") or "{}"))
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            raise ValueError(f"the stored config of {storage.where} is not a kira configuration ({exc})") from None
        self.levels: tuple[str, ...] = tuple(json.loads(storage.get_setting("levels") or json.dumps(LEVELS)))
        self.caption_children = storage.get_setting("caption_children", "0") == "1"
        if models is not None and self.dims() is not None:
            self.recorded.check(models)  # another image encoder's queries would return noise: refused at open
            self.recorded.check_dims(models)

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike[str], config: KiraConfig | None = None, models: Any = None, *,
               index: str = "flat", levels: Sequence[str] = LEVELS, caption_children: bool = False,
               profile: Any = None, backend: str = "embedded", uri: str | None = None,
               token: str = "") -> KnowledgeBase:
        """Create a new, empty knowledge base and open it for writing. `config`: the constants to build and answer
        with; `models`: a `kira.models.stack.ModelStack` (None: the default stack, loaded on first use); `index`:
        'flat' (exact) or 'hnsw' (graph, for large bases); `levels`: chunk levels to store per image (the document
        level always); `caption_children`: describe each region/patch crop too (slower ingest); `profile`: the
        user's domain knowledge (a `kira.DomainProfile`, a mapping or a .toml / .json file). `backend`: "embedded"
        (SQLite + the core's indexes in the directory `path`) or "milvus" (Milvus at `uri` with `token`, `path`
        naming the knowledge base; without a uri, Milvus Lite in the directory `path`).

        Raises ValueError where `path` holds a knowledge base or a non-empty directory, for a bad index, level or
        profile; on Milvus ImportError naming ``kira[milvus]`` and ConnectionError naming the uri.
        """
        from kira.knowledge_base.opening import create_storage
        from kira.profile import as_profile

        profile = as_profile(profile)  # validated before anything is written
        if index not in ("flat", "hnsw"):
            raise ValueError(f"index must be 'flat' or 'hnsw'; got {index!r}")
        settings = {"config": json.dumps((config or KiraConfig()).to_dict()), "index_kind": index,
                    "levels": json.dumps(list(dict.fromkeys(["document", *levels_arg(levels)]))),
                    "caption_children": "1" if caption_children else "0", "profile": json.dumps(profile.to_dict())}
        kb = cls(create_storage(path, settings, backend=backend, uri=uri, token=token), models)
        kb._profile = profile
        return kb

    @classmethod
    def open(cls, path: str | os.PathLike[str], models: Any = None, *, read_only: bool = False, backend: str | None = None,
             uri: str | None = None, token: str = "") -> KnowledgeBase:
        """Open an existing knowledge base (index files are loaded, never rebuilt; a gap left by a crash is
        repaired from the stored vectors). backend / uri / token: as `create`; backend None finds it (a uri, or
        a directory holding a Milvus Lite file, means "milvus"). Raises ValueError if `path` is not a knowledge
        base, `models` encodes with other models than it was built with, or (writing) another process holds
        it open for writing."""
        from kira.knowledge_base.opening import open_storage

        storage = open_storage(path, read_only=read_only, backend=backend, uri=uri, token=token)
        try:
            return cls(storage, models)
        except BaseException:
            storage.close()
            raise

    # ---- where it lives ----------------------------------------------------------------
    @property
    def backend(self) -> str:
        return self.storage.kind

    @property
    def uri(self) -> str | None:
        """The Milvus uri (None for an embedded knowledge base)."""
        return getattr(self.storage, "uri", None)

    @property
    def store(self) -> Any:
        """The backend's rows (`kira.knowledge_base.storage.StoredRows`) for its own checks; stages read the
        knowledge base's methods instead."""
        return self.storage.rows

    # ---- profile and models -----------------------------------------------------------
    @property
    def profile(self) -> Any:
        """The knowledge base's `kira.DomainProfile` (the empty profile when none is stored)."""
        if self._profile is None:
            from kira.profile import DomainProfile

            stored = self.storage.get_setting("profile")
            try:
                self._profile = DomainProfile.from_dict(json.loads(stored)) if stored else DomainProfile()
            except (TypeError, ValueError) as exc:
                raise ValueError(f"the profile stored with {self.storage.where} is not a domain profile ({exc}); "
                                 "set a valid one with kb.set_profile") from None
        return self._profile

    def set_profile(self, profile: Any) -> None:
        """Store `profile` (a `kira.DomainProfile`, a mapping or a .toml/.json file; None: empty) with the
        knowledge base, atomically. It takes effect for the next `Kira` built on this knowledge base."""
        self._writable()
        from kira.profile import as_profile

        profile = as_profile(profile)
        self.storage.put_settings({"profile": json.dumps(profile.to_dict())})
        self._profile = profile

    @property
    def models(self) -> Any:
        """The model stack (the default stack with the image encoder it was built with, on first use)."""
        if self._models is None:
            self._models = default_stack_for(self.built_with())
        return self._models

    def built_with(self) -> dict[str, str]:
        """Part -> model identity of the stack that built this knowledge base ({} before the first image)."""
        return self.recorded.built_with()

    def check_models(self, stack: Any) -> None:
        """ValueError when `stack` encodes images with another encoder than this knowledge base was built with."""
        self.recorded.check(stack)

    def dims(self) -> dict[str, int] | None:
        """{"visual": raw image-vector width, "text": sentence-vector width}, or None before the first image."""
        return self.recorded.dims()

    def _ensure_dims(self) -> None:
        self.recorded.record(self.models)

    # ---- writing ----------------------------------------------------------------------
    def _writable(self) -> None:
        if self._closed:
            raise ValueError(f"{self.storage.where} is closed; open it again with KnowledgeBase.open")
        if self.read_only:
            raise ValueError(f"{self.storage.where} is open read-only; open it without read_only=True to change it")

    def add_image(self, image: ImageLike, *, doc_id: str | None = None, caption: str | None = None,
                  tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
                  sequence: str | tuple[str, float] | None = None, view: str | tuple[str, float] | None = None) -> str:
        """Chunk, describe, encode and store one image; returns its doc id.

        image: a path, a PIL image or an array (see `kira.images.load_image`).
        doc_id: unique id; defaults to the file stem for a path, else ``doc-<n>``.
        caption, tags, metadata: the user's text and facts about the image.
        sequence: temporal group id (or (group id, position)): members pull each other in at 0.8x score.
        view: multiview group id (or (group id, position)): pulled in at 0.7x.

        Raises ValueError (kira.images.ImageError) for an unusable image, a duplicate doc id, or a
        read-only knowledge base. Nothing is stored on error.
        """
        self._writable()
        item = image_item(image, doc_id=doc_id, caption=caption, tags=tags, metadata=metadata, sequence=sequence,
                          view=view, count=self.storage.rows.count_documents)
        return self.add_items([item])[0]

    def add_document(self, doc_id: str, *, images: Sequence[ImageLike] = (), passages: Sequence[str] = (),
                     caption: str | None = None, tags: Sequence[str] = (),
                     metadata: Mapping[str, Any] | None = None) -> str:
        """Store a document with text passages (a knowledge-base page, as in KB-VQA) and images.

        The first image is the document's image (doc id `doc_id`); further images become documents
        ``<doc_id>#<i>`` in one multiview set with it. Each passage becomes a 'passage' chunk (text space
        only) under the document chunk. A document with no image is stored text-only. Raises ValueError for
        a duplicate id or no content.
        """
        self._writable()
        self.add_items(document_items(doc_id, images=images, passages=passages, caption=caption, tags=tags,
                                      metadata=metadata))
        return str(doc_id)

    def add_items(self, items: list[dict[str, Any]]) -> list[str]:
        """Encode and store a batch of items (as `kira.knowledge_base.writing` makes them: one encoder call per
        space); all or nothing. ValueError for a doc id stored or repeated (nothing is encoded); a storage that
        stops answering raises what it says (Milvus: `MilvusUnavailable`, a ConnectionError)."""
        self._writable()
        with self._reporting("adding images to"):
            return self._add_items(items)

    def _reporting(self, doing: str) -> Any:
        """Around a write: the storage's report of a store that stopped answering (`ReportsUnavailable`)."""
        return self.storage.writing(doing) if isinstance(self.storage, ReportsUnavailable) else nullcontext()

    def _add_items(self, items: list[dict[str, Any]]) -> list[str]:
        self._ensure_dims()
        ids = [str(item["doc_id"]) for item in items]
        stored = set(self.storage.rows.documents(ids)) if ids else set()
        for n, doc_id in enumerate(ids):
            if doc_id in stored or doc_id in ids[:n]:
                raise ValueError(f"document {doc_id!r} is already in the knowledge base; remove it first or pick "
                                 "another id")
        batch = prepare_for(self, items)
        try:
            self.storage.write(batch)
        except BaseException:
            self.views.clear(kept=True)
            raise
        self._dirty = True
        self.views.clear()
        return batch.doc_ids

    def ingest(self, folder_or_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], **kwargs: Any) -> Any:
        """Add every image under a folder (or in a list of paths); see `kira.knowledge_base.ingest.ingest`."""
        from kira.knowledge_base.ingest import ingest

        return ingest(self, folder_or_paths, **kwargs)

    def remove(self, doc_id: str) -> None:
        """Remove a document and all its chunks. Unknown id -> ValueError."""
        self._writable()
        if not self.storage.remove(doc_id):
            raise ValueError(f"no document {doc_id!r} in the knowledge base")
        self._dirty = True
        self.views.clear()

    def store_text_pieces(self, *, batch: int = 32) -> int:
        """Encode and store the text pieces of every document that has none: what a knowledge base built before
        kira stored them needs so that verifying answers encodes only the claims (until then the verifier
        encodes the evidence it meets, with the same scores). Writes after each `batch` documents; the indexes
        and the generation do not change. Returns how many documents got pieces.

        Raises ValueError on a read-only knowledge base, with changes not yet committed, or batch < 1.
        """
        from kira.knowledge_base.pieces import fill_missing_pieces

        self._writable()
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an integer >= 1; got {batch!r}")
        if self._dirty:
            raise ValueError("the knowledge base has changes not yet committed: commit() them first")
        if self.dims() is None:
            return 0
        self._ensure_dims()  # the stack's text encoder is the one the knowledge base was built with
        return fill_missing_pieces(self.storage, self.models.text,
                                   patches=self.config.grounding.patch_pieces_at_ingest, batch=batch)

    def commit(self, *, checkpoint: bool | None = None) -> int:
        """Make every change since the last commit durable and visible to other processes; returns the new
        generation. `checkpoint`: also save what the backend keeps besides (embedded: the index files, saved
        when None once enough of them changed, `kira.knowledge_base.embedded.storage`; Milvus: a flush);
        False: not now. With no text tower in image space, a backend that stores the bridge gets it refitted
        now."""
        self._writable()
        with self._reporting("committing"):
            generation = self.storage.commit(checkpoint=checkpoint)
            self._dirty = False
            self.views.clear()
            if (isinstance(self.storage, KeepsBridge) and self.dims() is not None and self._models is not None
                    and getattr(self._models, "image_text", None) is None):
                self.bridge()  # refitted and stored now, so read-only openers find it current
        return generation

    def commit_database(self) -> int:
        """Commit the rows only (the index files are checkpointed, Milvus flushed, by a later `commit`)."""
        self._writable()
        generation = self.storage.commit(checkpoint=False)
        self._dirty = False
        self.views.clear()
        return generation

    def rollback(self) -> None:
        """Discard uncommitted changes (embedded: the database and in-memory indexes; Milvus has no transactions:
        writes already sent stay, as the log says)."""
        if self.read_only:
            return
        self.storage.rollback()
        self._dirty = False
        self.views.clear(kept=True)

    def close(self) -> None:
        """Commit pending changes (writers), then release files and connections. Safe to call twice."""
        if self._closed:
            return
        try:
            if not self.read_only:
                self.commit()
        finally:
            self._closed = True
            self.storage.close()

    def external_writers(self) -> Storage:
        """The storage, ready for a job whose own workers write into it (a Ray ingest's actors): the knowledge
        base is writable, the models' dimensions are recorded and the indexes made. `commit` when they are done
        (it publishes what they wrote)."""
        self._writable()
        self._ensure_dims()
        self._dirty = True
        return self.storage

    def drop(self) -> None:
        """Delete a Milvus knowledge base from Milvus (its collections), and close it. ValueError elsewhere."""
        self._writable()
        if not hasattr(self.storage, "drop"):
            raise ValueError(f"{self.storage.where} is an embedded knowledge base: delete its directory instead")
        self._closed = True
        self.storage.drop()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None and not self.read_only and not self._closed:
            self.rollback()
        self.close()

    def __len__(self) -> int:
        return self.storage.rows.count_documents()

    def __repr__(self) -> str:
        return f"KnowledgeBase({self.storage.where!r}, backend={self.backend!r}, read_only={self.read_only})"

    # ---- adapter, bridge (kira.knowledge_base.adaptation) ---------------------------------
    def set_adapter(self, adapter: Any) -> None:
        self.adaptation_part.set_adapter(adapter)

    def adapt(self, labels: Any, *, methods: Any = None, seed: int | None = None, **validation: Any) -> Any:
        return self.adaptation_part.adapt(labels, methods=methods, seed=seed, **validation)

    @property
    def adaptation(self) -> Any:
        return self.adaptation_part.report()

    def classify(self, doc_ids: Any) -> list[str]:
        return self.adaptation_part.classify(doc_ids)

    def bridge(self) -> Any:
        return self.views.cached("bridge", self.adaptation_part.fit_bridge)

    def stats(self) -> dict[str, Any]:
        """What the knowledge base holds: documents, chunks per level, groups, index sizes, where it lives."""
        from kira.knowledge_base.model_fallbacks import recorded_fallbacks

        rows = self.storage.rows
        groups = rows.groups()
        return {**self.storage.describe(), "documents": rows.count_documents(), "chunks": rows.count_chunks(),
                "groups": {k: sum(1 for g in groups if g[0] == k) for k in ("temporal", "multiview")},
                "generation": self.generation(), "adapter": self.storage.get_setting("adapter_class"),
                "levels": list(self.levels), "models": self.built_with(),
                "profile": "" if self.profile.empty else (self.profile.name or "(unnamed)"),
                "model_fallbacks": recorded_fallbacks(self)}
