"""``memoryscope-plugins worker``: run consolidation as its own process (Ctrl-C / SIGTERM stop it cleanly)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from .engine_args import settings_from_args
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
    parser.set_defaults(func=cmd_worker)
    return parser


def _load_settings(args: argparse.Namespace):
    """The shared ``--config``/``--store`` settings, with ``--interval`` as the sweep interval."""
    settings = settings_from_args(args)
    if args.interval is not None:
        settings = settings.model_copy(update={"consolidation": settings.consolidation.model_copy(
            update={"every_seconds": args.interval})})
    return settings


def cmd_worker(args: argparse.Namespace) -> int:
    """Run the worker until Ctrl-C / SIGTERM (or, with --once, until nothing is pending)."""
    from ..consolidation.worker import run_worker
    from ..errors import ConfigError

    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        settings = _load_settings(args)
        if not args.once:
            print(f"consolidation worker running (sweep every {settings.consolidation.every_seconds:g} s); "
                  "Ctrl-C to stop", file=sys.stderr)
        result = run_worker(settings, stop, once=args.once, flush_on_stop=False if args.no_flush else None)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
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
