"""Fitted views of a Milvus knowledge base, stored with it at commit: a reader loads, never refits.

The text->image bridge (`kira.models.bridge.TextToImageBridge`) is fitted by the writer at `commit`
(kira.knowledge_base.adaptation, the embedded rule: refitted once the captioned documents moved by
more than 5%) and stored in the knowledge base's records collection: the ``.npz`` bytes
`TextToImageBridge.save` writes, base64, cut into ``view:bridge:<fit>:<i>`` rows (a value holds at
most 64 KB), then ``setting:bridge`` = {"fit", "parts", "fitted_on", "bytes", "generation"} written
last, then the previous fit's rows deleted: a reader reads the fit the setting names, the old one or
the new one, never a mix (one that finds its fit's rows just deleted reads the setting again). At a
commit that keeps the bridge the writer only moves "generation" on (`confirm_bridge`); with fewer
than 2 captioned documents it stores that there is none. A reader at that generation loads the
rows (a few, whatever the collection's size) and counts nothing.
"""

from __future__ import annotations

import base64
import json
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

log = logging.getLogger(__name__)

PART_CHARS = 60_000  # base64 characters per ``view:bridge:<i>`` row (under the records' 65,535-byte values)
BRIDGE_SETTING = "setting:bridge"
BRIDGE_PART = "view:bridge:"


def bridge_bytes(bridge: Any) -> bytes:
    """A fitted bridge as the bytes `TextToImageBridge.save` writes (.npz, no pickle)."""
    with tempfile.TemporaryDirectory(prefix="kira-bridge-") as tmp:
        path = Path(tmp) / "bridge.npz"
        bridge.save(path)
        return path.read_bytes()


def bridge_from_bytes(data: bytes) -> Any:
    """The bridge `bridge_bytes` wrote. Raises ValueError for bytes that are not one."""
    from kira.models.bridge import TextToImageBridge

    with tempfile.TemporaryDirectory(prefix="kira-bridge-") as tmp:
        path = Path(tmp) / "bridge.npz"
        path.write_bytes(data)
        try:
            return TextToImageBridge.load(path)
        except Exception as exc:  # noqa: BLE001 - numpy raises several kinds for a damaged archive
            raise ValueError(f"the stored bridge is not a readable kira bridge ({exc}); commit again to refit it") from None


def stored_bridge_info(records: Any) -> dict[str, Any] | None:
    """{"fit", "parts", "fitted_on", "bytes"} of the stored bridge ("parts" 0: none fitted), or None where
    nothing is stored (a knowledge base written before kira stored its bridge)."""
    value = records.get_one(BRIDGE_SETTING)
    return json.loads(value) if value else None


def store_bridge(records: Any, bridge: Any, fitted_on: int, generation: int) -> dict[str, Any]:
    """Write `bridge` (fitted on `fitted_on` captioned documents) to the records (module docstring): the new
    fit's parts, then the setting that names them, then the previous fit's parts are deleted."""
    import uuid

    text = base64.b64encode(bridge_bytes(bridge)).decode("ascii")
    parts = [text[i:i + PART_CHARS] for i in range(0, len(text), PART_CHARS)] or [""]
    before = stored_bridge_info(records)
    fit = uuid.uuid4().hex[:12]
    records.put({f"{BRIDGE_PART}{fit}:{i}": part for i, part in enumerate(parts)})
    info = {"fit": fit, "parts": len(parts), "fitted_on": int(fitted_on), "bytes": len(text),
            "generation": int(generation)}
    records.put({BRIDGE_SETTING: json.dumps(info)})
    if before and before.get("parts"):
        records.delete([f"{BRIDGE_PART}{before['fit']}:{i}" for i in range(int(before["parts"]))])
    return info


def store_no_bridge(records: Any, captioned: int, generation: int) -> dict[str, Any]:
    """Record that no bridge is fitted (fewer than 2 captioned documents), so readers do not fit one."""
    before = stored_bridge_info(records)
    info = {"fit": "", "parts": 0, "fitted_on": int(captioned), "bytes": 0, "generation": int(generation)}
    records.put({BRIDGE_SETTING: json.dumps(info)})
    if before and before.get("parts"):
        records.delete([f"{BRIDGE_PART}{before['fit']}:{i}" for i in range(int(before["parts"]))])
    return info


def load_bridge(records: Any) -> Any:
    """The stored bridge, or None where none is stored (or none was fitted). Raises ValueError for damaged rows
    (naming the fix)."""
    for attempt in range(2):
        info = stored_bridge_info(records)
        if not info or not int(info.get("parts", 0)):
            return None
        keys = [f"{BRIDGE_PART}{info['fit']}:{i}" for i in range(int(info["parts"]))]
        found = records.get(keys)
        missing = [k for k in keys if k not in found]
        text = "".join(found.get(k, "") for k in keys)
        if not missing and len(text) == int(info["bytes"]):
            return bridge_from_bytes(base64.b64decode(text))
        if attempt == 0 and stored_bridge_info(records) != info:
            continue  # a writer stored a new fit while this read the old one: read the new one
        raise ValueError(f"the stored bridge is incomplete ({len(missing)} of {len(keys)} parts missing); commit "
                         "the knowledge base again from a writer to refit it")
    return None


def confirm_bridge(records: Any, captioned: int, generation: int) -> dict[str, Any]:
    """Record that at `generation` the stored bridge still holds; with fewer than 2 `captioned` documents,
    that there is none (its parts deleted)."""
    info = stored_bridge_info(records)
    if captioned < 2 or not info or not info.get("parts"):
        return store_no_bridge(records, captioned, generation)
    info = {**info, "generation": int(generation)}
    records.put({BRIDGE_SETTING: json.dumps(info)})
    return info



class StoredBridge:
    """The bridge methods of `kira.knowledge_base.milvus.storage.MilvusStorage` (KeepsBridge, KnowsBridgeCurrent:
    kira.knowledge_base.storage), over its ``records``; storing checks the writer lease first."""

    records: Any
    generation: Callable[[], int]
    _keep_lease: Callable[[], None]
    if TYPE_CHECKING:
        @property
        def where(self) -> str: ...

    def bridge_fitted_on(self) -> int:
        info = stored_bridge_info(self.records)
        return int(info["fitted_on"]) if info and info.get("parts") else 0

    def load_bridge(self) -> Any:
        try:
            return load_bridge(self.records)
        except ValueError as exc:
            log.warning("%s: %s; refitting it", self.where, exc)
            return None

    def save_bridge(self, bridge: Any, fitted_on: int) -> None:
        self._keep_lease()
        store_bridge(self.records, bridge, fitted_on, self.generation())

    def bridge_current(self) -> bool:
        info = stored_bridge_info(self.records)
        if not info:
            return False
        return int(info.get("generation", -1)) == self.generation()

    def confirm_bridge(self, captioned: int) -> None:
        self._keep_lease()
        confirm_bridge(self.records, captioned, self.generation())


__all__ = ["StoredBridge", "confirm_bridge", "load_bridge", "store_bridge", "store_no_bridge", "stored_bridge_info"]
