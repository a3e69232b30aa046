"""The knowledge base's derived views: what queries read that is computed from the stored rows.

`DerivedViews` is a part of `KnowledgeBase` (a mixin): level id sets, the lexical (BM25)
index, the chunk -> document map and the document groups a capped search uses, the
compound groups (temporal sequences and multiview sets) in their three read forms, and
thumbnails. Each is cached per commit (`memo`, dropped by `commit`, `rollback` and a
`refresh` that finds new commits) or kept across commits and updated with what changed
(`kept_view`); `warm` builds them all.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from kira import _core
from kira.knowledge_base.compound import CompoundIndex, CompoundQueries
from kira.knowledge_base.rows import DocumentRow

T = TypeVar("T")

MAX_LEXICAL_CHARS = 20_000
"""What of one chunk's text the lexical (BM25) index reads: a few thousand words, well past
any caption or passage it ranks by, so a 10 MB caption no longer costs seconds per commit."""


class DerivedViews(CompoundQueries):
    """Mixin of `KnowledgeBase`: the derived views (module docstring). Needs ``store``, ``_caches``, ``_derived``,
    ``vectors``, ``models``, ``refresh`` and ``bridge`` of the knowledge base."""

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

    # ---- rows a query reads by id (stages read these, never ``store``) -------------------
    def chunks(self, ids: Sequence[int] | np.ndarray) -> Mapping[int, Any]:
        """chunk id -> `ChunkRow` (id, doc_id, level, parent_id, box, description); unknown ids absent."""
        return self.store.chunks(ids)

    def provenances(self, doc_ids: Iterable[str]) -> Mapping[str, dict[str, Any]]:
        """doc id -> how the document was made (encoders, labels, text read)."""
        return self.store.provenances(doc_ids)

    def document_chunk_ids(self, doc_ids: Iterable[str]) -> Mapping[str, int]:
        """doc id -> its document-level chunk id (unknown ids absent)."""
        return self.store.document_chunk_ids(doc_ids)

    def piece_vectors(self, keys: Iterable[tuple[str, str]], dim: int) -> Mapping[tuple[str, str], np.ndarray]:
        """(doc id, piece text) -> its stored sentence vector of width `dim` (pieces not stored are absent)."""
        return self.store.piece_vectors(keys, dim)

    def has_document(self, doc_id: str) -> bool:
        return bool(self.store.has_document(doc_id))

    def generation(self) -> int:
        """How many commits the knowledge base has seen (any process's)."""
        return int(self.store.generation())

    def thumbnail_png(self, doc_id: str) -> bytes | None:
        """The PNG bytes of the document's stored preview, or None."""
        return self.store.thumbnail(doc_id)

    def view(self, spec: DerivedView[T]) -> T:
        """The value of a derived view for the current commit: built on first use and kept until the
        invalidation its `DerivedView` declares (every view here is dropped by `commit`, `rollback`
        and a `refresh` that finds new commits; a "kept" view's own state survives them and is
        updated with what changed, `kept_view`)."""
        key = f"view:{spec.name}"
        if key not in self._caches:
            self._caches[key] = spec.build(self)
        return self._caches[key]

    def compounds(self) -> CompoundIndex:
        """The compound groups of this commit, in one representation (`kira.knowledge_base.compound`)."""
        return self.view(COMPOUNDS)

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """`build()`'s value, computed once per commit and kept until the next: for a caller's own views of
        the stored contents (kira's own are typed `DerivedView`s)."""
        key = f"memo:{key}"
        if key not in self._caches:
            self._caches[key] = build()
        return self._caches[key]

    def lexical(self) -> Any:
        """The `kira.knowledge_base.lexical.LexicalIndex` over document and passage chunks (cached per commit).

        Each document chunk is indexed with its description, its doc id and its metadata
        values; each passage chunk with its text.
        """
        return self.view(LEXICAL)

    def _lexical_texts(self, after: int, upto: int) -> tuple[list[int], list[str]]:
        """(ids, indexed texts) of the document and passage chunks with after < id <= upto, by id."""
        rows = self.store.lexical_rows(after, upto)
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

        They are the `DERIVED_VIEWS` (each declares its build and invalidation): the lexical
        index, the chunk -> document map and the document groups of a capped search, and the
        compound groups in their one representation; and with a model stack
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
        steps: dict[str, Callable[[], Any]] = {spec.name: (lambda spec=spec: self.view(spec)) for spec in DERIVED_VIEWS}
        if self.vectors is not None and getattr(self.models, "image_text", None) is None:
            steps["bridge"] = self.bridge  # how a text question reaches the visual index (`bridge`)
        seconds: dict[str, float] = {}
        for name, build in steps.items():
            start = time.perf_counter()
            build()
            seconds[name] = time.perf_counter() - start
        return seconds

    def _document_chunk_map(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk ids ascending, their document chunk ids), kept across commits (`kept_view`); read it
        through the per-commit view `DOC_CHUNK_MAP`."""
        def rows(after: int, upto: int) -> tuple[np.ndarray, np.ndarray]:
            found = self.store.document_chunk_rows(after, upto)
            return np.array([r[0] for r in found], dtype=np.int64), np.array([r[1] for r in found], dtype=np.int64)

        def update(previous: tuple[np.ndarray, np.ndarray], new: tuple[np.ndarray, np.ndarray],
                   gone: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            keep = ~np.isin(previous[0], gone)
            return np.concatenate([previous[0][keep], new[0]]), np.concatenate([previous[1][keep], new[1]])

        return self.kept_view("doc_chunk_map", read=rows, build=lambda r: r, update=update)

    def document_groups(self) -> Any:
        """A `kira._core.GroupMap` from chunk id to its document chunk id (cached per commit).

        Pass it to an index search as `groups=` with `per_group=n` to get at most n chunks
        of any one document back.
        """
        return self.view(DOCUMENT_GROUPS)

    def document_chunk_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document-level chunk id of each chunk id (-1 for unknown ids); an in-memory map cached per commit."""
        keys, values = self.view(DOC_CHUNK_MAP)
        ids = np.asarray(chunk_ids, dtype=np.int64)
        if not len(keys):
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
        return np.where(keys[pos] == ids, values[pos], -1)

    def thumbnail(self, doc_id: str) -> np.ndarray | None:
        """The stored <= 160 px preview of a document's image (uint8 RGB), or None."""
        return decode_thumbnail(self.store.thumbnail(doc_id))


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


LEXICAL = DerivedView("lexical", lambda kb: kb._lexical_index(), kept=True)
DOC_CHUNK_MAP = DerivedView("doc_chunk_map", lambda kb: kb._document_chunk_map(), kept=True)
DOCUMENT_GROUPS = DerivedView("document_groups", lambda kb: _core.GroupMap(*kb.view(DOC_CHUNK_MAP)))
def build_compounds(kb: Any) -> CompoundIndex:
    groups = kb.store.groups()
    return CompoundIndex.build(groups, kb.store.document_chunk_ids({d for _, _, docs in groups for d in docs}))


COMPOUNDS = DerivedView("compounds", build_compounds)
DERIVED_VIEWS: tuple[DerivedView[Any], ...] = (LEXICAL, DOC_CHUNK_MAP, DOCUMENT_GROUPS, COMPOUNDS)
"""Every derived view `warm` builds; a new one is added here, not listed by hand elsewhere."""
