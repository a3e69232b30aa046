"""The knowledge base's derived views: what queries read that is computed from the stored rows.

`DerivedViews` belongs to one `KnowledgeBase` (it holds its storage): level id sets, the lexical
(BM25) index, the chunk -> document map and the document groups a capped search uses, and the
compound groups (temporal sequences and multiview sets). Each is cached per commit (dropped by
`commit`, `rollback` and a `refresh` that finds new commits: `clear`) or kept across commits and
updated with what changed (`kept_view`, where the storage keeps a removal log). A storage that
answers a view itself (the optional capabilities of kira.knowledge_base.storage: Milvus filters
levels and groups by document server-side) is asked instead of computing it here.
"""

from __future__ import annotations

import functools
import io
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, TypeVar

import numpy as np

from kira import _core
from kira.knowledge_base.compound import CompoundIndex
from kira.knowledge_base.storage import (ServesCompoundPartners, ServesCompoundsPerHit, ServesDocumentGroups,
                                        ServesLevelFilter, ServesLexical, Storage)

T = TypeVar("T")



class DerivedViews:
    """The derived views of one knowledge base over `storage` (module docstring)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.caches: dict[Any, Any] = {}  # per commit
        # views kept across commits and updated with what changed ({name: (largest chunk id seen,
        # removal-log position read, view)}); a rollback drops them (they may hold undone rows)
        self.kept: dict[str, tuple[int, int, Any]] = {}

    def clear(self, *, kept: bool = False) -> None:
        """Drop the per-commit values (and, with `kept`, the kept views too: after a rollback)."""
        self.caches.clear()
        if kept:
            self.kept.clear()

    def cached(self, key: Any, build: Callable[[], T]) -> T:
        """`build()`'s value, computed once per commit."""
        if key not in self.caches:
            self.caches[key] = build()
        value: T = self.caches[key]
        return value

    def level_ids(self, levels: Iterable[str]) -> np.ndarray:
        """Sorted int64 ids of chunks at `levels` (cached per commit, updated with what changed)."""
        key = tuple(sorted(set(levels)))
        storage = self.storage
        if isinstance(storage, ServesLevelFilter):
            return self.cached(("levels", key), lambda: storage.level_ids(key))
        rows = self.storage.rows
        return self.cached(("levels", key), lambda: self.kept_view(
            f"levels:{','.join(key)}", read=lambda after, upto: rows.chunk_ids(levels=key, after=after, upto=upto),
            build=lambda ids: ids, update=lambda ids, new, gone: np.concatenate([ids[~np.isin(ids, gone)], new])))

    def kept_view(self, name: str, *, read: Callable[[int, int], Any], build: Callable[[Any], T],
                  update: Callable[[T, Any, np.ndarray], T]) -> T:
        """A view of the chunks kept across commits and updated with what changed since it was
        last built, instead of being rebuilt (documents and chunks are only ever added or removed).

        read(after, upto): what the view needs of the chunks with after < id <= upto;
        build(read(0, top)): the view from scratch; update(previous, read(last, top), removed
        chunk ids): the view now. Without a removal log (a version-1 database, Milvus) it is built
        from scratch each time. The log position and the largest id are read first, so whatever
        commits meanwhile is read next time (see VectorSpaces.catch_up); a rollback drops
        every kept view (they may hold rows it undid).
        """
        rows = self.storage.rows
        position = rows.removal_log_position()
        top = rows.max_chunk_id()
        state = self.kept.get(name)
        if state is not None and position is not None:
            last_top, last_position, previous = state
            gone, position = rows.removed_since(last_position) or (np.zeros(0, np.int64), last_position)
            value = update(previous, read(last_top, top), gone)
            top = max(top, last_top)
        else:
            value = build(read(0, top))
        if position is not None:
            self.kept[name] = (top, position, value)
        return value

    def view(self, spec: DerivedView[T], kb: Any) -> T:
        """The value of a derived view for the current commit (built on first use, dropped by `clear`)."""
        return self.cached(f"view:{spec.name}", lambda: spec.build(kb))

    def lexical(self, kb: Any) -> Any:
        """The `kira.knowledge_base.lexical.LexicalIndex` over document and passage chunks (cached per commit)."""
        if isinstance(self.storage, ServesLexical):
            return self.cached("view:lexical", self.storage.lexical)
        return self.view(LEXICAL, kb)

    def compounds(self, kb: Any) -> CompoundIndex:
        """The compound groups of this commit, in one representation (`kira.knowledge_base.compound`)."""
        if isinstance(self.storage, ServesCompoundPartners):
            return self.cached("view:compounds", self.storage.compounds)
        return self.view(COMPOUNDS, kb)

    def document_groups(self, kb: Any) -> Any:
        if isinstance(self.storage, ServesDocumentGroups):
            return self.cached("view:document_groups", self.storage.document_groups)
        return self.view(DOCUMENT_GROUPS, kb)

    def document_chunk_of(self, chunk_ids: np.ndarray, kb: Any) -> np.ndarray:
        """The document-level chunk id of each chunk id (-1 for unknown ids)."""
        if isinstance(self.storage, ServesDocumentGroups):
            return self.storage.document_chunk_of(chunk_ids)
        keys, values = self.view(DOC_CHUNK_MAP, kb)
        ids = np.asarray(chunk_ids, dtype=np.int64)
        if not len(keys):
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
        return np.where(keys[pos] == ids, values[pos], -1)

    def lexical_texts(self, after: int, upto: int) -> tuple[list[int], list[str]]:
        """(ids, indexed texts) of the document and passage chunks with after < id <= upto, by id: each
        document chunk with its description, its doc id and its metadata values; each passage with its text."""
        from kira.knowledge_base.lexical import indexed_text

        rows = self.storage.rows.lexical_rows(after, upto)
        return [int(r[0]) for r in rows], [indexed_text(description, doc_id, metadata)
                                           for _cid, description, doc_id, metadata in rows]

    def lexical_index(self) -> Any:
        """The lexical index, kept across commits (`kept_view`): only the chunks added since it was last built
        are read and tokenised, the removed ones dropped."""
        from kira.knowledge_base.lexical import LexicalIndex

        return self.kept_view("lexical", read=self.lexical_texts, build=lambda rows: LexicalIndex.build(*rows),
                              update=lambda index, rows, gone: index.updated(gone, *rows))

    def document_chunk_map(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk ids ascending, their document chunk ids), kept across commits (`kept_view`); read it
        through the per-commit view `DOC_CHUNK_MAP`."""
        rows = self.storage.rows

        def read(after: int, upto: int) -> tuple[np.ndarray, np.ndarray]:
            found = rows.document_chunk_rows(after, upto)
            return np.array([r[0] for r in found], dtype=np.int64), np.array([r[1] for r in found], dtype=np.int64)

        def update(previous: tuple[np.ndarray, np.ndarray], new: tuple[np.ndarray, np.ndarray],
                   gone: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            keep = ~np.isin(previous[0], gone)
            return np.concatenate([previous[0][keep], new[0]]), np.concatenate([previous[1][keep], new[1]])

        def build(first: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
            return first

        return self.kept_view("doc_chunk_map", read=read, build=build, update=update)


def decode_thumbnail(png: bytes | None) -> np.ndarray | None:
    """A stored thumbnail's PNG bytes as uint8 RGB, or None when there are none."""
    if not png:
        return None
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


@dataclass(frozen=True)
class DerivedView(Generic[T]):
    """A view of the stored contents that queries read: how it is built, and when it is invalid.

    name: its key (and its `warm` entry); build(kb): the value for the current commit;
    kept: its state survives commits and is updated with what changed (`DerivedViews.kept_view`)
    instead of being rebuilt (the per-commit value is still dropped by every commit).
    """

    name: str
    build: Callable[[Any], T]
    kept: bool = False


LEXICAL = DerivedView("lexical", lambda kb: kb.views.lexical_index(), kept=True)
DOC_CHUNK_MAP = DerivedView("doc_chunk_map", lambda kb: kb.views.document_chunk_map(), kept=True)
DOCUMENT_GROUPS = DerivedView("document_groups", lambda kb: _core.GroupMap(*kb.view(DOC_CHUNK_MAP)))


def build_compounds(kb: Any) -> CompoundIndex:
    rows = kb.storage.rows
    groups = rows.groups()
    return CompoundIndex.build(groups, rows.document_chunk_ids({d for _, _, docs in groups for d in docs}))


COMPOUNDS = DerivedView("compounds", build_compounds)


DERIVED_VIEWS: tuple[DerivedView[Any], ...] = (LEXICAL, DOC_CHUNK_MAP, DOCUMENT_GROUPS, COMPOUNDS)
"""Every derived view `warm` builds; a new one is added here, not listed by hand elsewhere."""


def warm(kb: Any) -> dict[str, float]:
    """Build the derived views a query of `kb` reads, so the first query after a commit does not pay for them:
    the `DERIVED_VIEWS` (those its storage answers itself, from the storage) and, with a model stack that has no
    text tower in image space, the text->image bridge (at 100k chunks they cost the first query some 70-85 ms;
    benchmarks/suites/latency_ask.py --first). A writer calls this after `commit()`, a reader now and then (each `ask`
    refreshes too, and would then build them itself); with nothing new it returns at once. `kira.Kira.warm` also
    builds the pipeline's own views. Returns {view: seconds spent on it} (about 0 for a view already built)."""
    steps: dict[str, Callable[[], Any]] = {}
    for spec in DERIVED_VIEWS:
        if spec is DOC_CHUNK_MAP and isinstance(kb.storage, ServesDocumentGroups):
            continue  # the backend groups by document itself
        if spec is COMPOUNDS and isinstance(kb.storage, ServesCompoundsPerHit):
            continue  # queries fetch their hits' groups; every group is never read at once
        method = getattr(kb, spec.name, None)  # the knowledge base's own reader (it may ask the backend instead)
        steps[spec.name] = method if callable(method) else functools.partial(kb.view, spec)
    if kb.dims() is not None and getattr(kb.models, "image_text", None) is None:
        steps["bridge"] = kb.bridge  # how a text question reaches the visual index
    seconds: dict[str, float] = {}
    for name, build in steps.items():
        start = time.perf_counter()
        build()
        seconds[name] = time.perf_counter() - start
    return seconds
