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
from dataclasses import dataclass, field

from ..settings import Settings
from .service import ConsolidationService, no_model_error

log = logging.getLogger("memoryscope_plugins.consolidation")


@dataclass(slots=True)
class WorkerResult:
    """What a worker run did: counts (`ConsolidationService.stats`) and tokens per user and operation."""

    stats: dict[str, int] = field(default_factory=dict)
    usage: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    drained: bool = True  # nothing was left pending when the worker stopped


def run_worker(settings: Settings, stop_event: threading.Event | None = None, *, once: bool = False,
               flush_on_stop: bool | None = None, engine=None) -> WorkerResult:
    """Consolidate in this thread until ``stop_event`` is set (or, with ``once``, until nothing is
    pending), then stop cleanly: the step in progress finishes and is committed.

    Args:
        settings: the engine settings (store, models, ``consolidation``); an LLM must be configured.
        stop_event: set it (e.g. from a signal handler) to stop.
        once: consolidate everything pending now, then return.
        flush_on_stop: consolidate what is still pending before returning (default
            ``consolidation.flush_on_close``).
        engine: an open `MemoryScope` to use instead of opening one from ``settings`` (left open).

    Raises:
        ConfigError: no LLM is configured.
    """
    from ..engine import MemoryScope

    owned = engine is None
    if engine is None:
        if settings.llm.provider == "none":
            raise no_model_error()
        engine = MemoryScope(settings, start_worker=False)
    service = getattr(engine, "_consolidation", None)
    made = service is None  # a service of our own (the engine has none), stopped here like an owned engine's
    try:
        if service is None:
            if engine.llm is None:
                raise no_model_error()
            service = ConsolidationService(engine)
        log.info("consolidation worker %s started", service.owner)
        result = WorkerResult()
        if once:
            result.drained = service.flush()
        else:
            service.run(stop_event or threading.Event())
            if flush_on_stop if flush_on_stop is not None else getattr(settings.consolidation, "flush_on_close",
                                                                       True):
                result.drained = service.flush(getattr(settings.consolidation, "close_timeout_s", 30.0))
            else:
                result.drained = not engine.store.users_with_pending()
        result.stats = service.stats()
        result.usage = service.usage.snapshot()
        log.info("consolidation worker %s stopped: %d messages, %d LLM calls", service.owner,
                 result.stats.get("messages", 0), result.stats.get("llm_calls", 0))
        return result
    finally:
        if service is not None and (owned or made):
            service.stop(flush=False)
        if owned:
            engine.close()
