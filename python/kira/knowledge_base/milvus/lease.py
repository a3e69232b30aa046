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
  writes and commits nothing more, rather than interleave with the new writer. A lease row read as
  missing is read again first (`GONE_RECHECK_S`): an upsert deletes, then inserts.
* While it is open, idle or not, a daemon thread renews its heartbeat every `LEASE_RENEW_S`
  (kira.knowledge_base.milvus.lease_heartbeat), so an idle writer (a `kira serve` writer between
  jobs) keeps its lease for as long as its process runs. The thread checks the lease before each
  renewal: a lease another writer took over is never renewed, and the loss is recorded, so the
  writer's next write or commit raises `WriterLeaseLost`. It stops at close; read-only opens and
  Milvus Lite files (whose lease is never judged by its heartbeat) have none.

A writer stops renewing only when its process stops or stalls (suspended, its host gone), or when it
is dropped without being closed; after `LEASE_TIMEOUT_S` another writer may then take over. Milvus
has no compare-and-set: two writers taking over the same stale lease in the same instant, or a
stalled writer's renewal landing just as its stale lease is taken over, can leave both believing
they hold it until the loser's next check (its next batch, commit or heartbeat). A kira older than
the lease does not look at the row.
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

GONE_RECHECK_S = (0.02, 0.05, 0.1)
"""Waits before reading a lease row found missing again: Milvus writes a row by deleting and inserting it (an
upsert is not atomic), so a read can land between the two; only a row still missing after these is gone."""

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


def read_settled_lease(records: Any) -> dict[str, Any] | None:
    """`read_lease`, read again after each of `GONE_RECHECK_S` while the row reads as missing: a lease row found
    missing right after an upsert (its delete landed, its insert not yet) is not a lease that is gone."""
    held = read_lease(records)
    for wait in GONE_RECHECK_S:
        if held is not None:
            break
        time.sleep(wait)
        held = read_lease(records)
    return held


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
    """The lease a writer holds (module docstring): `take` it (which starts its heartbeat), `keep` it before writes
    and commits, `release` it (which stops the heartbeat)."""

    def __init__(self, records: Any, where: str, token: str, since: float, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.records, self.where, self.token, self.since, self.clock = records, where, token, since, clock
        self.lost = False
        self._lost_by: dict[str, Any] | None = None  # the lease found in its place, once lost
        self._renewed = time.monotonic()
        self._lock = threading.Lock()  # the writer's checks and the heartbeat's beats, one at a time
        self.heartbeat: Any = None  # its LeaseHeartbeat (kira.knowledge_base.milvus.lease_heartbeat), where one runs

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
        back = read_settled_lease(records)
        if back is None or back["token"] != lease.token:  # another writer wrote its lease in the same instant
            raise WriterLeaseHeld(_held_message(where, back or {}, time.time()))
        with _LIVE_LOCK:
            _LIVE.add(lease.token)
        if not lite:  # a Lite file's lease is never judged by its heartbeat (takeover_reason)
            from kira.knowledge_base.milvus.lease_heartbeat import LeaseHeartbeat

            lease.heartbeat = LeaseHeartbeat(lease, LEASE_RENEW_S)
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
        with self._lock:
            if not self._still_held():
                by = (describe_holder(self._lost_by, self.clock()) if self._lost_by else
                      "nobody (the lease row is gone)")
                raise WriterLeaseLost(
                    f"this writer of {self.where} lost its writer lease (held since {_when(self.since)}); it is now "
                    f"held by {by}. Nothing more is written or committed from here: what this writer committed is "
                    "kept; close it, and ingest again once the other writer is done (stored documents are skipped)")
            with _LIVE_LOCK:
                _LIVE.add(self.token)
            if renew or time.monotonic() - self._renewed >= LEASE_RENEW_S:
                self._write(self.clock())

    def beat(self) -> bool:
        """The heartbeat's renewal (kira.knowledge_base.milvus.lease_heartbeat): rewrite the heartbeat where this
        writer still holds the lease. False, and nothing written, where it was lost (the loss is recorded: the
        next write or commit raises WriterLeaseLost) or released."""
        with self._lock:
            if not self._still_held():
                return False
            self._write(self.clock())
            return True

    def _still_held(self) -> bool:
        """Whether the stored lease is still this writer's (under `_lock`); records the loss where it is not."""
        if not self.lost:
            held = read_settled_lease(self.records)
            if held is None or held["token"] != self.token:
                self.lost = True
                with _LIVE_LOCK:
                    _LIVE.discard(self.token)
                self._lost_by = held
        return not self.lost

    def stop(self) -> None:
        """Stop the heartbeat (before the lease is released, or its knowledge base dropped). Safe to call twice."""
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def abandon(self) -> None:
        """The store stopped answering: this writer may not hold the lease when it comes back, so this process may
        open the knowledge base for writing again (taking the lease over), and this writer's next write checks."""
        with _LIVE_LOCK:
            _LIVE.discard(self.token)

    def release(self) -> None:
        """Give the lease back (where this writer still holds it). A store that does not answer is logged: the
        lease is then taken over as its docstring says."""
        self.stop()
        with _LIVE_LOCK:
            _LIVE.discard(self.token)
        with self._lock:
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
