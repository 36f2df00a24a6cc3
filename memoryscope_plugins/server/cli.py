"""``memoryscope-plugins serve``: the HTTP API, MCP (streamable HTTP or stdio) and the memory browser."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from ..cli.engine_args import add_metrics_options

DEFAULT_PORT = 8765


def default_keys_file() -> Path:
    """$MEMORYSCOPE_SERVER_KEYS, else server-keys.json in the store's home ($MEMORYSCOPE_HOME or ~/.memoryscope)."""
    from ..settings import default_home
    return Path(os.environ.get("MEMORYSCOPE_SERVER_KEYS", default_home() / "server-keys.json"))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``serve`` command to the CLI's subparsers."""
    p = subparsers.add_parser("serve", help="HTTP API + MCP server + memory browser (needs the [server] extra)",
                              description="Serve memory over HTTP (/v1, /mcp, the browser at /). Keys are kept "
                                          "hashed in --keys; the first start creates an admin key and prints it once.")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--keys", type=Path, default=None,
                   help="key file (default $MEMORYSCOPE_SERVER_KEYS, else server-keys.json in $MEMORYSCOPE_HOME, "
                        "else in ~/.memoryscope)")
    p.add_argument("--create-key", metavar="TENANT", help="create a key for TENANT, print it once, and exit")
    p.add_argument("--revoke-key", metavar="KEY_OR_HASH",
                   help="remove a key (the key itself, its hash, or 8+ leading characters of its hash, as "
                        "--list-keys shows) and exit; running servers stop accepting it within ~1 s")
    p.add_argument("--list-keys", action="store_true", help="list the keys (hash prefix, tenant, users, admin)")
    p.add_argument("--key-user", action="append", default=[],
                   help="with --create-key: bind the key to this user (repeat for several; default: every "
                        "user of the tenant)")
    p.add_argument("--admin", action="store_true", help="with --create-key: an admin key (default: not admin)")
    p.add_argument("--cors-origin", action="append", default=[],
                   help="allow browser calls from this origin (repeat for several; default: none, CORS off)")
    p.add_argument("--max-body", type=int, default=1 << 20,
                   help="largest request body in bytes (default %(default)s, 1 MiB)")
    p.add_argument("--rate", type=float, default=20.0,
                   help="requests per second per key, 0 for no limit (default %(default)g)")
    p.add_argument("--burst", type=int, default=40, help="burst size of the rate limit (default %(default)s)")
    p.add_argument("--allowed-host", action="append", default=[],
                   help="a Host header the server answers (every route); repeat for several. Default: localhost, "
                        "127.0.0.1, [::1] and --host. 'name' allows any port, 'name:443' one port, '*' any host "
                        "(only behind a proxy that checks Host itself)")
    p.add_argument("--auth-failure-rate", type=float, default=1.0,
                   help="failed authentications per second allowed per client address and per unknown key, "
                        "after the burst (0: no limit; a valid key is never held back by it)")
    p.add_argument("--auth-failure-burst", type=int, default=20, help="burst size of the failure limit")
    p.add_argument("--forwarded-allow-ips", action="append", default=[], metavar="ADDRESSES",
                   help="comma-separated addresses or networks of trusted reverse proxies (or '*'): only from "
                        "them is X-Forwarded-For (the client's address, for the failed-authentication limit) and "
                        "X-Forwarded-Proto believed. Default: none")
    add_metrics_options(p, "also serve Prometheus metrics on this port, without a key (default: off; /metrics "
                           "on --port is always there for an admin key)")
    p.add_argument("--stdio", action="store_true", help="serve MCP over stdio for one --tenant/--user instead")
    p.add_argument("--tenant", default="default", help="with --stdio: the tenant (default '%(default)s')")
    p.add_argument("--user", help="with --stdio: the user the tools act on")
    p.set_defaults(func=cmd_serve)
    return p


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from .app import ServerConfig, create_app
        from .auth import KeyRing
        from .mcp_tools import build_mcp
        from .peers import TrustedProxies
    except ImportError as exc:
        print(f"error: serve needs: pip install 'memoryscope-plugins[server]' ({exc.name} is missing)",
              file=sys.stderr)
        return 1
    from ..cli.engine_args import engine_from_args as _engine

    if (args.key_user or args.admin) and args.create_key is None:
        print("error: --key-user and --admin describe a new key: give them with --create-key TENANT", file=sys.stderr)
        return 2
    keys_file = args.keys or default_keys_file()
    if args.create_key is not None:  # "" is a (refused) tenant name, not "no --create-key"
        ring = KeyRing.load(keys_file)
        key = ring.create(args.create_key, users=tuple(args.key_user), admin=args.admin)
        ring.save(keys_file)
        print(key)
        return 0
    if args.revoke_key is not None:
        ring = KeyRing.load(keys_file)
        removed = ring.revoke(args.revoke_key)
        if not removed:
            print("error: no single key matches (give the key, its hash, or 8+ leading characters of the hash "
                  "that match one key; see --list-keys)", file=sys.stderr)
            return 1
        ring.save(keys_file)
        print(f"revoked {removed[0].key_hash[:12]} (tenant {removed[0].tenant})", file=sys.stderr)
        return 0
    if args.list_keys:
        for item in KeyRing.load(keys_file).keys:
            users = ",".join(item.users) or "*"
            print(f"{item.key_hash[:12]}  tenant={item.tenant}  users={users}  admin={item.admin}  {item.name}")
        return 0
    if args.stdio:
        if not args.user:
            print("error: --stdio needs --user", file=sys.stderr)
            return 2
        with _engine(args) as engine:
            engine.warm_up()
            mcp = build_mcp(engine, fixed_user=(args.tenant, args.user))
            with _stdio_kept_open():
                mcp.run("stdio")
        return 0

    import uvicorn

    from .pipeline import scrub_log_records
    try:
        TrustedProxies(args.forwarded_allow_ips)
    except ValueError as exc:
        print(f"error: --forwarded-allow-ips: {exc}", file=sys.stderr)
        return 2
    config = ServerConfig(max_body_bytes=args.max_body, rate_per_second=args.rate, rate_burst=args.burst,
                          cors_origins=args.cors_origin, allowed_hosts=args.allowed_host or None,
                          bind_host=args.host, forwarded_allow_ips=args.forwarded_allow_ips,
                          auth_failure_rate=args.auth_failure_rate, auth_failure_burst=args.auth_failure_burst)
    scrub_log_records()  # no traceback, no raw control character in any log line of this process
    # the engine first: the models are built and the store opened, so a setting that cannot work is the
    # "error:" line of ConfigError or StoreError before anything is created or said to run
    with _engine(args) as engine:
        if args.metrics_port is not None and not _serve_metrics(engine, args):
            return 1
        ring = _key_ring(keys_file)
        engine.warm_up()  # the first retrieval's one-time work, before the first request
        app = create_app(engine, ring, config)
        server = _make_server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                                             access_log=False, proxy_headers=False),  # forwarded: see peers.py
                              announce=f"serving on http://{args.host}:{args.port}/ (browser), /v1 (API), "
                                       "/mcp (MCP)")
        server.run()
        # leaving the block stops the worker and closes the store (SQLite checkpoints and removes its WAL)
    if not server.started:
        return 1
    print("stopped", file=sys.stderr)
    return 0


@contextlib.contextmanager
def _stdio_kept_open():
    """Standard input and output for the MCP SDK's stdio transport, which closes the streams it wraps when
    the session ends (python-sdk issue 1933): it gets copies that do not own descriptors 0 and 1, so the
    process's own `sys.stdin`/`sys.stdout` stay open and the command ends without a traceback."""
    kept = sys.stdin, sys.stdout
    sys.stdout.flush()
    sys.stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
    sys.stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", closefd=False)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):  # the client may have closed its end
            sys.stdout.flush()
        sys.stdin, sys.stdout = kept


def _key_ring(keys_file: Path):
    """The keys of `keys_file`; on the first start (no key yet) an admin key for tenant 'default' is made,
    stored hashed and printed once."""
    from .auth import KeyRing
    ring = KeyRing.load(keys_file)
    if not ring.keys:
        key = ring.create("default", admin=True, name="first start")
        ring.save(keys_file)
        print(f"created an admin key for tenant 'default' (stored hashed in {keys_file}); it is shown once:\n"
              f"  {key}", file=sys.stderr)
    return ring


def _serve_metrics(engine, args: argparse.Namespace) -> bool:
    """Start the keyless metrics listener of ``--metrics-port``; False (said on stderr) when it cannot bind."""
    from .metrics import serve_metrics
    try:
        serve_metrics(engine.store, args.metrics_host, args.metrics_port)
    except OSError as exc:
        print(f"error: --metrics-port {args.metrics_port} on {args.metrics_host}: {exc.strerror or exc}",
              file=sys.stderr)
        return False
    print(f"metrics on http://{args.metrics_host}:{args.metrics_port}/metrics (no key)", file=sys.stderr)
    return True


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that SIGTERM/SIGINT only stop it: uvicorn re-raises the signal after
        its shutdown, which would kill the process before the engine is closed (exit -15, WAL left)."""

        announce = ""  # printed once the server listens

        @contextlib.contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

        async def startup(self, sockets=None):
            await super().startup(sockets=sockets)
            if self.started and self.announce:  # listening now: a script waiting for the line can connect
                print(self.announce, file=sys.stderr, flush=True)

    return Server


def _make_server(config, announce: str = ""):
    """uvicorn.Server with clean signal handling that prints `announce` once it listens (the class is made
    on first use: the CLI imports without uvicorn)."""
    server = _server_class()(config)
    server.announce = announce
    return server
