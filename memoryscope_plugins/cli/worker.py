"""``memoryscope-plugins worker``: run consolidation as its own process (Ctrl-C / SIGTERM stop it cleanly)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any

from .engine_args import add_metrics_options, settings_from_args
from .wording import count_of


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``worker`` command to the CLI's subparsers and return its parser."""
    parser = subparsers.add_parser(
        "worker", help="consolidate recorded messages in the background, as its own process",
        description="Consolidate pending messages (LLM: observations, conflicts, insights) until stopped. "
                    "Use with consolidation.worker: none in the applications that record.")
    parser.add_argument("--once", action="store_true", help="consolidate everything pending, then exit")
    parser.add_argument("--interval", type=float, default=None,
                        help="seconds between sweeps for pending work (default consolidation.every_seconds)")
    parser.add_argument("--no-flush", action="store_true", help="on stop, leave pending messages for next time")
    parser.add_argument("--json", action="store_true", help="print the final counts as JSON")
    add_metrics_options(parser, "serve Prometheus metrics (model calls, consolidation steps, leases, the queue) on "
                                "this port, without a key (default: off; needs the [server] extra)")
    parser.set_defaults(func=cmd_worker)
    return parser


def _load_settings(args: argparse.Namespace):
    """The shared ``--config``/``--store`` settings, with ``--interval`` as the sweep interval."""
    settings = settings_from_args(args)
    if args.interval is not None:
        settings = settings.model_copy(update={"consolidation": settings.consolidation.model_copy(
            update={"every_seconds": args.interval})})
    return settings


def _run(args: argparse.Namespace, settings, stop: threading.Event):
    """Open the engine (the models built, the store opened: a setting that cannot work fails here, as the
    ``error:`` line of `ConfigError` or `StoreError`, before the worker says it runs), then run the worker,
    with the metrics listener of ``--metrics-port`` beside it. None: the listener could not start."""
    from ..consolidation.service import no_model_error
    from ..consolidation.worker import run_worker
    from ..engine import MemoryScope
    if args.metrics_port is not None or os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        try:
            from ..server.metrics import ensure_recorder
        except ImportError as exc:
            print(f"error: metrics need: pip install 'memoryscope-plugins[server]' ({exc.name} is missing)",
                  file=sys.stderr)
            return None
        ensure_recorder()  # also what the files of PROMETHEUS_MULTIPROC_DIR, read by a scrape elsewhere, need
    if settings.llm.provider == "none":
        raise no_model_error()
    with MemoryScope(settings, start_worker=False) as engine:
        listener = _metrics_listener(engine, args)
        if listener is False:
            return None
        if not args.once:
            print(f"consolidation worker running (sweep every {settings.consolidation.every_seconds:g} s); "
                  "Ctrl-C to stop", file=sys.stderr)
        try:
            return run_worker(settings, stop, once=args.once, flush_on_stop=False if args.no_flush else None,
                              engine=engine)
        finally:
            if listener is not None:
                listener.shutdown()


def _metrics_listener(engine, args: argparse.Namespace):
    """The keyless scrape of ``--metrics-port`` (None without the option; False, said on stderr, when the
    port cannot be bound)."""
    if args.metrics_port is None:
        return None
    from ..server.metrics import serve_metrics
    try:
        listener = serve_metrics(engine.store, args.metrics_host, args.metrics_port)
    except OSError as exc:
        print(f"error: --metrics-port {args.metrics_port}: {exc.strerror or exc}", file=sys.stderr)
        return False
    print(f"metrics on http://{args.metrics_host}:{args.metrics_port}/metrics (no key)", file=sys.stderr)
    return listener


def cmd_worker(args: argparse.Namespace) -> int:
    """Run the worker until Ctrl-C / SIGTERM (or, with --once, until nothing is pending). A setting that
    cannot work raises before the worker runs (the ``error:`` line and exit status 1 of every command)."""
    settings = _load_settings(args)
    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        result = _run(args, settings, stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if result is None:
        return 1
    if args.json:
        print(json.dumps({"stats": result.stats, "usage": result.usage, "drained": result.drained}))
    else:
        stats = result.stats
        print(f"consolidated {count_of(stats.get('messages', 0), 'message')}: "
              f"{count_of(stats.get('added', 0), 'observation')} added, "
              f"{stats.get('merged', 0)} merged, {stats.get('expired', 0)} expired, "
              f"{count_of(stats.get('insights', 0), 'insight')}; {count_of(stats.get('llm_calls', 0), 'LLM call')}, "
              f"{stats.get('prompt_tokens', 0)}+{stats.get('completion_tokens', 0)} tokens"
              + ("" if result.drained else " (messages still pending)"))
    return 0
