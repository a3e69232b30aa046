"""The knowledge base's vector indexes: one core index per space, saved beside the database.

Spaces: ``visual`` (image-encoder space; chunk crops; after `set_adapter` it holds the
adapter's projection of the raw vectors) and ``text`` (sentence-encoder space; chunk
descriptions and passages).

Durability design
-----------------
* The SQLite database is the source of truth. Each chunk's raw vectors are stored there
  as float32 BLOBs in the same transaction as the chunk row.
* The index files (``visual.index``, ``text.index``, written by the core's atomic
  ``save``) are a cache of the database. ``manifest.json`` (written atomically after
  the index files) records the database *generation* (a counter bumped by every commit)
  the files match, plus their sizes.
* Saving the files rewrites them whole (hundreds of MB at 100k chunks), so a commit
  saves them only when the changes since they were last saved exceed
  `INDEX_CHECKPOINT_SHARE` of the indexes (`VectorSpaces.due`), when asked to
  (`commit(checkpoint=True)`), and at close; a small commit to a large knowledge base
  commits the database alone, and the files catch up at a later checkpoint.
* On open, when the manifest's generation equals the database's and the sizes agree, the
  files are loaded as they are: no rebuild, no model forward pass. Otherwise (a deferred
  checkpoint, a crash between the database commit and the index save, or index saving
  deferred during a long ingest) the ids in the files are compared with the ids in the
  database: missing rows are re-added from the stored vectors, stale ids removed. That
  repair touches only the difference (at most about the checkpoint share, unless a
  process died); a missing or unreadable index file is rebuilt from the BLOBs.
* Read-only openers repair in memory and never write.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from kira.atomic import write_json_atomic
from kira.knowledge_base.embedded.store import Store

log = logging.getLogger(__name__)

SPACES = ("visual", "text")
INDEX_CHECKPOINT_SHARE = 0.01
"""A commit saves the index files when the rows added or removed since they were last saved
exceed this share of the indexes: at 100k chunks a 1,000-chunk change, which an opener
re-adds from the database in well under a second, while a 10-chunk commit stays cheap."""
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


@dataclass
class RepairReport:
    """What opening the indexes had to fix, per space."""

    added: dict[str, int]
    removed: dict[str, int]
    rebuilt: dict[str, bool]

    @property
    def clean(self) -> bool:
        return not any(self.added.values()) and not any(self.removed.values()) and not any(self.rebuilt.values())


def make_index(kind: str, dim: int, dtype: Literal["f32", "f16", "i8"] = "f32") -> Any:
    """A new empty core index of `kind` ('flat' or 'hnsw')."""
    from kira import _core

    if kind == "flat":
        return _core.FlatIndex(dim, dtype=dtype)
    if kind == "hnsw":
        return _core.HNSWIndex(dim, dtype=dtype)
    raise ValueError(f"index kind must be 'flat' or 'hnsw'; got {kind!r}")


def load_index(kind: str, path: Path) -> Any:
    from kira import _core

    cls = _core.FlatIndex if kind == "flat" else _core.HNSWIndex
    return cls.load(path)


def ids_digest(index: Any) -> str:
    """A digest of the ids an index holds (sorted): the manifest keeps it, so an older index
    file with as many rows as the current one is not taken for it (about 1 ms at 100k ids)."""
    ids = np.sort(np.asarray(index.ids(), dtype="<i8"))
    return hashlib.blake2b(ids.tobytes(), digest_size=16).hexdigest()


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Delete what an interrupted save leaves in a knowledge base directory (``*.index.tmp-*``
    from the core's atomic save, ``manifest.json*.tmp``, ``adapter.tmp``); call it only while
    holding the writer lock (only the writer saves). Returns what was removed."""
    removed = []
    for pattern in ("*.index.tmp-*", f"{MANIFEST}*.tmp", "config.json*.tmp"):
        for path in Path(directory).glob(pattern):
            try:
                path.unlink()
                removed.append(path)
            except OSError as exc:
                log.warning("cannot remove the leftover %s (%s)", path, exc)
    leftover = Path(directory) / "adapter.tmp"
    if leftover.is_dir():
        import shutil

        shutil.rmtree(leftover, ignore_errors=True)
        removed.append(leftover)
    if removed:
        log.info("removed %d file(s) left by an interrupted save: %s", len(removed), [p.name for p in removed])
    return removed


class VectorSpaces:
    """The two indexes of one knowledge base and their manifest.

    Parameters
    ----------
    directory: the knowledge base directory.
    kind: 'flat' (exact) or 'hnsw'.
    dims: space -> vector size stored in the database (raw vectors).
    transform: optional function applied to raw visual vectors before they enter the
        visual index (the domain adapter's `apply`); `visual_dim` is its output size.
    """

    def __init__(
        self,
        directory: Path,
        kind: str,
        dims: dict[str, int],
        *,
        transform: Callable[[np.ndarray], np.ndarray] | None = None,
        visual_dim: int | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.kind = kind
        self.dims = dict(dims)
        self.transform = transform
        self.index_dims = {"visual": visual_dim or self.dims["visual"], "text": self.dims["text"]}
        self.indexes: dict[str, Any] = {}
        self.unsaved = 0  # rows added to or removed from the indexes since the files were last saved (an upper bound)
        # per space, after a sync with the database: (the largest chunk id it held, the removal-log position read)
        self._synced: dict[str, tuple[int, int]] = {}
        # per space: chunks whose stored vector could not enter the index ({id: why}); see `kira check`
        self.damaged: dict[str, dict[int, str]] = {s: {} for s in SPACES}
        self.manifest_outdated = False  # the manifest has no id digest (an older kira wrote it)

    def path(self, space: str) -> Path:
        return self.directory / f"{space}.index"

    # ---- adding ---------------------------------------------------------------------
    def prepare(self, space: str, raw: np.ndarray) -> np.ndarray:
        """Raw vectors -> what the index of `space` stores."""
        raw = np.ascontiguousarray(raw, dtype=np.float32)
        if space == "visual" and self.transform is not None and len(raw):
            return np.ascontiguousarray(self.transform(raw), dtype=np.float32)
        return raw

    def add(self, space: str, ids: np.ndarray, raw: np.ndarray) -> None:
        if len(ids):
            self.indexes[space].add(np.asarray(ids, dtype=np.int64), self.prepare(space, raw))
            self.unsaved += len(ids)

    def remove(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        for index in self.indexes.values():
            present = np.array([i for i in ids if index.contains(int(i))], dtype=np.int64)
            if len(present):
                index.remove(present)
                self.unsaved += len(present)

    def _files_present(self) -> bool:
        return (self.directory / MANIFEST).is_file() and all(self.path(s).is_file() for s in self.indexes)

    def due(self, share: float = INDEX_CHECKPOINT_SHARE) -> bool:
        """Whether the index files should be saved now: something changed since they were, and
        either a file or the manifest is missing or the change exceeds `share` of the indexes."""
        if not self.unsaved:
            return False
        if not self._files_present():
            return True
        return self.unsaved > share * sum(len(index) for index in self.indexes.values())

    def checkpoint(self, generation: int, *, force: bool | None = None, share: float = INDEX_CHECKPOINT_SHARE) -> bool:
        """After the database committed `generation`: save the files when `force` is True, or
        (None) when `due(share)`; never when False. Files that already hold every row only get
        the manifest updated to `generation`. Returns whether the files were saved."""
        if force or (force is None and self.due(share)):
            self.save(generation)
            return True
        if not self.unsaved and self._files_present():
            self.write_manifest(generation)  # no row changed since the files were saved
        return False

    # ---- open / sync ----------------------------------------------------------------
    def open(self, store: Store) -> RepairReport:
        """Load the index files and bring them in line with the database (see module doc);
        the database is read in one snapshot, so a writer's commit meanwhile is read next time."""
        with store.snapshot():
            return self._open(store)

    def _open(self, store: Store) -> RepairReport:
        manifest = self._read_manifest()
        position = store.removal_log_position()  # before the generation: see catch_up
        generation = store.generation()
        report = RepairReport({s: 0 for s in SPACES}, {s: 0 for s in SPACES}, {s: False for s in SPACES})
        for space in SPACES:
            index = None
            entry = manifest.get("spaces", {}).get(space, {})
            if self.path(space).is_file() and entry.get("dim") == self.index_dims[space]:
                try:
                    index = load_index(self.kind, self.path(space))
                except (ValueError, OSError, RuntimeError) as exc:
                    log.warning("index file %s is unreadable (%s); rebuilding it from the database", self.path(space), exc)
            if index is None or index.dim != self.index_dims[space]:
                index = make_index(self.kind, self.index_dims[space])
                # A brand-new knowledge base has no files yet: nothing to report.
                report.rebuilt[space] = bool(entry) or self.path(space).is_file() or len(store.chunk_ids(space=space)) > 0
            self.indexes[space] = index
            if (entry and manifest.get("generation") == generation and entry.get("size") == len(index)
                    and entry.get("ids") == ids_digest(index)):
                if position is not None:  # in step with the database: later syncs read only what changes
                    ids = np.asarray(index.ids(), dtype=np.int64)
                    self._synced[space] = (int(ids.max()) if len(ids) else 0, position)
                continue  # the files match the last commit: nothing to verify
            if entry and "ids" not in entry:
                self.manifest_outdated = True  # written before the id digest: a writer rewrites it (KnowledgeBase)
            added, removed = self._sync(store, space)
            report.added[space], report.removed[space] = added, removed
        if any(report.rebuilt.values()):
            log.warning("index files missing or unreadable at database generation %d; rebuilt %s from the database "
                        "(added %s)", generation, report.rebuilt, report.added)
        elif not report.clean:
            # routine after a deferred checkpoint (KnowledgeBase.commit); also what a crash before one leaves
            log.info("index files were behind database generation %d; brought up to date (added %s, removed %s)",
                     generation, report.added, report.removed)
        return report

    def catch_up(self, store: Store, space: str) -> tuple[int, int]:
        """Bring the index of `space` up to the database's committed state, for a reader whose
        index was in step with it at its last sync: add the chunks above the largest id seen then,
        remove those logged as removed since. Falls back to `_sync` (list every id) without that
        state or on a version-1 database. Returns (added, removed)."""
        with store.snapshot():  # the removal log, the new ids and their vectors from one committed state
            return self._catch_up(store, space)

    def _catch_up(self, store: Store, space: str) -> tuple[int, int]:
        state = self._synced.get(space)
        removed = store.removed_since(state[1]) if state is not None else None
        if state is None or removed is None:
            return self._sync(store, space)
        index = self.indexes[space]
        gone, position = removed  # read before the new ids: a chunk added and removed meanwhile is not re-added
        new = store.chunk_ids(space=space, after=state[0])
        stale = np.array([i for i in gone if index.contains(int(i))], dtype=np.int64)
        if len(stale):
            index.remove(stale)
            self.unsaved += len(stale)
        missing = np.array([i for i in new if not index.contains(int(i))], dtype=np.int64)
        added = self._add_stored(store, space, missing)
        self._synced[space] = (max(state[0], int(new[-1]) if len(new) else 0), position)
        return added, int(len(stale))

    def _add_stored(self, store: Store, space: str, ids: np.ndarray) -> int:
        """Add the rows `ids` of `space` from the vectors the database stores, 8192 at a time;
        returns how many were added. Call it inside `store.snapshot()` with the read that listed
        `ids`; an id no longer stored (removed since it was listed) is skipped, never a zero row."""
        added = 0
        for start in range(0, len(ids), 8192):
            part = ids[start : start + 8192]
            found, vecs, damaged = store.usable_vectors(space, part, self.dims[space])
            if damaged:
                # one bad row must not make the knowledge base unopenable: leave it out, say which
                self.damaged[space].update(damaged)
                log.warning("left %d chunk(s) out of the %s index, their stored vectors are damaged: %s; "
                            "`kira check` lists them", len(damaged), space,
                            ", ".join(f"chunk {c} ({why})" for c, why in sorted(damaged.items())[:10]))
            if len(found) + len(damaged) < len(part):
                log.info("%d %s chunk(s) were removed while being read; skipped",
                         len(part) - len(found) - len(damaged), space)
            self.add(space, found, vecs)
            added += len(found)
        return added

    def _sync(self, store: Store, space: str) -> tuple[int, int]:
        with store.snapshot():
            return self._sync_in_snapshot(store, space)

    def _sync_in_snapshot(self, store: Store, space: str) -> tuple[int, int]:
        index = self.indexes[space]
        position = store.removal_log_position()  # read before the ids, as in catch_up
        db_ids = store.chunk_ids(space=space)
        index_ids = np.sort(np.asarray(index.ids(), dtype=np.int64)) if len(index) else np.zeros(0, np.int64)
        missing = np.setdiff1d(db_ids, index_ids, assume_unique=True)
        stale = np.setdiff1d(index_ids, db_ids, assume_unique=True)
        if len(stale):
            index.remove(stale)
            self.unsaved += len(stale)
        added = self._add_stored(store, space, missing)
        if position is None:
            self._synced.pop(space, None)  # a version-1 database: every sync lists every id
        else:
            self._synced[space] = (int(db_ids[-1]) if len(db_ids) else 0, position)
        return added, int(len(stale))

    def save(self, generation: int) -> None:
        """Save both indexes (atomically, by the core) and then the manifest naming `generation`."""
        for space, index in self.indexes.items():
            index.save(self.path(space))  # os.PathLike: a directory name that is not UTF-8 works too
        self.write_manifest(generation)
        self.unsaved = 0

    def write_manifest(self, generation: int) -> None:
        """Record that the index files hold the indexes of database `generation` (call only when they do)."""
        write_json_atomic(
            self.directory / MANIFEST,
            {
                "manifest_version": MANIFEST_VERSION,
                "generation": generation,
                "kind": self.kind,
                "spaces": {
                    s: {"file": self.path(s).name, "size": len(ix), "dim": self.index_dims[s], "ids": ids_digest(ix)}
                    for s, ix in self.indexes.items()
                },
            },
        )

    def _read_manifest(self) -> dict[str, Any]:
        """The manifest, or {} when it is missing, unreadable or not of the shape `write_manifest`
        writes (then every index is verified against the database)."""
        path = self.directory / MANIFEST
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("manifest %s is unreadable (%s); verifying indexes against the database", path, exc)
            return {}
        spaces = data.get("spaces") if isinstance(data, dict) else None
        if (not isinstance(spaces, dict) or not all(isinstance(e, dict) for e in spaces.values())
                or not isinstance(data.get("generation"), int)):
            log.warning("manifest %s is not a kira manifest; verifying indexes against the database", path)
            return {}
        manifest: dict[str, Any] = data
        return manifest

    def reproject_visual(self, store: Store, transform: Callable[[np.ndarray], np.ndarray] | None, dim: int) -> None:
        """Rebuild the visual index from the raw vectors through a new transform (adapter change)."""
        self.transform = transform
        self.index_dims["visual"] = dim
        self.indexes["visual"] = make_index(self.kind, dim)
        for ids, raw in store.iter_vectors("visual", self.dims["visual"]):
            self.add("visual", ids, raw)
