"""Starting and stopping Ray for kira's ingest jobs (kira[ray]).

`start_ray` tries ``ray.init`` twice: on a loaded machine the raylet can miss Ray's fixed
30 s start wait. `stop_ray` shuts Ray down and reaps the processes this process's Ray node
started: Ray kills them without waiting and drops their ``subprocess.Popen`` handles, and Python
then warns "subprocess N is still running" whenever the garbage collector gets to a handle
(a ResourceWarning about Ray's own children, which an application running with warnings as
errors would see as a crash at some later, unrelated point). So the handles are taken before
the shutdown and waited for after it (`_node_processes`); every other Ray process this process
started since `start_ray` (a failed start's, which belong to no node, or one whose handle Ray
kept nowhere) is then killed and reaped by pid, so a handle collected later finds it gone; and
the warning is silenced for that shutdown only.

Ray's token authentication is process-wide state that outlives ``ray.shutdown``: a new local Ray
(Ray 2.60) sets ``RAY_AUTH_MODE=token`` in this process's environment where it was unset, and
Ray's compiled config and token loader keep the mode and token they first read. A second job in the
same process then ran in the first one's mode, whatever its own Ray was started with: its driver
refused its workers, and its actor pool died at start ("cancelled before it started running").
`start_ray` therefore has Ray read the mode and token afresh from the environment before it starts,
and `stop_ray` puts back the ``RAY_AUTH_MODE`` that was there before `start_ray` (and has Ray read
it again), so each job sees the environment it was started in, as a job in a fresh process does.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import subprocess
import time
import warnings
from typing import Any

log = logging.getLogger(__name__)
AUTH_MODE = "RAY_AUTH_MODE"
REAP_WAIT_S = 10.0  # how long `stop_ray` waits for each of Ray's killed processes before killing it itself
_UNSET = object()
_auth_before: list[Any] = []  # RAY_AUTH_MODE as it was before `start_ray` (or _UNSET), until `stop_ray` puts it back
_children_before: list[set[int]] = []  # this process's child pids before `start_ray`, until `stop_ray` reaps the rest


def start_ray(ray: Any, address: str | None = None, **options: Any) -> None:
    """``ray.init`` on `address` (None: a new local Ray with 2 CPUs), with further ``ray.init`` `options` (e.g. a
    ``runtime_env``), tried twice; raises what the second try raised."""
    for attempt in (1, 2):
        if not ray.is_initialized():
            _children_before[:] = [_child_pids()]  # what `stop_ray` leaves alone: this process's children of before
            _auth_before[:] = [os.environ.get(AUTH_MODE, _UNSET)]
            reload_auth_settings()  # this job's mode, not the one an earlier job's Ray left cached (module docstring)
        try:
            ray.init(**{"address": address, "num_cpus": None if address else 2, "include_dashboard": False,
                        "log_to_driver": False, "configure_logging": False, **options})
            return
        except Exception:  # noqa: BLE001 - Ray raises a bare Exception for a start timeout
            stop_ray(ray)  # stops what the failed start left running, its processes without a handle too
            if attempt == 2:
                raise
            log.warning("ray.init failed; trying once more")


def stop_ray(ray: Any) -> None:
    """``ray.shutdown()``, with the process handles Ray drops collected while its ResourceWarning is ignored;
    then the ``RAY_AUTH_MODE`` of before `start_ray` put back, and Ray's authentication settings read afresh
    (module docstring)."""
    children = _node_processes(ray)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        ray.shutdown()
        for child in children:  # killed by the shutdown; reaped here, not when a collector finds the handle
            try:
                child.wait(timeout=REAP_WAIT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if _children_before:  # Ray's children without a handle here (a failed start's; some a job dropped): by pid
            _reap_children_since(_children_before.pop())
        gc.collect()
    if _auth_before:
        before = _auth_before.pop()
        if before is _UNSET:
            os.environ.pop(AUTH_MODE, None)
        else:
            os.environ[AUTH_MODE] = before
    reload_auth_settings()


def _node_processes(ray: Any) -> list[subprocess.Popen[Any]]:
    """The ``Popen`` handles of the processes this process's Ray node started (none for a Ray that is not
    running here, or one that keeps them elsewhere)."""
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    groups = getattr(node, "all_processes", None) or {}
    return [info.process for infos in groups.values() for info in infos
            if isinstance(getattr(info, "process", None), subprocess.Popen)]


def _child_pids() -> set[int]:
    """The pids of this process's children, zombies included (read from /proc; empty where there is none)."""
    me, pids = os.getpid(), set[int]()
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return pids
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 1 and int(fields[1]) == me:
            pids.add(int(name))
    return pids


def _reap_children_since(before: set[int]) -> None:
    """Kill and reap each Ray process this process started since `before` was taken (what a failed ``ray.init``
    started and dropped). By pid, not through Ray's dropped ``Popen`` handles: once a child is reaped, its handle
    finds it gone when a collector gets to it, and does not warn."""
    for pid in sorted(_child_pids() - before):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"ray" not in cmdline.read():
                    continue  # not Ray's: another thread's child
            os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
        deadline = time.monotonic() + REAP_WAIT_S
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:
                break  # reaped already (by its Popen)
            time.sleep(0.01)


def reload_auth_settings() -> None:
    """Have Ray read its authentication mode and token afresh from the environment (and the token file), as a new
    process would: its compiled config and token loader otherwise keep what they read at the first ``ray.init``
    of the process. Call it only while Ray is not initialized. A Ray without token authentication has nothing
    to reload."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]  # private, Ray 2.5x+
    except ImportError:
        return
    Config.initialize("")  # before the token cache: Ray's own tests reset the two in this order
    AuthenticationTokenLoader.instance().reset_cache()


__all__ = ["AUTH_MODE", "reload_auth_settings", "start_ray", "stop_ray"]
