"""A Ray worker_process_setup_hook for tests/ray_ingest/test_ingest_ray_killed.py, in a module of its own that imports
nothing from the tests, so Ray's workers (PYTHONPATH: tests/) can import it by name."""

from __future__ import annotations

import os
import signal
from pathlib import Path

KILL_MARK = "KIRA_TEST_KILL_MARK"  # the file the first worker to write creates just before it kills itself


def die_after_the_first_write() -> None:
    """In every worker, `write_items` kills its process (SIGKILL, no cleanup) right after the first batch any
    worker writes, once per job (the mark file says it happened)."""
    from kira.knowledge_base.milvus import kb_writes

    write = kb_writes.write_items

    def write_then_die(collection, records, batch):  # type: ignore[no-untyped-def]
        written = write(collection, records, batch)
        try:
            Path(os.environ[KILL_MARK]).touch(exist_ok=False)  # only the first write of the job dies
        except FileExistsError:
            return written
        os.kill(os.getpid(), signal.SIGKILL)
        return written

    kb_writes.write_items = write_then_die


NODE_GROUP = "KIRA_TEST_KILL_NODE_GROUP"  # set only in the environment of the node to kill: a file holding its group


def kill_the_node_after_its_first_write() -> None:
    """In the workers of the node whose environment sets `NODE_GROUP` (the file that holds the process group of its
    `ray start --block`, started in a session of its own: the raylet and the node's agents; Ray's workers run in
    groups of their own), `write_items` kills that process group and then its own process with SIGKILL (the whole
    node) right after the first batch a worker there writes, before the batch is reported. The `KILL_MARK` file,
    made once per job, names the group it killed."""
    if not os.environ.get(NODE_GROUP):
        return
    from kira.knowledge_base.milvus import kb_writes

    write = kb_writes.write_items

    def write_then_kill_the_node(collection, records, batch):  # type: ignore[no-untyped-def]
        written = write(collection, records, batch)
        group = int(Path(os.environ[NODE_GROUP]).read_text())
        try:
            with open(os.environ[KILL_MARK], "x") as mark:
                mark.write(str(group))
        except FileExistsError:
            return written
        os.killpg(group, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
        return written

    kb_writes.write_items = write_then_kill_the_node

RAY_DROPPED_HANDLES = r"ignore:Exception ignored in. <function Popen.__del__:pytest.PytestUnraisableExceptionWarning"
"""A real Ray job drops ``Popen`` handles of processes it still runs (a killed worker's restart, a lost node); the
warning their collection raises is Ray's, not the job's. stop_ray kills and reaps those processes by pid after."""
