"""`kira serve KB`: run the service with uvicorn (one process, or N workers and one writer).

    kira serve KB [--host 127.0.0.1] [--port 8000] [--workers N] [--read-only]
                  [--api-key-env NAME] [--max-upload-mb 20] [--max-pixels N] [--query-max-side 2048] [--threads 1]
                  [--queue-size 16] [--cors-origin URL ...] [--models DIR] [--model-threads 1]

With --workers N > 1 each worker process opens the knowledge base read-only; on a writable
service one more process holds it for writing and serves the write routes on a private
unix socket, to which the workers forward them. SIGINT / SIGTERM drain requests in
flight, then close the knowledge base (the writer commits what is pending).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Any

from kira.serve.config import CONFIG_ENV, ServeConfig

log = logging.getLogger(__name__)
GRACEFUL_S = 30  # seconds uvicorn waits for requests in flight on shutdown


def add_serve_subcommand(sub: Any) -> None:
    """Add `kira serve` to the `kira` command's subparsers."""
    p = sub.add_parser("serve", help="serve a knowledge base over HTTP (FastAPI + uvicorn; the serve extra)")
    p.add_argument("kb", help="knowledge base directory")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1, help="worker processes, each with a read-only view")
    p.add_argument("--read-only", action="store_true", help="refuse writes (403)")
    p.add_argument("--api-key-env", help="environment variable holding the bearer key every route but /health needs")
    p.add_argument("--max-upload-mb", type=float, default=20.0, help="largest request body")
    p.add_argument("--max-pixels", type=int, default=None, help="largest decoded image (default kira's limit)")
    p.add_argument("--query-max-side", type=int, default=2048,
                   help="a query image is downscaled on decode to at most this many pixels a side")
    p.add_argument("--threads", type=int, default=1, help="reader threads per worker")
    p.add_argument("--queue-size", type=int, default=16, help="requests queued per worker before 503")
    p.add_argument("--cors-origin", action="append", default=[], help="allow CORS from this origin (repeatable)")
    p.add_argument("--models", help="directory of exported ONNX models (default: the embedded default stack)")
    p.add_argument("--model-threads", type=int, default=1,
                   help="onnxruntime (and BLAS) threads per worker for the default stack (0: their defaults)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    p.set_defaults(func=run_serve)


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The ServeConfig the options describe; ValueError naming the fix for a bad one."""
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1; got {args.workers}")
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be 1-65535; got {args.port}")
    extra = {"max_pixels": args.max_pixels} if args.max_pixels is not None else {}
    config = ServeConfig(kb_path=str(args.kb), read_only=args.read_only, api_key_env=args.api_key_env,
                         max_upload_mb=args.max_upload_mb, threads=args.threads, queue_size=args.queue_size,
                         query_max_side=args.query_max_side,
                         cors_origins=tuple(args.cors_origin), models=args.models,
                         model_threads=args.model_threads or None, **extra)
    config.api_key()  # an unset variable fails now, with the fix
    return config


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_serve(args: argparse.Namespace) -> int:
    """Run `kira serve` until interrupted; returns the exit status."""
    from kira.serve import _require

    _require()
    import uvicorn

    config = config_from_args(args)
    auth = f"bearer key from ${config.api_key_env}" if config.api_key_env else "no authentication"
    where = "loopback only" if _is_loopback(args.host) else "reachable from other machines"
    print(f"kira serve: {config.kb_path} on http://{args.host}:{args.port} ({where}; {auth}; "
          f"{args.workers} worker(s); {'read-only' if config.read_only else 'writable'})", file=sys.stderr)
    if not config.api_key_env and not _is_loopback(args.host):
        print("kira serve: WARNING: no --api-key-env and a non-loopback --host: anyone who can reach this address "
              "can query" + ("" if config.read_only else " and change") + " the knowledge base", file=sys.stderr)
    common = dict(host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=GRACEFUL_S)
    if args.workers == 1:
        from kira.serve.app import build_app

        uvicorn.run(build_app(config), **common)
        return 0
    return _run_workers(config, args.workers, common)


def _run_workers(config: ServeConfig, workers: int, common: dict[str, Any]) -> int:
    import uvicorn

    scratch = tempfile.mkdtemp(prefix="kira-serve-")  # private (0700): the writer's socket, the metrics files
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.path.join(scratch, "metrics")
    os.mkdir(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    supervisor = None
    try:
        if not config.read_only:
            uds = os.path.join(scratch, "writer.sock")
            # the socket sits in a 0700 directory and the workers check the key before forwarding: no key here
            supervisor = WriterSupervisor(config.replace(role="writer", api_key_env=None), uds, common["log_level"])
            supervisor.start()
            config = config.replace(role="reader", writer_uds=uds)
        os.environ[CONFIG_ENV] = config.to_json()
        uvicorn.run("kira.serve.app:app_from_env", factory=True, workers=workers, **common)
        return 0
    finally:
        if supervisor is not None:
            supervisor.stop()
        shutil.rmtree(scratch, ignore_errors=True)


class WriterSupervisor:
    """The writer process of `kira serve --workers N`, started again when it dies.

    A writer killed by anything but a clean stop (SIGKILL, the OOM killer, a crash) is noticed within a
    second and a new one is started on the same socket; what it had not committed is lost, as after any
    crash, and what it had committed is kept (the knowledge base's own recovery). Meanwhile writes get 503
    `writer_unavailable` and every worker's /ready says the writer is not answering. A writer that fails
    to start again is retried with a growing pause (1 s to 60 s), each failure logged.
    """

    CLEAN_EXITS = (0, -signal.SIGTERM, -signal.SIGINT)  # a stop we asked for (or the user's Ctrl-C)

    def __init__(self, config: ServeConfig, uds: str, log_level: str) -> None:
        self.config, self.uds, self.log_level = config, uds, log_level
        self.process: Any = None
        self.restarts = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _spawn(self) -> Any:
        ctx = multiprocessing.get_context("spawn")
        process = ctx.Process(target=_writer_main, args=(self.config.to_json(), self.uds, self.log_level),
                              name="kira-serve-writer")
        process.start()
        self.process = process
        _wait_for_socket(self.uds, process)
        return process

    def start(self) -> None:
        """Start the writer, wait until it answers, then watch it; ValueError when it cannot start."""
        self._spawn()
        self._thread = threading.Thread(target=self._watch, name="kira-serve-writer-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        pause = 1.0
        while not self._stop.wait(1.0):
            process = self.process
            if process.is_alive() or process.exitcode in self.CLEAN_EXITS:
                continue
            log.error("kira serve: the writer process (pid %s) died (exit code %s); starting a new one",
                      process.pid, process.exitcode)
            try:
                self._spawn()
            except Exception as exc:  # keep trying: the workers report not-ready meanwhile
                log.error("kira serve: the writer did not start again (%s); next try in %.0f s", exc, pause)
                if self._stop.wait(pause):
                    return
                pause = min(pause * 2, 60.0)
                continue
            self.restarts += 1
            pause = 1.0
            log.warning("kira serve: a new writer process (pid %s) serves writes", self.process.pid)

    def stop(self) -> None:
        """Stop watching, then stop the writer: SIGTERM, uvicorn drains, it commits and releases the lock."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        process = self.process
        if process is not None and process.is_alive():
            process.terminate()
            process.join(timeout=GRACEFUL_S + 10)


def _wait_for_socket(uds: str, process: Any, timeout: float = 300.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.is_alive():
            raise ValueError("the writer process exited at start (see its log above); is another process writing "
                             "to this knowledge base? stop it or serve with --read-only")
        if os.path.exists(uds):
            try:
                with httpx.Client(transport=httpx.HTTPTransport(uds=uds), timeout=2.0) as client:
                    if client.get("http://writer/ready").status_code == 200:
                        return
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    raise ValueError(f"the writer process did not become ready within {timeout:.0f} s")


def _writer_main(config_json: str, uds: str, log_level: str) -> None:
    """The writer process: the write routes on a unix socket (role 'writer')."""
    import uvicorn

    from kira.serve.app import build_app

    uvicorn.run(build_app(ServeConfig.from_json(config_json)), uds=uds, log_level=log_level,
                timeout_graceful_shutdown=GRACEFUL_S)
