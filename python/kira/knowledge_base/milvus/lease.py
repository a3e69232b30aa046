"""One writer at a time on a Milvus knowledge base, whichever machine it runs on: a lease row in ``<name>__kb``.

The embedded backend refuses a second writer with a file lock (``writer.lock``). Processes on other
machines share a Milvus knowledge base through its uri alone, so its lock lives in Milvus: the row
``lease:writer`` of ``<name>__kb`` names the writer that holds it (host, pid, a random token, since
when) and its heartbeat (when it last wrote).

* Opening for writing (or creating) takes the lease; closing releases it. Read-only opens never look at it.
* A second writer, in any process on any machine, is refused at open with `WriterLeaseHeld` (a
  ValueError, as the embedded backend's refusal is) naming the holder and what to do.
* A lease is taken over, with a warning in the log, where its heartbeat is older than
  `LEASE_TIMEOUT_S` (its writer is taken for dead: the machines' clocks must agree to well within
  it), where its writer ran on this machine and its process is gone, where it was left by a writer of
  this process that was never closed, or on a Milvus Lite file (one process at a time can open one,
  so whoever held it is gone).
* The writer checks the lease before every write and every commit, and renews its heartbeat at
  commit and at most every `LEASE_RENEW_S` as it writes. A writer whose lease was taken over raises
  `WriterLeaseLost` (a ConnectionError: an ingest stops instead of retrying image by image) and
  writes and commits nothing more, rather than interleave with the new writer.

A writer idle for longer than `LEASE_TIMEOUT_S` keeps its lease until someone takes it over; it then
gets `WriterLeaseLost` at its next write. Milvus has no compare-and-set: two writers taking over the
same stale lease in the same instant can both believe they hold it until the loser's next check (its
next batch or commit). A kira older than the lease does not look at the row.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)

LEASE_KEY = "lease:writer"
LEASE_TIMEOUT_S = 600.0
"""Seconds without a heartbeat after which a writer is taken for dead and its lease may be taken over (longer
than any one batch of an ingest takes to encode, so a live writer renews well within it)."""
LEASE_RENEW_S = 30.0
"""A writer rewrites its heartbeat at most this often as it writes (and at every commit); it checks the lease
before every write."""

_LIVE: set[str] = set()  # tokens of the leases writers of this process hold (a reopen here is a second writer)
_LIVE_LOCK = threading.Lock()


class WriterLeaseHeld(ValueError):
    """Another writer holds the knowledge base open for writing (the message names it and what to do)."""


class WriterLeaseLost(ConnectionError):
    """This writer's lease was taken over by another writer: it writes and commits nothing more."""


@functools.lru_cache(maxsize=1)
def this_machine() -> str:
    """What tells this machine's processes apart from another's with the same host name: the kernel's boot id
    and this process's pid namespace (a container on the same host has another); "" where neither is known."""
    parts = []
    for path, read in (("/proc/sys/kernel/random/boot_id", lambda p: Path(p).read_text(encoding="ascii").strip()),
                       ("/proc/self/ns/pid", os.readlink)):
        try:
            parts.append(str(read(path)))
        except OSError:
            parts.append("")
    return "/".join(parts) if any(parts) else ""


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def describe_holder(held: dict[str, Any], now: float) -> str:
    """'pid 123 on host "h" since <UTC time> (last heard from 5 s ago)'."""
    ago = max(0.0, now - float(held.get("heartbeat", 0)))
    return (f"pid {held.get('pid')} on host {held.get('host')!r} since {_when(float(held.get('since', 0)))} "
            f"(last heard from {ago:.0f} s ago)")


def read_lease(records: Any) -> dict[str, Any] | None:
    """The stored lease (a dict: host, machine, pid, token, since, heartbeat), or None where no writer holds one."""
    value = records.get_one(LEASE_KEY)
    if not value:
        return None
    try:
        held = json.loads(value)
    except ValueError:
        log.warning("%s: the writer lease row is not JSON (%r); taking it as free", records.name, value[:80])
        return None
    return held if isinstance(held, dict) and "token" in held else None


def takeover_reason(held: dict[str, Any], now: float, *, lite: bool) -> str | None:
    """Why the lease `held` may be taken over (module docstring), or None where its writer may be alive."""
    with _LIVE_LOCK:
        if held["token"] in _LIVE:
            return None  # a writer of this process, not closed
    if lite:
        return "a Milvus Lite file is open in one process at a time, so its writer is gone"
    here = held.get("host") == socket.gethostname() and held.get("machine") == this_machine()
    if here and int(held.get("pid", -1)) == os.getpid():
        return "its writer, in this process, was never closed"
    if here and held.get("machine") and not _running(int(held.get("pid", -1))):
        return "its process on this machine is gone"
    age = now - float(held.get("heartbeat", 0))
    if age > LEASE_TIMEOUT_S:
        return f"not heard from in {age:.0f} s (over {LEASE_TIMEOUT_S:.0f} s)"
    return None


class WriterLease:
    """The lease a writer holds (module docstring): `take` it, `keep` it before writes and commits, `release` it."""

    def __init__(self, records: Any, where: str, token: str, since: float, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.records, self.where, self.token, self.since, self.clock = records, where, token, since, clock
        self.lost = False
        self._lost_by: dict[str, Any] | None = None  # the lease found in its place, once lost
        self._renewed = time.monotonic()

    @classmethod
    def take(cls, records: Any, where: str, *, lite: bool) -> WriterLease:
        """Take the lease of the knowledge base whose ``__kb`` rows are `records` (`where`: its name and uri, for
        messages). Raises WriterLeaseHeld naming the writer that holds it and what to do."""
        now = time.time()
        held = read_lease(records)
        if held is not None:
            reason = takeover_reason(held, now, lite=lite)
            if reason is None:
                raise WriterLeaseHeld(_held_message(where, held, now))
            log.warning("%s: taking over the writer lease of %s: %s", where, describe_holder(held, now), reason)
        lease = cls(records, where, secrets.token_hex(16), now)
        lease._write(now)
        back = read_lease(records)
        if back is None or back["token"] != lease.token:  # another writer wrote its lease in the same instant
            raise WriterLeaseHeld(_held_message(where, back or {}, time.time()))
        with _LIVE_LOCK:
            _LIVE.add(lease.token)
        return lease

    def _write(self, now: float) -> None:
        value = {"host": socket.gethostname(), "machine": this_machine(), "pid": os.getpid(), "token": self.token,
                 "since": self.since, "heartbeat": now}
        self.records.put({LEASE_KEY: json.dumps(value)})
        self._renewed = time.monotonic()

    def keep(self, *, renew: bool = False) -> None:
        """Before a write (or with `renew`, a commit): check that this writer still holds the lease, and rewrite its
        heartbeat at a commit or where the last one is `LEASE_RENEW_S` old. Raises WriterLeaseLost where another
        writer took it over (or it is gone)."""
        if not self.lost:
            held = read_lease(self.records)
            if held is None or held["token"] != self.token:
                self.lost = True
                with _LIVE_LOCK:
                    _LIVE.discard(self.token)
                self._lost_by = held
        if self.lost:
            by = (describe_holder(self._lost_by, self.clock()) if self._lost_by else "nobody (the lease row is gone)")
            raise WriterLeaseLost(
                f"this writer of {self.where} lost its writer lease (held since {_when(self.since)}); it is now held "
                f"by {by}. Nothing more is written or committed from here: what this writer committed is kept; "
                "close it, and ingest again once the other writer is done (stored documents are skipped)")
        with _LIVE_LOCK:
            _LIVE.add(self.token)
        if renew or time.monotonic() - self._renewed >= LEASE_RENEW_S:
            self._write(self.clock())

    def abandon(self) -> None:
        """The store stopped answering: this writer may not hold the lease when it comes back, so this process may
        open the knowledge base for writing again (taking the lease over), and this writer's next write checks."""
        with _LIVE_LOCK:
            _LIVE.discard(self.token)

    def release(self) -> None:
        """Give the lease back (where this writer still holds it). A store that does not answer is logged: the
        lease is then taken over as its docstring says."""
        with _LIVE_LOCK:
            _LIVE.discard(self.token)
        if self.lost:
            return
        self.lost = True
        try:
            held = read_lease(self.records)
            if held is not None and held["token"] == self.token:
                self.records.delete([LEASE_KEY])
                self.records.client.flush(self.records.name)
        except Exception as exc:  # noqa: BLE001 - closing must not fail on a store that went away
            log.warning("%s: could not release the writer lease (%s); the next writer takes it over after %.0f s",
                        self.where, exc, LEASE_TIMEOUT_S)


def _held_message(where: str, held: dict[str, Any], now: float) -> str:
    return (f"{where} is open for writing by {describe_holder(held, now) if held else 'another writer'}; one writer "
            "at a time may write to a knowledge base. Stop that writer (close its KnowledgeBase, or end its "
            "`kira ingest` / `kira serve`), or open this one with read_only=True to read it. A writer not heard "
            f"from in {LEASE_TIMEOUT_S:.0f} s is taken for dead and its lease taken over")


__all__ = ["LEASE_KEY", "LEASE_RENEW_S", "LEASE_TIMEOUT_S", "WriterLease", "WriterLeaseHeld", "WriterLeaseLost",
           "describe_holder", "read_lease", "takeover_reason", "this_machine"]
