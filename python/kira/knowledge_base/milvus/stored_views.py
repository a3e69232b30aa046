"""Fitted views of a Milvus knowledge base, stored with it at commit: a reader loads, never refits.

The text->image bridge (`kira.models.bridge.TextToImageBridge`) is fitted by the writer at `commit`
on the captioned documents' vectors and stored in the knowledge base's records collection: the
``.npz`` bytes `TextToImageBridge.save` writes, base64, cut into ``view:bridge:<i>`` rows (one value
holds at most `MAX_VALUE` bytes), then ``setting:bridge`` = {"parts", "fitted_on", "bytes"} written
last, so a reader sees the old bridge or the new one, never a mix of parts it has not been told of.
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


def stored_bridge_info(records: Any) -> dict[str, int] | None:
    """{"parts", "fitted_on", "bytes"} of the stored bridge, or None where none is stored."""
    value = records.get_one(BRIDGE_SETTING)
    return json.loads(value) if value else None


def store_bridge(records: Any, bridge: Any, fitted_on: int) -> dict[str, int]:
    """Write `bridge` (fitted on `fitted_on` captioned documents) to the records (module docstring): parts
    first, then the setting that names them, then the parts an older, longer bridge left are deleted."""
    text = base64.b64encode(bridge_bytes(bridge)).decode("ascii")
    parts = [text[i:i + PART_CHARS] for i in range(0, len(text), PART_CHARS)] or [""]
    before = stored_bridge_info(records)
    records.put({f"{BRIDGE_PART}{i}": part for i, part in enumerate(parts)})
    info = {"parts": len(parts), "fitted_on": int(fitted_on), "bytes": len(text)}
    records.put({BRIDGE_SETTING: json.dumps(info)})
    if before and int(before.get("parts", 0)) > len(parts):
        records.delete([f"{BRIDGE_PART}{i}" for i in range(len(parts), int(before["parts"]))])
    return info


def load_bridge(records: Any) -> Any:
    """The stored bridge, or None where none is stored. Raises ValueError for damaged rows (naming the fix)."""
    info = stored_bridge_info(records)
    if not info:
        return None
    keys = [f"{BRIDGE_PART}{i}" for i in range(int(info["parts"]))]
    found = records.get(keys)
    missing = [k for k in keys if k not in found]
    text = "".join(found.get(k, "") for k in keys)
    if missing or len(text) != int(info["bytes"]):
        raise ValueError(f"the stored bridge is incomplete ({len(missing)} of {len(keys)} parts missing); commit "
                         "the knowledge base again from a writer to refit it")
    return bridge_from_bytes(base64.b64decode(text))


def refit_due(fitted_on: int | None, captioned: int) -> bool:
    """Whether a bridge fitted on `fitted_on` captioned documents (None: none stored) must be refitted now
    that there are `captioned`: at least 2 of them, and none stored or a move past `BRIDGE_REFIT_SHARE`."""
    if captioned < 2:
        return False
    return fitted_on is None or fitted_on < 2 or abs(captioned - fitted_on) > BRIDGE_REFIT_SHARE * fitted_on


def refresh_bridge(kb: Any) -> dict[str, int] | None:
    """At a writer's commit: fit the bridge on the captioned documents' stored vectors and store it, where
    `refit_due` says so; returns the stored bridge's info (None: none needed, fewer than 2 captioned)."""
    from kira.models.bridge import TextToImageBridge

    ids = kb.store.captioned_document_ids()
    info = stored_bridge_info(kb._records)
    if not refit_due(int(info["fitted_on"]) if info else None, len(ids)):
        return info
    bridge = TextToImageBridge()
    bridge.fit(kb.index("text").get_vectors(ids), kb.index("visual").get_vectors(ids))
    info = store_bridge(kb._records, bridge, len(ids))
    log.info("%s: stored the text->image bridge fitted on %d captioned documents", kb.name, len(ids))
    return info


__all__ = ["load_bridge", "refit_due", "refresh_bridge", "store_bridge", "stored_bridge_info"]
