"""Prometheus metrics for ``serve`` and ``worker``, through prometheus-client (the [server] extra).

`PrometheusRecorder` receives what the engine counts (`memoryscope_plugins.metrics`); `StoreCollector`
reads the store's counts (`storage.overview`) at scrape time; `RequestMetricsMiddleware` counts the
HTTP requests by route template. `scrape_registry` puts them together for one engine: served on
``/metrics`` (admin key) and, with ``--metrics-port``, on a bind address of its own without a key.

Multi-process: when ``PROMETHEUS_MULTIPROC_DIR`` is set (before the process starts), every process
writes its counters to files there and a scrape sums the files of all processes (prometheus-client's
multiprocess mode), so instances and workers on one host behind one scrape add up. The store's
gauges are read from the store itself, and so are the same from every process.

No label holds a user id, a memory text or a key: routes are templates (``/v1/users/{user_id}/...``),
the other labels are words from fixed sets or configured model names.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route

from .. import metrics
from ..storage import read_consistency
from ..storage.overview import store_overview
from .route_support import admin_key

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
STAGES = ("parse", "embed", "search", "rank", "rerank", "context", "total")  # RetrievalResult.timings_ms
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)  # retrieval, requests
_SLOW = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)  # model requests


class PrometheusRecorder(metrics.Recorder):
    """The engine's counts as prometheus-client metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.http_requests = Counter("memoryscope_http_requests", "HTTP requests answered, by route template, "
                                     "method and status", ["route", "method", "status"], registry=r)
        self.http_seconds = Histogram("memoryscope_http_request_duration_seconds", "HTTP request latency by "
                                      "route template", ["route", "method"], buckets=_FAST, registry=r)
        self.stage_seconds = Histogram("memoryscope_retrieval_stage_seconds", "retrieval latency per stage "
                                       "(total: the whole retrieval)", ["stage"], buckets=_FAST, registry=r)
        self.model_requests = Counter("memoryscope_model_requests", "requests sent to remote models; outcome: ok, "
                                      "retried (failed, tried again), failed (failed, given up)",
                                      ["purpose", "model", "outcome"], registry=r)
        self.model_failures = Counter("memoryscope_model_request_failures", "failed model requests by reason",
                                      ["purpose", "model", "reason"], registry=r)
        self.model_seconds = Histogram("memoryscope_model_request_duration_seconds", "model request latency",
                                       ["purpose", "model"], buckets=_SLOW, registry=r)
        self.tokens = Counter("memoryscope_model_tokens", "tokens of chat completions; kind: prompt or "
                              "completion", ["purpose", "model", "kind"], registry=r)
        self.steps = Counter("memoryscope_consolidation_steps", "consolidation steps by outcome", ["outcome"],
                             registry=r)
        self.leases = Counter("memoryscope_consolidation_leases", "consolidation lease events: acquired, busy "
                              "(held by another worker), lost (taken over during a step)", ["event"], registry=r)
        self.store_errors = Counter("memoryscope_store_errors", "store failures by where they were seen and "
                                    "their class", ["component", "error"], registry=r)
        self.replica_states = Counter("memoryscope_read_standby_states", "read standbys (store.read_urls, by "
                                      "number) entering a state: ok, down, lagging, not_standby", ["standby", "state"],
                                      registry=r)
        self.routed_reads = Counter("memoryscope_routed_reads", "reads that may go to a read standby, by who "
                                    "served them (standby, primary) and why the primary did (no_standby, "
                                    "not_replayed, behind_index, standby_failed, recovery_conflict, "
                                    "standby_error)",
                                    ["served_by", "reason"], registry=r)

    def model_request(self, purpose: str, model: str, outcome: str, reason: str, seconds: float) -> None:
        self.model_requests.labels(purpose, model, outcome).inc()
        self.model_seconds.labels(purpose, model).observe(seconds)
        if reason:
            self.model_failures.labels(purpose, model, reason).inc()

    def model_tokens(self, purpose: str, model: str, prompt: int, completion: int) -> None:
        self.tokens.labels(purpose, model, "prompt").inc(prompt)
        self.tokens.labels(purpose, model, "completion").inc(completion)

    def retrieval(self, timings_ms: Mapping[str, float]) -> None:
        for stage in STAGES:
            value = timings_ms.get(f"{stage}_ms")
            if value is not None:
                self.stage_seconds.labels(stage).observe(value / 1000.0)

    def consolidation_step(self, outcome: str) -> None:
        self.steps.labels(outcome).inc()

    def lease(self, event: str) -> None:
        self.leases.labels(event).inc()

    def store_error(self, component: str, error: str) -> None:
        self.store_errors.labels(component, error).inc()

    def replica_state(self, standby: str, state: str) -> None:
        self.replica_states.labels(standby, state).inc()

    def routed_read(self, served_by: str, reason: str) -> None:
        self.routed_reads.labels(served_by, reason).inc()

    def http_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.http_requests.labels(route, method, str(status)).inc()
        self.http_seconds.labels(route, method).observe(seconds)


_lock = threading.Lock()
_installed: PrometheusRecorder | None = None


def ensure_recorder() -> PrometheusRecorder:
    """The process's `PrometheusRecorder`, installed as the engine's recorder on first use."""
    global _installed
    with _lock:
        if _installed is None:
            _installed = PrometheusRecorder()
            metrics.install(_installed)
        return _installed


class StoreCollector:
    """The store's counts as gauges, read when scraped (`storage.overview`). A failed read gives
    ``memoryscope_store_up 0`` and no other store gauge, never a failed scrape."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("memoryscope_store_up", "1 when the store answered this scrape's queries")
        try:
            with read_consistency.reads_from("replica"):  # a standby's counts when there is one
                overview = store_overview(self.store)
        except Exception:  # noqa: BLE001 - the store being down is what this gauge says
            metrics.recorder().store_error("metrics", "overview_failed")
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        pending = GaugeMetricFamily("memoryscope_pending_messages", "messages waiting for consolidation")
        pending.add_metric([], overview.pending)
        yield pending
        age = GaugeMetricFamily("memoryscope_oldest_pending_age_seconds", "age of the first message still "
                                "pending (the consolidation lag; 0 when none is pending)")
        age.add_metric([], overview.oldest_pending_age_s(datetime.now(timezone.utc)))
        yield age
        yield _family("memoryscope_messages", "logged messages by state", ["state"],
                      [((state,), n) for state, n in overview.messages.items()])
        users = GaugeMetricFamily("memoryscope_users", "users with memories or messages")
        users.add_metric([], overview.users)
        yield users
        yield _family("memoryscope_memories", "memories by type and status", ["type", "status"],
                      [((kind, status), n) for (kind, status), n in overview.memories.items()])


def _family(name: str, documentation: str, labels: list[str],
            samples: Iterable[tuple[tuple[str, ...], float]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


class _Forward:
    """A registry's metrics, as a collector of another registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        return iter(self.registry.collect())


def multiprocess_dir() -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR`` when set (prometheus-client's multiprocess mode)."""
    return os.environ.get(MULTIPROC_ENV) or None


def scrape_registry(store: Any) -> CollectorRegistry:
    """What a scrape shows: this process's counters (every process's, in multiprocess mode) and the
    gauges of `store`."""
    recorder = ensure_recorder()
    registry = CollectorRegistry()
    if multiprocess_dir():
        MultiProcessCollector(registry)
    else:
        registry.register(_Forward(recorder.registry))
    registry.register(StoreCollector(store))
    return registry


def metrics_route(store: Any) -> Route:
    """``GET /metrics`` for an admin key (the guard has authenticated the request)."""
    registry = scrape_registry(store)

    def scrape(request: Request) -> Response:
        admin_key(request)
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return Route("/metrics", scrape, methods=["GET"], include_in_schema=False)


def serve_metrics(store: Any, host: str, port: int) -> Any:
    """Serve the scrape on ``http://host:port/metrics`` (any path, in fact) from a daemon thread, without a
    key: bind it where only the scraper reaches. Returns the WSGI server (``shutdown()`` stops it)."""
    from prometheus_client import start_http_server
    server, _thread = start_http_server(port, addr=host, registry=scrape_registry(store))
    return server


class RequestMetricsMiddleware:
    """Counts every HTTP request (answered or refused) by route template, method and status."""

    def __init__(self, app, routes: list[BaseRoute]) -> None:
        self.app = app
        self.routes = routes
        self.recorder = ensure_recorder()

    def route_of(self, scope) -> str:
        """The template of the route the request matched (the one it would match but for its method,
        for a 405), else ``unmatched``."""
        partial = None
        for route in self.routes:
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return getattr(route, "path", "other")
            if match == Match.PARTIAL and partial is None:
                partial = getattr(route, "path", "other")
        return partial or "unmatched"

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets when the app raises before answering

        async def send_status(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            method = scope.get("method", "")
            self.recorder.http_request(self.route_of(scope), method if method in METHODS else "other", status,
                                       time.perf_counter() - started)
