"""The storage seam: what the one `KnowledgeBase` asks of the backend that keeps its rows, vectors and settings.

`KnowledgeBase` (kira.knowledge_base.kb) owns everything that is the same whichever backend holds
the data: writing (one path builds a typed `kira.knowledge_base.batch.WriteBatch`), derived views,
the profile, the adapter and bridge, the models' identity. A `Storage` keeps what is stored:

* settings: string values by key (``config`` and ``profile`` hold their JSON; ``levels``, ``dims``,
  ``model_identity``, ... as the knowledge base writes them);
* rows (`StoredRows`, its ``rows``): documents, chunks, provenances, pieces, thumbnails, groups by id,
  and the chunk rows a derived view reads since a position;
* one prepared batch written all or nothing, text pieces, a document removed, commit / rollback / close;
* the vector index of each space.

`EmbeddedStorage` (kira.knowledge_base.embedded.storage: SQLite + the core's indexes) and
`MilvusStorage` (kira.knowledge_base.milvus.storage) implement it. A backend may also answer some
derived views itself, the optional capabilities below (e.g. Milvus filters levels and groups by
document server-side); where it does not, the knowledge base computes them in this process from
the methods of `Storage`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from kira.knowledge_base.batch import WriteBatch
from kira.knowledge_base.compound import CompoundIndex
from kira.knowledge_base.rows import ChunkRow, DocumentRow

if TYPE_CHECKING:
    from kira.models.bridge import TextToImageBridge


@runtime_checkable
class StoredRows(Protocol):
    """Rows read by id (what the stages read through the knowledge base, never directly), and the chunk
    rows its derived views read. The embedded `Store` and the Milvus `MilvusRows` implement it."""

    def chunks(self, ids: Sequence[int] | np.ndarray) -> Mapping[int, ChunkRow]:
        """chunk id -> `ChunkRow`; unknown ids absent."""
        ...

    def documents(self, doc_ids: Iterable[str] | None = None) -> Mapping[str, DocumentRow]:
        """doc id -> `DocumentRow`; all when None."""
        ...

    def provenances(self, doc_ids: Iterable[str]) -> Mapping[str, dict[str, Any]]:
        ...

    def document_chunk_ids(self, doc_ids: Iterable[str]) -> Mapping[str, int]:
        """doc id -> its document-level chunk id."""
        ...

    def piece_vectors(self, keys: Iterable[tuple[str, str]], dim: int) -> Mapping[tuple[str, str], np.ndarray]:
        """(doc id, piece text) -> its stored raw sentence vector of width `dim`; pieces not stored absent."""
        ...

    def thumbnail(self, doc_id: str) -> bytes | None:
        """The PNG bytes of the document's preview, or None."""
        ...

    def has_document(self, doc_id: str) -> bool:
        ...

    def count_documents(self) -> int:
        ...

    def count_chunks(self) -> dict[str, int]:
        """Chunks per level."""
        ...

    def groups(self) -> list[tuple[str, str, list[str]]]:
        """Every group as (kind, group id, doc ids in order)."""
        ...

    def group_size(self, kind: str, group_id: str) -> int:
        ...

    def captioned_document_ids(self) -> np.ndarray:
        """Document chunk ids of documents with a user caption or tags and both vectors (the bridge's pairs)."""
        ...

    def vectors(self, space: str, ids: Sequence[int] | np.ndarray, dim: int) -> np.ndarray:
        """The raw stored vectors of chunk `ids` in `space`, in the order given."""
        ...

    # ---- what derived views read: chunks with after < id <= upto, by id ------------------
    def chunk_ids(self, *, levels: Iterable[str] | None = None, after: int = 0, upto: int | None = None) -> np.ndarray:
        ...

    def lexical_rows(self, after: int, upto: int) -> list[tuple[int, str, str, str]]:
        """(id, description, doc id, metadata JSON) of the document and passage chunks."""
        ...

    def document_chunk_rows(self, after: int, upto: int) -> list[tuple[int, int]]:
        """(chunk id, its document chunk id)."""
        ...

    def max_chunk_id(self) -> int:
        ...

    def removal_log_position(self) -> int | None:
        """Where the log of removed chunks stands, or None without one (views are then rebuilt per commit)."""
        ...

    def removed_since(self, position: int) -> tuple[np.ndarray, int] | None:
        """(chunk ids removed since `position`, the position now)."""
        ...

    # ---- what `store_text_pieces` reads -------------------------------------------------
    def documents_without_pieces(self) -> list[str]:
        ...

    def described_chunks(self, doc_ids: Iterable[str], *, levels: Iterable[str]
                         ) -> dict[str, tuple[str | None, bool, list[tuple[str, str]]]]:
        """doc id -> (caption, has an image, [(level, description)] of its chunks at `levels`, by id)."""
        ...


@runtime_checkable
class Storage(Protocol):
    """A backend of the knowledge base (module docstring): ``rows`` answers reads, the methods write and keep.
    ``kind`` is "embedded" or "milvus"; ``where`` names it in messages; ``path`` is its local directory
    (or, on a Milvus server, its name). The knowledge base only reads these five, so a backend may hold each
    as an attribute or a property."""

    @property
    def kind(self) -> str: ...

    @property
    def where(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def rows(self) -> StoredRows: ...

    def get_setting(self, key: str, default: str | None = None) -> str | None:
        """A stored setting (``config`` and ``profile``: their JSON), or `default`."""
        ...

    def put_settings(self, values: Mapping[str, str]) -> None:
        """Store settings (with the next commit where the backend has transactions)."""
        ...

    def generation(self) -> int:
        """How many commits the knowledge base has seen (any process's)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Where it lives and how it indexes, for `KnowledgeBase.stats` (path, backend, index kind, ...)."""
        ...

    def open_spaces(self, dims: Mapping[str, int], *, create: bool) -> None:
        """Attach the vector indexes of dimensions `dims` (`create`: make them, at the first write)."""
        ...

    def index(self, space: str) -> Any:
        """The `kira.backends.VectorIndex` of 'visual' or 'text', or None before the first image."""
        ...

    def write(self, batch: WriteBatch) -> None:
        """Store `batch` whole or not at all (ValueError names what was refused; nothing written)."""
        ...

    def write_pieces(self, pieces: Mapping[str, tuple[Sequence[str], np.ndarray]]) -> None:
        """Store text pieces (doc id -> texts, raw vectors) of documents that have none; durable at once."""
        ...

    def remove(self, doc_id: str) -> bool:
        """Remove a document and all its chunks; False when nothing of it was stored."""
        ...

    def commit(self, *, checkpoint: bool | None = None) -> int:
        """Make the writes durable and visible to other processes; returns the generation. `checkpoint`:
        also save what the backend keeps besides (index files, a flush); None: when due, False: not now."""
        ...

    def rollback(self) -> None:
        ...

    def refresh(self) -> bool:
        """Pick up other processes' commits; whether there were any."""
        ...

    def close(self) -> None:
        ...


# ---- optional capabilities: a backend that has one answers it itself --------------------------
@runtime_checkable
class ServesLevelFilter(Protocol):
    def level_ids(self, levels: Sequence[str]) -> np.ndarray:
        """Chunk ids at `levels`, in a form its own indexes turn into a server-side filter."""
        ...


@runtime_checkable
class ServesDocumentGroups(Protocol):
    def document_groups(self) -> Any:
        """``groups=`` for its own indexes' searches (at most n chunks per document, grouped server-side)."""
        ...

    def document_chunk_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        ...


@runtime_checkable
class ServesLexical(Protocol):
    def lexical(self) -> Any:
        """A lexical index (``search``, ``specificity``, ``postings``) answered by the backend."""
        ...


@runtime_checkable
class ServesCompoundPartners(Protocol):
    def compounds(self) -> CompoundIndex:
        """The compound groups (`kira.knowledge_base.compound.CompoundIndex`) as the backend keeps them."""
        ...


@runtime_checkable
class ServesCompoundsPerHit(Protocol):
    def compounds_for(self, *, doc_ids: Iterable[str] = (), chunk_ids: Iterable[int] = ()) -> CompoundIndex:
        """The `CompoundIndex` of the groups these documents (doc ids, or document chunk ids) reach, fetched for
        them alone (what a query reads of its hits; every group is never read at once)."""
        ...


@runtime_checkable
class ServesNames(Protocol):
    def identifier_postings(self, text: str, *, allow: np.ndarray | None = None) -> Mapping[str, np.ndarray]:
        """{word of `text`: the document chunk ids it names} (kira.knowledge_base.identifiers' rule), answered
        by the backend per word."""
        ...


@runtime_checkable
class ReportsUnavailable(Protocol):
    def writing(self, doing: str) -> Any:
        """A context manager around a write: a store that stopped answering raises one ConnectionError naming
        where, what is kept and what to do (Milvus: kira.knowledge_base.milvus.faults)."""
        ...


@runtime_checkable
class KnowsBridgeCurrent(Protocol):
    """A `KeepsBridge` whose writer also records, at each commit, that its stored bridge (or that there is
    none) still holds, so a reader loads it without counting the captioned documents."""

    def bridge_current(self) -> bool:
        """Whether the stored bridge (or "none") was stored or confirmed at the current generation."""
        ...

    def confirm_bridge(self, captioned: int) -> None:
        """Record that at this generation, with `captioned` captioned documents, the stored bridge holds (fewer
        than 2: that there is none)."""
        ...


@runtime_checkable
class KeepsBridge(Protocol):
    """Stores the fitted text->image bridge, so another process loads it instead of fitting it again."""

    def bridge_fitted_on(self) -> int:
        """How many captioned documents the stored bridge was fitted on (0: none stored)."""
        ...

    def load_bridge(self) -> TextToImageBridge | None:
        """The stored bridge, or None when there is none or it is unreadable (then it is refitted)."""
        ...

    def save_bridge(self, bridge: Any, fitted_on: int) -> None:
        ...


@runtime_checkable
class KeepsAdapter(Protocol):
    """Stores a domain adapter and keeps its visual index projected through it (readers reload on refresh)."""

    adapter: Any

    def set_adapter(self, adapter: Any, name: str) -> None:
        """Store `adapter` (None: remove it) under its registered `name` and re-project the visual index."""
        ...


@runtime_checkable
class ReusesStoredPieces(Protocol):
    """Rows (a storage's ``rows``) that can say which texts any document already stores as a text piece, so a
    new batch reuses their vectors instead of encoding them again (the embedded store; Milvus encodes them)."""

    def stored_piece_texts(self, texts: Iterable[str], dim: int) -> dict[str, np.ndarray]:
        """{text: raw vector} of the texts any document already stores as a piece."""
        ...


__all__ = ["KeepsAdapter", "KeepsBridge", "ReusesStoredPieces", "ServesCompoundPartners",
           "ServesDocumentGroups", "ServesLevelFilter", "ServesLexical", "Storage", "StoredRows"]
