"""Prometheus metrics: request counts and latency per route, and per pipeline stage.

With ``kira serve --workers N`` every worker process writes its samples to
``PROMETHEUS_MULTIPROC_DIR`` (set by the command) and GET /metrics on any worker reports
the sum over all of them (prometheus-client's multiprocess mode).
"""

from __future__ import annotations

import os
import time
from typing import Any

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The service's metrics, on a registry of its own (several apps may live in one process)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("kira_http_requests_total", "HTTP requests by route, method and status",
                                ["route", "method", "status"], registry=r)
        self.latency = Histogram("kira_http_request_duration_seconds", "HTTP request latency by route",
                                 ["route", "method"], buckets=LATENCY_BUCKETS, registry=r)
        self.stages = Histogram("kira_stage_duration_seconds", "time spent in each pipeline / search stage",
                                ["route", "stage"], buckets=LATENCY_BUCKETS, registry=r)
        self.rejected = Counter("kira_requests_rejected_total", "requests refused for load (503)", ["route"],
                                registry=r)
        self.in_flight = Gauge("kira_requests_in_flight", "requests being served", registry=r,
                               multiprocess_mode="livesum")
        self.generation = Gauge("kira_kb_generation", "the knowledge base generation the readers last saw",
                                registry=r, multiprocess_mode="max")

    def observe_stages(self, route: str, timings_ms: dict[str, float]) -> None:
        """Record each stage's milliseconds (the 'total' entry is the sum, not a stage)."""
        for stage, ms in timings_ms.items():
            if stage != "total":
                self.stages.labels(route, stage).observe(float(ms) / 1000.0)

    def render(self) -> tuple[bytes, str]:
        """(body, content type) in the Prometheus text format; summed over worker processes in multiprocess mode."""
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """ASGI middleware: counts and times every HTTP request under its route template (not its raw path), and
    tells the client the server's time in a ``Server-Timing: app;dur=<ms>`` header."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]
        start = time.perf_counter()

        async def send_status(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
                # Server-Timing: the time spent in this process before the response began (RFC: W3C Server Timing)
                elapsed = (time.perf_counter() - start) * 1000.0
                message = dict(message, headers=[*message.get("headers", []),
                                                 (b"server-timing", f"app;dur={elapsed:.3f}".encode())])
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.in_flight.dec()
            route = scope.get("route")
            # path_format: the template without converters ("/documents/{doc_id}", not "{doc_id:path}")
            name = getattr(route, "path_format", None) or getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            self.metrics.latency.labels(name, method).observe(time.perf_counter() - start)
            self.metrics.requests.labels(name, method, str(status[0])).inc()
            if status[0] == 503:
                self.metrics.rejected.labels(name).inc()
