"""The `memoryscope-plugins` command line: demo, chat, admin, parse-time, the benchmarks, the worker
and the server. Each group of commands lives in its own module, its handlers beside its parser."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from ..errors import MemoryScopeError
from ..log_format import configure_logging
from . import admin, bench, dev_postgres, first_run, migrate, person, procedures, tools, worker
from .engine_args import CommandGroup, add_shared_options


def build_parser() -> argparse.ArgumentParser:
    from ..server.cli import add_parser as add_serve_parser
    parser = argparse.ArgumentParser(prog="memoryscope-plugins",
                                     description="Long-term memory for LLM agents: demo, chat, admin, benchmark.")
    add_shared_options(parser)
    sub = CommandGroup(parser.add_subparsers(dest="command", required=True))
    first_run.add_parsers(sub)
    bench.add_parsers(sub)
    admin.add_memory_parsers(sub)
    worker.add_parser(sub)
    add_serve_parser(sub)
    admin.add_user_parsers(sub)
    person.add_parsers(sub)
    tools.add_parser(sub)
    procedures.add_parsers(sub)
    migrate.add_parser(sub)
    dev_postgres.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.log_format)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at exit where Python would print a traceback
        return code
    except MemoryScopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """The reader of standard output left (``retrieve --json | head``): stop quietly, as ``cat`` does.
    What is still buffered goes to /dev/null, so flushing at exit raises nothing either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # standard output replaced by an object without a file descriptor
        pass
    return 141  # 128 + SIGPIPE: what a shell shows for a process a broken pipe ended


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
