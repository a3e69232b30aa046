"""Two Ray ingests in one process (kira.ray_ingest.runtime): each job's Ray reads the authentication mode of the
environment it is started in, not the one an earlier job's Ray left in the process.

Before the fix, a first local job (Ray 2.60 turns token authentication on for a new local Ray, writing
``RAY_AUTH_MODE=token`` into the process's environment and its compiled config) left a second job, started with
``RAY_AUTH_MODE=disabled``, with a driver in token mode and workers without a token: its actor pool died at start
("The actor never ran - it was cancelled before it started running")."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from ray_kill_hook import RAY_DROPPED_HANDLES

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')
pytest.importorskip("ray.data", reason='needs pip install "kira[ray]"')

from milvus_fixtures import release_lite  # noqa: E402
from test_ingest_ray_cli import _corpus  # noqa: E402

from kira.ray_ingest.runtime import AUTH_MODE, reload_auth_settings, start_ray, stop_ray  # noqa: E402


def _mode() -> str:
    from ray._raylet import AuthenticationMode, get_authentication_mode

    return "token" if get_authentication_mode() == AuthenticationMode.TOKEN else "disabled"


def test_reload_auth_settings_has_ray_read_the_mode_of_the_environment_afresh():
    before = os.environ.get(AUTH_MODE)
    try:
        os.environ[AUTH_MODE] = "token"
        reload_auth_settings()
        assert _mode() == "token"
        os.environ[AUTH_MODE] = "disabled"
        assert _mode() == "token"  # what Ray keeps without a reload: the mode it read first
        reload_auth_settings()
        assert _mode() == "disabled"
    finally:
        if before is None:
            os.environ.pop(AUTH_MODE, None)
        else:
            os.environ[AUTH_MODE] = before
        reload_auth_settings()


class _RayThatTurnsTokenAuthOn:
    """What ``ray.init`` of a new local Ray 2.60 does to the process's environment where the mode is unset."""

    def __init__(self) -> None:
        self.running = False

    def is_initialized(self) -> bool:
        return self.running

    def init(self, **_: object) -> None:
        os.environ.setdefault(AUTH_MODE, "token")
        self.running = True

    def shutdown(self) -> None:
        self.running = False


@pytest.mark.parametrize("before", [None, "disabled"])
def test_stop_ray_puts_back_the_auth_mode_of_before_start_ray(monkeypatch, before):
    if before is None:
        monkeypatch.delenv(AUTH_MODE, raising=False)
    else:
        monkeypatch.setenv(AUTH_MODE, before)
    ray = _RayThatTurnsTokenAuthOn()
    try:
        start_ray(ray)
        assert os.environ.get(AUTH_MODE) == (before or "token")
    finally:
        stop_ray(ray)
    assert os.environ.get(AUTH_MODE) == before
    assert _mode() == (before or "disabled")  # and Ray reads it afresh
    stop_ray(ray)  # a second stop (as a failed start does) changes nothing
    assert os.environ.get(AUTH_MODE) == before



@pytest.mark.filterwarnings(RAY_DROPPED_HANDLES)
@pytest.mark.slow  # about 50 s here: two local Rays, one after the other, each a 20-image job
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")
def test_two_ray_ingests_in_one_process_each_fill_their_knowledge_base(tmp_path, monkeypatch):
    import ray

    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default
    from kira.ray_ingest.kb import ingest_ray_kb

    folder = tmp_path / "images"
    names = _corpus(folder)
    stack = load_default(prefer_cuda=False, threads=1)
    monkeypatch.delenv(AUTH_MODE, raising=False)  # the first job: Ray's default for a new local Ray (token)
    context = ray.data.DataContext.get_current()
    kept = (context.enable_progress_bars, context.wait_for_min_actors_s)
    ids = []
    for i, mode in enumerate((None, "disabled")):  # the second job: its Ray started without authentication
        if mode is not None:
            monkeypatch.setenv(AUTH_MODE, mode)
        kb = KnowledgeBase.create(tmp_path / f"kb{i}", models=stack, backend="milvus")
        try:
            summary = ingest_ray_kb(kb, folder, batch_size=4)
            assert sorted(summary.added) == sorted(names)
            assert [os.path.basename(p) for p, _ in summary.skipped] == ["zz_broken.png"]
            assert sorted(kb.documents()) == sorted(names)
            ids.append(kb.store.chunk_ids())
        finally:
            kb.close()
            release_lite(tmp_path / f"kb{i}" / "milvus.db")
        assert not ray.is_initialized()  # the job's own Ray stopped
        assert os.environ.get(AUTH_MODE) == mode  # what the job's Ray set in the environment is put back
        assert (context.enable_progress_bars, context.wait_for_min_actors_s) == kept  # and Ray Data's settings
    assert len(ids[0]) > 20 * 5 and np.array_equal(ids[0], ids[1])  # the same chunks in both


def test_stop_ray_reaps_every_process_its_node_started():
    """Ray's shutdown kills its node's processes without waiting; a handle collected later while its process still
    runs warns "subprocess N is still running", an error under this suite's warnings filter, in whatever test
    the collector happens to run in. stop_ray waits for each."""
    import ray

    from kira.ray_ingest.runtime import _node_processes

    start_ray(ray)
    try:
        children = _node_processes(ray)
        assert len(children) >= 2 and all(child.poll() is None for child in children)  # gcs_server, raylet, ...
    finally:
        stop_ray(ray)
    assert all(child.returncode is not None for child in children)


def test_start_ray_passes_its_options_and_tries_a_failed_start_once_more():
    """A start that times out (Ray's fixed 30 s raylet wait, on a loaded machine) is stopped and tried again, with the
    same options; a second failure is raised."""
    import subprocess
    import sys
    import warnings

    calls, started = [], []

    class FlakyRay:
        def __init__(self, failures):
            self.failures = failures

        def is_initialized(self):
            return False

        def init(self, **kwargs):
            calls.append(kwargs)
            if len(calls) <= self.failures:  # a failed start leaves a process no node holds a handle to
                started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "raylet"]))
                raise Exception("The current node timed out during startup.")

        def shutdown(self):
            pass

    start_ray(FlakyRay(1), runtime_env={"env_vars": {"A": "1"}})
    assert len(calls) == 2 and all(c["runtime_env"] == {"env_vars": {"A": "1"}} and c["num_cpus"] == 2 for c in calls)
    calls.clear()
    with pytest.raises(Exception, match="timed out during startup"):
        start_ray(FlakyRay(2))
    assert len(calls) == 2 and len(started) == 3
    for child in started:  # each killed and reaped by the retry's stop_ray: gone, and its handle does not warn
        with pytest.raises(ProcessLookupError):
            os.kill(child.pid, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        assert all(child.poll() is not None for child in started)
        started.clear()
        gc.collect()


def test_a_failed_starts_leftover_ray_processes_are_reaped():
    """What a failed ray.init started is not its node's, so stop_ray has no handle on it: start_ray's retry kills and
    reaps each Ray process started since the try began, and its dropped handle then finds it gone without a warning;
    a child that is not Ray's is left alone."""
    import subprocess
    import sys
    import warnings

    from kira.ray_ingest.runtime import _child_pids, _reap_children_since

    before = _child_pids()
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "raylet"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert {leftover.pid, bystander.pid} <= _child_pids() - before
        _reap_children_since(before)
        with pytest.raises(ProcessLookupError):
            os.kill(leftover.pid, 0)  # killed and reaped: no zombie left either
        assert bystander.poll() is None
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            assert leftover.poll() is not None  # the handle sees its process gone
            del leftover
            gc.collect()
    finally:
        bystander.kill()
        bystander.wait()


def test_stop_ray_reaps_a_ray_process_no_handle_it_can_reach_holds():
    """A Ray child the node keeps no handle to (or one Ray dropped) is killed and reaped by pid at stop_ray, so its
    Popen, collected later in any test, finds it gone and does not warn; a child from before start_ray is left."""
    import subprocess
    import sys
    import warnings

    kept = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "ray-before"])
    spawned = []

    class QuietRay:
        def is_initialized(self):
            return bool(spawned)

        def init(self, **kwargs):
            spawned.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "dashboard_agent",
                                             "--ray"]))

        def shutdown(self):
            pass

    try:
        start_ray(QuietRay())
        stop_ray(QuietRay())
        with pytest.raises(ProcessLookupError):
            os.kill(spawned[0].pid, 0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            assert spawned[0].poll() is not None
            spawned.clear()
            gc.collect()
        assert kept.poll() is None  # not started since start_ray: not stop_ray's to reap
    finally:
        kept.kill()
        kept.wait()
