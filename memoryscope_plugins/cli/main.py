"""The `memoryscope-plugins` command line: demo, chat, admin, parse-time, the benchmarks, the worker
and the server. Each group of commands lives in its own module, its handlers beside its parser."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from ..errors import MemoryScopeError
from . import admin, bench, first_run, worker


def build_parser() -> argparse.ArgumentParser:
    from ..server.cli import add_parser as add_serve_parser
    parser = argparse.ArgumentParser(prog="memoryscope-plugins",
                                     description="Long-term memory for LLM agents: demo, chat, admin, benchmark.")
    parser.add_argument("--config", help="YAML settings file (also $MEMORYSCOPE_CONFIG)")
    parser.add_argument("--store", help="SQLite store file (default ~/.memoryscope/memory.db)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    first_run.add_parsers(sub)
    bench.add_parsers(sub)
    admin.add_memory_parsers(sub)
    worker.add_parser(sub)
    add_serve_parser(sub)
    admin.add_user_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except MemoryScopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
