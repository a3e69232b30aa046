"""Fitted views of a Milvus knowledge base, stored with it at commit: a reader loads, never refits.

The text->image bridge (`kira.models.bridge.TextToImageBridge`) is fitted by the writer at `commit`
on the captioned documents' vectors and stored in the knowledge base's records collection: the
``.npz`` bytes `TextToImageBridge.save` writes, base64, cut into ``view:bridge:<fit>:<i>`` rows (a
value holds at most 64 KB), then ``setting:bridge`` = {"fit", "parts", "fitted_on", "bytes"} written
last, then the previous fit's rows deleted: a reader reads the fit the setting names, the old one or
the new one, never a mix (one that finds its fit's rows just deleted reads the setting again).
It is refitted when the number of captioned documents has moved by more than
`BRIDGE_REFIT_SHARE` of the number it was fitted on (the embedded knowledge base's rule). Any
process on any machine opens the knowledge base and reads the bridge: a few rows, whatever the
collection's size.
"""

from __future__ import annotations

import base64
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from kira.knowledge_base.kb_adaptation import BRIDGE_REFIT_SHARE

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


def store_bridge(records: Any, bridge: Any, fitted_on: int) -> dict[str, Any]:
    """Write `bridge` (fitted on `fitted_on` captioned documents) to the records (module docstring): the new
    fit's parts, then the setting that names them, then the previous fit's parts are deleted."""
    import uuid

    text = base64.b64encode(bridge_bytes(bridge)).decode("ascii")
    parts = [text[i:i + PART_CHARS] for i in range(0, len(text), PART_CHARS)] or [""]
    before = stored_bridge_info(records)
    fit = uuid.uuid4().hex[:12]
    records.put({f"{BRIDGE_PART}{fit}:{i}": part for i, part in enumerate(parts)})
    info = {"fit": fit, "parts": len(parts), "fitted_on": int(fitted_on), "bytes": len(text)}
    records.put({BRIDGE_SETTING: json.dumps(info)})
    if before and before.get("parts"):
        records.delete([f"{BRIDGE_PART}{before['fit']}:{i}" for i in range(int(before["parts"]))])
    return info


def store_no_bridge(records: Any, captioned: int) -> dict[str, Any]:
    """Record that no bridge is fitted (fewer than 2 captioned documents), so readers do not fit one."""
    before = stored_bridge_info(records)
    info = {"fit": "", "parts": 0, "fitted_on": int(captioned), "bytes": 0}
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


def refit_due(fitted_on: int | None, captioned: int) -> bool:
    """Whether a bridge fitted on `fitted_on` captioned documents (None: none stored) must be refitted now
    that there are `captioned`: at least 2 of them, and none stored or a move past `BRIDGE_REFIT_SHARE`."""
    if captioned < 2:
        return False
    return fitted_on is None or fitted_on < 2 or abs(captioned - fitted_on) > BRIDGE_REFIT_SHARE * fitted_on


def refresh_bridge(kb: Any) -> dict[str, Any]:
    """At a writer's commit: fit the bridge on the captioned documents' stored vectors and store it, where
    `refit_due` says so (with fewer than 2 captioned documents, store that there is none); returns the
    stored info."""
    from kira.models.bridge import TextToImageBridge

    ids = kb.store.captioned_document_ids()
    info = stored_bridge_info(kb._records)
    if len(ids) < 2:
        return info if info and not info.get("parts") else store_no_bridge(kb._records, len(ids))
    if not refit_due(int(info["fitted_on"]) if info and info.get("parts") else None, len(ids)):
        return info
    bridge = TextToImageBridge()
    bridge.fit(kb.index("text").get_vectors(ids), kb.index("visual").get_vectors(ids))
    info = store_bridge(kb._records, bridge, len(ids))
    log.info("%s: stored the text->image bridge fitted on %d captioned documents", kb.name, len(ids))
    return info


__all__ = ["load_bridge", "refit_due", "refresh_bridge", "store_bridge", "store_no_bridge", "stored_bridge_info"]
