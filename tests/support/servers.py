"""Throw-away database servers for the store tests.

- PostgreSQL 18 + pgvector: `memoryscope_plugins.bench.throwaway_postgres` (shared with the
  benchmarks), re-exported here; `standby_server(primary)` adds a streaming hot standby of it.
- Elasticsearch: when ``MEMORYSCOPE_TEST_ES_URL`` is set, that real server; otherwise the
  ``noida-db`` PyPI package, a single binary that *emulates* the Elasticsearch 8.15 REST API, started
  on 127.0.0.1 and a free port and stopped by its PID.

Each helper raises `ServerUnavailable` with a reason when the server cannot start here; test
fixtures turn that into a skip (a failure under CI=true: tests/support/ci_no_skips.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from memoryscope_plugins.bench.throwaway_postgres import (  # noqa: F401 - the store tests' names
    PostgresServer,
    ServerUnavailable,
    free_port,
    postgres_server,
    standby_server,
)

ES_URL_ENV = "MEMORYSCOPE_TEST_ES_URL"
PG_PARTITIONS_ENV = "MEMORYSCOPE_TEST_PG_PARTITIONS"


def pg_partitions() -> int | None:
    """The layout of the PostgreSQL stores of the search and user-index tests: None (a new store is
    unpartitioned), or the number in MEMORYSCOPE_TEST_PG_PARTITIONS (to run them on the partitioned
    layout; the store contract runs on both in every run)."""
    value = os.environ.get(PG_PARTITIONS_ENV, "").strip()
    return int(value) if value else None


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
