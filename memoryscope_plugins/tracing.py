"""Optional OpenTelemetry traces: spans around every retrieval (one child span per stage) and every request
to a remote model, through the OpenTelemetry API only (``pip install 'memoryscope-plugins[otel]'``).

Off by default: `settings.traces` turns them on (`enable`, called by `MemoryScope`). The spans go to the
tracer provider the application configured (an SDK with an exporter, e.g. OTLP); with none configured the
API's own no-op provider drops them. Attributes are counts, stage names, purposes and configured model
names: never a user id, a text or a key.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator, Mapping

from .errors import ConfigError

_tracer: Any = None  # an opentelemetry Tracer once enabled
STAGES = ("parse", "embed", "search", "rank", "rerank", "context")  # in the order the pipeline runs them


def enable(tracer_provider: Any = None) -> None:
    """Start making spans (from the global tracer provider, or `tracer_provider`)."""
    global _tracer
    try:
        from opentelemetry import trace
    except ImportError:
        raise ConfigError("settings.traces needs the OpenTelemetry API: pip install 'memoryscope-plugins[otel]'") \
            from None
    _tracer = trace.get_tracer("memoryscope_plugins", tracer_provider=tracer_provider)


def disable() -> None:
    """Stop making spans."""
    global _tracer
    _tracer = None


def enabled() -> bool:
    return _tracer is not None


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, *, since: float | None = None) -> Iterator[Any]:
    """A span named `name` around the block when traces are on (yields it, else None); `since`: a
    ``time.perf_counter()`` reading the span starts at instead of now. An exception sets the span's status
    to error, and is not recorded (its message may quote what a user wrote)."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace import Status, StatusCode
    started = None if since is None else time.time_ns() - int((time.perf_counter() - since) * 1e9)
    with _tracer.start_as_current_span(name, attributes=dict(attributes or {}), start_time=started,
                                       record_exception=False, set_status_on_exception=False) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_status(Status(StatusCode.ERROR))
            current.set_attribute("memoryscope.error", type(exc).__name__)
            raise


def retrieval_stages(timings_ms: Mapping[str, float], ended_ns: int | None = None) -> None:
    """One child span per retrieval stage of the current span, placed in time from the stage timings (the
    pipeline times its stages one after the other; the spans are made afterwards, ending at `ended_ns`)."""
    if _tracer is None:
        return
    end = ended_ns if ended_ns is not None else time.time_ns()
    start = end - int(timings_ms.get("total_ms", 0.0) * 1e6)
    for stage in STAGES:
        took = timings_ms.get(f"{stage}_ms")
        if took is None:
            continue
        stage_end = min(end, start + int(took * 1e6))
        _tracer.start_span(f"memoryscope.retrieve.{stage}", start_time=start,
                           attributes={"memoryscope.stage": stage}).end(end_time=stage_end)
        start = stage_end
