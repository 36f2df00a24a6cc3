"""Consolidation as its own process: ``memoryscope-plugins worker`` or `run_worker` from code.

Run one worker process next to applications that record with ``consolidation.worker: none``:
the applications only log messages (fast, no LLM on their path); the worker sweeps the store
every ``consolidation.every_seconds`` and consolidates whatever is pending. Several workers (or
a worker and an engine with its own thread) can share a store: the per-user lease in the store
keeps each user's work in one place at a time.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from ..settings import Settings
from .report import ConsolidationReport
from .service import ConsolidationService, no_model_error

log = logging.getLogger("memoryscope_plugins.consolidation")


@dataclass(slots=True)
class WorkerResult:
    """What a worker run did, in counts (and the token use per user and operation)."""

    report: ConsolidationReport
    usage: dict[str, dict[str, dict[str, int]]]


def run_worker(settings: Settings, stop_event: threading.Event | None = None, *, once: bool = False,
               flush_on_stop: bool | None = None, engine=None) -> WorkerResult:
    """Consolidate in this thread until ``stop_event`` is set (or, with ``once``, until nothing is
    pending), then stop cleanly: the step in progress finishes and is committed.

    Args:
        settings: the engine settings (store, models, ``consolidation``); an LLM must be configured.
        stop_event: set it (e.g. from a signal handler) to stop.
        once: consolidate everything pending now, then return.
        flush_on_stop: consolidate what is pending before returning (default
            ``consolidation.flush_on_close``).
        engine: an open `MemoryScope` to use instead of opening one from ``settings`` (not closed).

    Raises:
        ConfigError: no LLM is configured.
    """
    from ..engine import MemoryScope

    owned = engine is None
    if engine is None:
        if settings.llm.provider == "none":
            raise no_model_error()
        engine = MemoryScope(settings, start_worker=False)
    try:
        service = getattr(engine, "_consolidation", None)
        if service is None:
            if engine.llm is None:
                raise no_model_error()
            service = ConsolidationService(engine)
        log.info("consolidation worker %s started", service.owner)
        if once:
            service.flush()
            report = ConsolidationReport()
        else:
            event = stop_event or threading.Event()
            service.run(event)
            report = ConsolidationReport()
            if flush_on_stop if flush_on_stop is not None else getattr(settings.consolidation, "flush_on_close", True):
                service.flush(getattr(settings.consolidation, "close_timeout_s", 30.0))
        usage = service.usage.snapshot()
        for per_user in usage.values():
            for counts in per_user.values():
                report.prompt_tokens += counts["prompt_tokens"]
                report.completion_tokens += counts["completion_tokens"]
        log.info("consolidation worker %s stopped", service.owner)
        return WorkerResult(report=report, usage=usage)
    finally:
        if owned:
            engine.close()
