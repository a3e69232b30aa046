"""`ThreadPool`: a fixed set of threads, each owning state opened on that thread, behind a bounded queue.

A knowledge base (its SQLite connection) belongs to the thread that opened it, so each
thread opens its own and runs every job it takes against it. Asks are CPU-bound and hold
the GIL for most of their time: they run here, never on the event loop, and at most
`threads + queue_size` are admitted at once; the next one is refused with `Overloaded`
(503 + Retry-After) instead of piling up.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger(__name__)


class Overloaded(Exception):
    """The queue is full (or a job waited past the queue timeout); `retry_after` is a hint in seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class _Job:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    queued_at: float
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards `started` / `given_up`
    started: bool = False  # a thread took it: it runs to the end
    given_up: bool = False  # it waited past the queue timeout and was refused: never run


def _deliver(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():  # the client went away and the request was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class ThreadPool:
    """`threads` threads; each calls ``open()`` once on itself, then ``fn(state, *args)`` per job.

    Parameters
    ----------
    name: thread name prefix (logs). open: makes one thread's state (a knowledge base view).
    close: releases it on shutdown. idle: called with the state after `idle_s` with no job
    (readers refresh there). queue_size: jobs that may wait beyond the running ones.
    queue_timeout_s: a job that waited longer is refused instead of run.

    Thread safety: `submit` is called from the event loop thread only.
    """

    def __init__(self, name: str, threads: int, queue_size: int, open: Callable[[], Any],
                 close: Callable[[Any], None] = lambda state: None, idle: Callable[[Any], None] | None = None,
                 idle_s: float = 1.0, queue_timeout_s: float = 30.0) -> None:
        self.name = name
        self.threads = threads
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._capacity = threads + queue_size
        self._admitted = 0
        self._open, self._close, self._idle = open, close, idle
        self._idle_s = idle_s
        self._queue_timeout_s = queue_timeout_s
        self._workers: list[threading.Thread] = []
        self._opened = threading.Semaphore(0)
        self.error: BaseException | None = None
        self.ready = 0  # threads whose state is open
        self.states: list[Any] = []  # each thread's state, for reading cached facts (Reader.generation)
        self._service_s = 0.05  # moving average of a job's run time (Retry-After hint)

    @property
    def admitted(self) -> int:
        """Jobs running or waiting."""
        return self._admitted

    def start(self, timeout: float = 300.0) -> None:
        """Start the threads and wait until each has opened its state; re-raise the first open error."""
        for i in range(self.threads):
            t = threading.Thread(target=self._run, name=f"kira-{self.name}-{i}", daemon=True)
            t.start()
            self._workers.append(t)
        for _ in range(self.threads):
            if not self._opened.acquire(timeout=timeout):
                raise TimeoutError(f"{self.name} threads did not open within {timeout} s")
        if self.error is not None:
            raise self.error

    def retry_after(self) -> int:
        """Seconds after which the queue has likely drained, at least 1."""
        return max(1, int(self._service_s * max(self._admitted, 1) / self.threads + 0.999))

    async def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(state, *args)`` on a pool thread and return its result (or raise its error).

        Raises Overloaded when `threads + queue_size` jobs are already admitted, or when the job waited
        `queue_timeout_s` without a thread taking it (then, at that moment: the client is not kept waiting
        behind a long job, and the job never runs).
        """
        if self._admitted >= self._capacity:
            raise Overloaded(f"{self._admitted} requests are running or queued, the most this server admits",
                             self.retry_after())
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._admitted += 1
        job = _Job(fn, args, loop, future, time.perf_counter())
        try:
            self._queue.put(job)
            try:
                return await asyncio.wait_for(asyncio.shield(future), self._queue_timeout_s)
            except asyncio.TimeoutError:
                with job.lock:
                    job.given_up = not job.started
                if job.given_up:
                    raise Overloaded(f"the request waited {self._queue_timeout_s:.0f} s for a free thread",
                                     self.retry_after()) from None
                return await future  # it started in time: it runs to the end
            except asyncio.CancelledError:
                future.cancel()  # the client went away: a job still queued is skipped
                raise
        finally:
            self._admitted -= 1

    def stop(self) -> None:
        """Let the threads finish every queued job, then close their states and join them."""
        for _ in self._workers:
            self._queue.put(None)
        for t in self._workers:
            t.join(timeout=60)
        self._workers.clear()

    def _run(self) -> None:
        try:
            state = self._open()
        except BaseException as exc:  # reported by start()
            log.exception("%s: could not open", self.name)
            self.error = exc
            self._opened.release()
            return
        self.ready += 1
        self.states.append(state)
        self._opened.release()
        try:
            while True:
                try:
                    job = self._queue.get(timeout=self._idle_s)
                except queue.Empty:
                    if self._idle is not None:
                        try:
                            self._idle(state)
                        except Exception:  # an idle refresh must never kill the thread
                            log.exception("%s: idle refresh failed", self.name)
                    continue
                if job is None:
                    return
                self._execute(state, job)
        finally:
            self.ready -= 1
            try:
                self._close(state)
            except Exception:
                log.exception("%s: close failed", self.name)

    def _execute(self, state: Any, job: _Job) -> None:
        start = time.perf_counter()
        with job.lock:
            if job.given_up or job.future.done():
                return  # refused after the queue timeout, or cancelled while queued: the client is gone
            job.started = True
        if start - job.queued_at > self._queue_timeout_s:
            error: BaseException | None = Overloaded(
                f"the request waited {start - job.queued_at:.1f} s for a free thread", self.retry_after())
            job.loop.call_soon_threadsafe(_deliver, job.future, None, error)
            return
        value, error = None, None
        try:
            value = job.fn(state, *job.args)
        except BaseException as exc:
            error = exc
        self._service_s = 0.9 * self._service_s + 0.1 * (time.perf_counter() - start)
        try:
            job.loop.call_soon_threadsafe(_deliver, job.future, value, error)
        except RuntimeError:  # the loop closed meanwhile
            pass
