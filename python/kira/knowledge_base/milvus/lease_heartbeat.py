"""The writer lease's heartbeat: a daemon thread that renews an idle writer's lease (kira.knowledge_base.milvus.lease).

A writer renews its lease as it writes and commits; one that is open and idle (a `kira serve` writer
between jobs) renews it here, every `LEASE_RENEW_S`, so no other writer takes it for dead. Each beat
is `WriterLease.beat`: under the lease's lock it reads the lease row and rewrites its heartbeat only
where this writer still holds it; where another writer took it over, the beat records the loss (the
writer's next write or commit raises `WriterLeaseLost`) and the thread ends, so a lost lease is never
renewed. A store that does not answer is logged and tried again at the next beat.

The thread is a daemon (it never keeps the process alive), holds its writer only weakly (a writer
dropped without being closed stops beating, and its lease goes stale as before), and `stop` ends it
before the lease is released or the client closed. It shares the writer's pymilvus client: a
MilvusClient's calls go through one gRPC channel, which gRPC makes safe to use from several threads
(pymilvus's ConnectionManager and handler guard their own state with locks), and the lease's lock
keeps the beat and the writer's own lease checks from interleaving.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

log = logging.getLogger(__name__)

STOP_WAIT_S = 60.0
"""How long `stop` waits for a beat in flight (one store call, which the client's timeout bounds)."""


class LeaseHeartbeat:
    """Calls `lease.beat()` every `interval_s` seconds in a daemon thread until `stop`, the lease is lost, or the
    lease object is gone (module docstring)."""

    def __init__(self, lease: Any, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"a lease heartbeat interval must be positive, not {interval_s!r}")
        self.interval_s = float(interval_s)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=_beat, args=(weakref.ref(lease), self._stop, self.interval_s),
                                       name=f"kira lease heartbeat {lease.where}", daemon=True)
        self.thread.start()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> None:
        """End the thread, waiting for a beat in flight (never from the thread itself). Safe to call twice."""
        self._stop.set()
        if self.thread is not threading.current_thread():
            self.thread.join(STOP_WAIT_S)
            if self.thread.is_alive():
                log.warning("%s did not stop within %.0f s (a store call that does not return); it is a daemon "
                            "thread and stops with the process", self.thread.name, STOP_WAIT_S)


def _beat(lease_ref: "weakref.ref[Any]", stop: threading.Event, interval_s: float) -> None:
    while not stop.wait(interval_s):
        lease = lease_ref()
        if lease is None:
            return  # its writer was dropped without being closed: its lease goes stale
        try:
            keep_going = lease.beat()
        except Exception as exc:  # noqa: BLE001 - the store did not answer: the writer's own next write says so
            log.warning("%s: could not renew the writer lease (%s); trying again in %.0f s", lease.where, exc,
                        interval_s)
            keep_going = True
        del lease
        if not keep_going:
            return


__all__ = ["LeaseHeartbeat", "STOP_WAIT_S"]
