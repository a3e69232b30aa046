"""kira.serve.pool.ThreadPool: thread-bound state, bounded admission, queue timeout, idle refresh, draining."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kira.serve.pool import Overloaded, ThreadPool


class State:
    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.idle = 0
        self.closed = False


def _pool(**kw) -> tuple[ThreadPool, list[State]]:
    states: list[State] = []

    def opened() -> State:
        states.append(State())
        return states[-1]

    pool = ThreadPool("test", kw.pop("threads", 1), kw.pop("queue_size", 0), open=opened,
                      close=lambda s: setattr(s, "closed", True), **kw)
    pool.start()
    return pool, states


def test_jobs_run_on_the_thread_that_opened_the_state_and_errors_come_back():
    pool, states = _pool(threads=2, queue_size=4)

    async def main():
        seen = await asyncio.gather(*(pool.submit(lambda s: (s.thread, threading.get_ident())) for _ in range(6)))
        assert all(owner == runner for owner, runner in seen)
        with pytest.raises(KeyError, match="boom"):
            await pool.submit(lambda s: {}["boom"])
        assert await pool.submit(lambda s, a, b: a + b, 2, 3) == 5

    try:
        asyncio.run(main())
        assert len({s.thread for s in states}) == 2 and pool.ready == 2
    finally:
        pool.stop()
    assert all(s.closed for s in states) and pool.ready == 0


def test_admission_is_bounded_by_threads_plus_queue():
    pool, _ = _pool(threads=1, queue_size=1)
    release = threading.Event()

    async def main():
        running = asyncio.ensure_future(pool.submit(lambda s: release.wait(5)))
        queued = asyncio.ensure_future(pool.submit(lambda s: "queued"))
        await asyncio.sleep(0.05)
        assert pool.admitted == 2
        with pytest.raises(Overloaded) as refused:
            await pool.submit(lambda s: "third")
        assert refused.value.retry_after >= 1
        release.set()
        assert await running is True and await queued == "queued"
        assert pool.admitted == 0

    try:
        asyncio.run(main())
    finally:
        release.set()
        pool.stop()


def test_a_job_that_waited_past_the_queue_timeout_is_refused_not_run():
    pool, _ = _pool(threads=1, queue_size=2, queue_timeout_s=0.05)
    ran: list[str] = []

    async def main():
        slow = asyncio.ensure_future(pool.submit(lambda s: time.sleep(0.2)))
        await asyncio.sleep(0.01)
        with pytest.raises(Overloaded, match="waited"):
            await pool.submit(lambda s: ran.append("late"))
        await slow

    try:
        asyncio.run(main())
    finally:
        pool.stop()
    assert ran == []


def test_idle_threads_run_the_idle_callback_and_an_open_error_is_raised_by_start():
    pool, states = _pool(idle=lambda s: setattr(s, "idle", s.idle + 1), idle_s=0.02)
    try:
        deadline = time.monotonic() + 5
        while states[0].idle < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert states[0].idle >= 2
    finally:
        pool.stop()

    def broken():
        raise ValueError("cannot open the knowledge base")

    failing = ThreadPool("broken", 1, 0, open=broken)
    with pytest.raises(ValueError, match="cannot open"):
        failing.start()


def test_the_service_caps_blas_threads_so_small_products_do_not_wait_for_busy_cores():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from kira.serve.readers import limit_blas_threads

    blas = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    if not blas:  # pragma: no cover - numpy always links a BLAS here
        pytest.skip("numpy reports no BLAS")
    with threadpoolctl.threadpool_limits(limits=None):  # restores the process's limits afterwards
        assert limit_blas_threads(None) is False
        assert limit_blas_threads(1) is True
        assert {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"} == {1}
