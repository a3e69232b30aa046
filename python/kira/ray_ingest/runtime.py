"""Starting and stopping Ray for kira's ingest jobs (kira[ray]).

`start_ray` tries ``ray.init`` twice: on a loaded machine the raylet can miss Ray's fixed
30 s start wait. `stop_ray` shuts Ray down and lets go of the handles of the processes Ray
started: Ray kills them but can drop a ``subprocess.Popen`` before it has reaped the
process, and Python then warns "subprocess N is still running" (a ResourceWarning about
Ray's own children, which an application running with warnings as errors would see as a
crash at some later, unrelated point). The warning is silenced for that shutdown only.
"""

from __future__ import annotations

import gc
import logging
import warnings
from typing import Any

log = logging.getLogger(__name__)


def start_ray(ray: Any, address: str | None = None) -> None:
    """``ray.init`` on `address` (None: a new local Ray with 2 CPUs), tried twice; raises what the second
    try raised."""
    for attempt in (1, 2):
        try:
            ray.init(address=address, num_cpus=None if address else 2, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            return
        except Exception:  # noqa: BLE001 - Ray raises a bare Exception for a start timeout
            stop_ray(ray)  # stops what the failed start left running
            if attempt == 2:
                raise
            log.warning("ray.init failed; trying once more")


def stop_ray(ray: Any) -> None:
    """``ray.shutdown()``, with the process handles Ray drops collected while its ResourceWarning is ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        ray.shutdown()
        gc.collect()


__all__ = ["start_ray", "stop_ray"]
