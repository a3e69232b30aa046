"""Connecting to Milvus and closing the client again: pymilvus's `MilvusClient`, with Milvus Lite's quirks handled.

pymilvus is the only client. A `uri` ending in ``.db`` runs Milvus Lite in this process (pymilvus starts
it; `milvus-lite`), any other uri is a Milvus Standalone/Distributed server or Zilliz Cloud, with the
same code. `connect` says what to fix where it cannot: pymilvus or milvus-lite missing (an ImportError
naming ``kira[milvus]``), nothing answering at the uri, a Lite file another process holds, a server too
old (kira.knowledge_base.milvus.server_version). `close_client` counts kira's clients per Lite file: the
last one stops the in-process Lite server kira started, which releases the file for another process.
Milvus Lite's log noise about a timestamp call it lacks is filtered out.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from kira.knowledge_base.milvus.server_version import MIN_SERVER, check_server

log = logging.getLogger(__name__)


def require_pymilvus() -> Any:
    """Import pymilvus, or raise an ImportError saying which extra installs it."""
    try:
        import pymilvus
    except ImportError as exc:  # pragma: no cover - exercised by monkeypatching sys.modules
        raise ImportError('the Milvus backend needs pymilvus (and milvus-lite for a ".db" uri): '
                          'pip install "kira[milvus]"') from exc
    return pymilvus


class _LiteTimestampNoise(logging.Filter):
    """Drops the two log records a query iterator causes on Milvus Lite 3.2, which has no AllocTimestamp
    call: the in-process server's "Method not implemented" traceback and pymilvus's "failed to get
    mvccTs" warning (the iterator then uses a client-side timestamp, which is right for Lite)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        return not ("Method not implemented" in text or "failed to get mvccTs" in text
                    or (error is not None and "AllocTimestamp" in str(error))
                    # a Lite file open in another process: `connect` says so in its own error
                    or (error is not None and _locked_cause(error)))


def _locked_cause(error: BaseException) -> bool:
    """Whether `error` (or what caused it) is Milvus Lite's "another process holds the lock"."""
    cause: BaseException | None = error
    while cause is not None:
        if type(cause).__name__ == "DataDirLockedError":
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _held_by_another_process(lite_dir: str) -> bool:
    """Whether another process holds Milvus Lite's lock on the data directory `lite_dir` (probed after
    this process failed to start a server there, so the lock is not this process's own)."""
    import os

    lock = os.path.join(lite_dir, "LOCK")
    if not os.path.isfile(lock):
        return False
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _quiet_lite_timestamps() -> None:
    for name in ("grpc._server", "pymilvus.client.iterator.query_iterator", "milvus_lite.server_manager"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _LiteTimestampNoise) for f in logger.filters):
            logger.addFilter(_LiteTimestampNoise())


def connect(uri: str, token: str = "", timeout: float = 10.0, *, minimum: tuple[int, int, int] = MIN_SERVER) -> Any:
    """A pymilvus MilvusClient for `uri` (a ".db" path runs Milvus Lite in this process).

    Raises ImportError naming ``kira[milvus]`` where pymilvus (or, for a ".db" uri, milvus-lite) is
    missing, ConnectionError naming the uri where nothing answers there, and ServerTooOld (a
    ValueError) naming the version needed where the server is older than `minimum` (`check_server`).
    """
    pm = require_pymilvus()
    if uri.endswith(".db"):
        try:
            import milvus_lite  # noqa: F401
        except ImportError as exc:
            raise ImportError(f'uri {uri!r} is a Milvus Lite file, which needs milvus-lite: '
                              'pip install "kira[milvus]"') from exc
    _quiet_lite_timestamps()  # Milvus Lite's server (in-process or on a port) has no AllocTimestamp
    started_by_others = uri.endswith(".db") and _lite_server_running(uri)
    try:
        client = pm.MilvusClient(uri=uri, token=token, timeout=timeout)
    except pm.MilvusException as exc:
        if uri.endswith(".db") and _held_by_another_process(uri):
            raise ConnectionError(f"the Milvus Lite file {uri!r} is open in another process (Milvus Lite lets one "
                                  "process at a time use it): stop that process (a `kira serve` or `kira ingest` "
                                  "on it), or use a Milvus server (--uri http://host:19530) to share a knowledge "
                                  "base between processes") from None
        raise ConnectionError(f"cannot reach Milvus at {uri!r}: {exc}. Check the uri and that the "
                              "server is running (a path ending in .db runs Milvus Lite in-process)") from exc
    if not uri.endswith(".db"):
        try:
            check_server(client, uri, minimum)
        except BaseException:
            client.close()
            raise
    else:
        path = os.path.abspath(uri)
        with _LITE_LOCK:
            if path not in _LITE_USERS and not started_by_others:
                _LITE_OWNED.add(path)  # kira started this file's server: its last kira client stops it
            _LITE_USERS[path] = _LITE_USERS.get(path, 0) + 1
        client._kira_lite_file = path  # what close_client releases
    return client


_LITE_LOCK = threading.Lock()
_LITE_USERS: dict[str, int] = {}  # Milvus Lite file -> kira clients open on it in this process
_LITE_OWNED: set[str] = set()  # Lite files whose in-process server a kira client started


def _lite_server_running(uri: str) -> bool:
    """Whether this process already serves the Milvus Lite file `uri` (started by a client that is not kira's)."""
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:
        return False
    return os.path.abspath(uri) in getattr(server_manager_instance, "_servers", {})


def close_client(client: Any) -> None:
    """Close a client `connect` returned. The last kira client of a Milvus Lite file also stops the
    in-process Lite server of that file (where a kira client started it), which releases the file's
    lock: another process (the CLI, a server) can open the knowledge base next. Safe to call twice."""
    path = getattr(client, "_kira_lite_file", None)
    try:
        client.close()
    finally:
        if path is not None:
            client._kira_lite_file = None
            with _LITE_LOCK:
                left = _LITE_USERS.get(path, 1) - 1
                if left > 0:
                    _LITE_USERS[path] = left
                else:
                    _LITE_USERS.pop(path, None)
                owned = left <= 0 and path in _LITE_OWNED
                if owned:
                    _LITE_OWNED.discard(path)
            if owned:
                from milvus_lite.server_manager import server_manager_instance

                server_manager_instance.release_server(path)
                log.debug("released the Milvus Lite file %s", path)


__all__ = ["close_client", "connect", "require_pymilvus"]
