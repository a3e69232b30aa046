"""`Service`: one process's readers, its writer (local, remote or none) and its metrics."""

from __future__ import annotations

import logging
import os
from typing import Any

from kira.serve.config import ServeConfig
from kira.serve.metrics import Metrics
from kira.serve.pool import ThreadPool

log = logging.getLogger(__name__)


class Service:
    """What the routes use: `readers` (a ThreadPool of `Reader`s), `writer` (a ThreadPool of one `Writer`,
    or None), `remote` (a `RemoteWriter`, or None) and `metrics`.

    `start` loads the model stack once for the process and opens every thread's view;
    `stop` drains the queues and closes them (the writer commits what is pending).
    """

    def __init__(self, config: ServeConfig, models: Any = None) -> None:
        self.config = config
        self.metrics = Metrics()
        self.models = models
        self.readers: ThreadPool | None = None
        self.writer: ThreadPool | None = None
        self.remote: Any = None
        self.started = False
        self.pid = os.getpid()
        self._lock: Any = None

    @property
    def writable(self) -> bool:
        return not self.config.read_only

    def start(self) -> None:
        """Load the models, open the readers (and the writer); raises what opening raised."""
        from kira.serve.readers import Reader, load_models
        from kira.serve.writer import RemoteWriter, Writer

        cfg = self.config
        self.pid = os.getpid()
        if self.models is None:
            self.models = load_models(cfg.models, cfg.model_threads, cfg.kb_path)
        models = self.models
        if cfg.role in ("all", "writer") and self.writable:
            # the writer first: it holds the lock, so a second writable server fails here, not later
            self.writer = ThreadPool("writer", 1, cfg.queue_size, open=lambda: Writer(cfg.kb_path, models),
                                     close=lambda w: w.close(), queue_timeout_s=cfg.queue_timeout_s)
            self.writer.start()
        if cfg.role == "reader" and self.writable:
            assert cfg.writer_uds is not None
            self.remote = RemoteWriter(cfg.writer_uds)
        if cfg.role in ("all", "reader"):
            self.readers = ThreadPool("reader", cfg.threads, cfg.queue_size,
                                      open=lambda: Reader(cfg.kb_path, models), close=lambda r: r.close(),
                                      idle=lambda r: r.warm(), idle_s=cfg.refresh_s,
                                      queue_timeout_s=cfg.queue_timeout_s)
            self.readers.start()
        self.started = True
        log.info("kira serve: %s ready (pid %d, %s, %d reader thread(s))", cfg.kb_path, self.pid,
                 "read-only" if cfg.read_only else "writable", cfg.threads if self.readers else 0)

    async def ensure_started(self) -> None:
        """Start now, once, off the event loop (for an app whose lifespan never ran)."""
        import asyncio

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.started:
                try:
                    await asyncio.to_thread(self.start)
                except Exception as exc:
                    from kira.serve.errors import ApiError

                    raise ApiError(503, "not_started", f"the service could not open the knowledge base: {exc}",
                                   "fix what the message says and restart the app") from None

    def stop(self) -> None:
        """Drain and close (called after the server stopped taking requests)."""
        for pool in (self.readers, self.writer):
            if pool is not None:
                pool.stop()
        self.started = False

    def generation(self) -> tuple[int | None, int | None]:
        """(generation, documents) the readers saw last (the newest of them)."""
        if self.readers is None:
            return None, None
        states = [s for s in self.readers.states if s is not None]
        if not states:
            return None, None
        best = max(states, key=lambda s: s.generation or -1)
        return best.generation, best.documents

    async def writer_pid(self) -> int | None:
        """The process id of the writer: this process when it writes itself, the writer process's when it
        answers on its socket, else None (read-only, or the writer is down)."""
        if self.remote is not None:
            return await self.remote.pid()
        if self.writer is not None and self.writer.ready:
            return self.pid
        return None

    def is_ready(self) -> tuple[bool, str]:
        if not self.started:
            return False, "starting: opening the knowledge base"
        for name, pool in (("reader", self.readers), ("writer", self.writer)):
            if pool is not None and pool.ready < pool.threads:
                return False, f"{pool.threads - pool.ready} {name} thread(s) are not running"
        return True, "ready"
