"""Where an ingest's CPU goes: each stage's own CPU time per image, inside a real `KnowledgeBase.ingest`.

Used by ``python -m benchmarks.suites.ingest_throughput --stages``. The model stack runs with one onnxruntime thread per
session, so a stage's CPU is the CPU of the thread that runs it (`time.thread_time`): the reader thread
decodes, the main thread plans, describes, computes image vectors and stores, the text thread encodes the
descriptions. Each stage's time is its own, without the stages it calls (a per-thread stack of timers).
Stages are wrapped where the ingest looks them up (module attributes), so the ingest itself is unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import defaultdict
from typing import Any, Callable, Iterator

STAGES = (  # (module, attribute, stage name); a class attribute is "Class.method"
    ("kira.knowledge_base.ingest", "file_digest", "file digest"),
    ("kira.knowledge_base.ingest", "load_image", "decode"),
    ("kira.knowledge_base.writing", "thumbnail_png", "thumbnails"),
    ("kira.models.cnn.encoder", "CnnImageEncoder.forward", "CNN forward pass (batched)"),
    ("kira.knowledge_base.batch_encode", "plan_image", "region proposal + chunk plan"),
    ("kira.knowledge_base.batch_encode", "describe", "descriptions (tagger + captioner)"),
    ("kira.knowledge_base.batch_encode", "_visual_vectors", "chunk image vectors + tags"),
    ("kira.knowledge_base.batch_encode", "encode_texts", "text vectors (chunk texts and pieces)"),
    ("kira.knowledge_base.writing", "item_pieces", "text pieces: which"),
    ("kira.knowledge_base.writing", "encode_pieces", "text pieces: gathered"),
    ("kira.knowledge_base.embedded.storage", "EmbeddedStorage.write", "store rows (SQLite, index add)"),
    ("kira.knowledge_base.kb", "KnowledgeBase.commit_database", "commit per batch"),
    ("kira.knowledge_base.kb", "KnowledgeBase.commit", "final commit (index files)"),
)


class StageClock:
    """Per stage: own CPU seconds (thread CPU, children excluded) and calls."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._local = threading.local()
        self._lock = threading.Lock()

    def wrap(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = getattr(self._local, "stack", None)
            if stack is None:
                stack = self._local.stack = []
            stack.append(0.0)  # CPU of the children, subtracted from this stage's own
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                total = time.thread_time() - start
                children = stack.pop()
                if stack:
                    stack[-1] += total
                with self._lock:
                    self.cpu[name] += total - children
                    self.calls[name] += 1
        return timed


@contextlib.contextmanager
def timed_stages(clock: StageClock) -> Iterator[None]:
    """Every stage of `STAGES` wrapped with `clock` while inside."""
    import importlib

    undo = []
    for module_name, attribute, name in STAGES:
        owner: Any = importlib.import_module(module_name)
        *path, leaf = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        if not hasattr(owner, leaf):  # a stage this version of kira does not have
            continue
        original = owner.__dict__[leaf] if isinstance(owner, type) else getattr(owner, leaf)
        setattr(owner, leaf, clock.wrap(name, original))
        undo.append((owner, leaf, original))
    try:
        yield
    finally:
        for owner, leaf, original in reversed(undo):
            setattr(owner, leaf, original)


def stage_table(clock: StageClock, images: int, process_cpu: float, encoder_cpu: float) -> str:
    """A markdown table: each stage's CPU-ms per image and share, the rest of the process, the encoder alone."""
    lines = ["| stage | CPU-ms / image | share |", "| --- | ---: | ---: |"]
    for _, _, name in STAGES:
        if clock.calls.get(name):
            lines.append(f"| {name} | {1000 * clock.cpu[name] / images:.1f} | {clock.cpu[name] / process_cpu:.0%} |")
    rest = process_cpu - sum(clock.cpu.values())
    lines.append(f"| everything else (Python glue, other threads) | {1000 * rest / images:.1f} | "
                 f"{rest / process_cpu:.0%} |")
    lines.append(f"| **ingest, all threads** | **{1000 * process_cpu / images:.1f}** | 100% |")
    lines.append(f"| image encoder alone (same stack) | {1000 * encoder_cpu / images:.1f} | |")
    return "\n".join(lines)
