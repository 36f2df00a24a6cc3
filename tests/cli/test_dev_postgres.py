"""``memoryscope-plugins dev-postgres`` (issue 42, item 10): a throw-away PostgreSQL + pgvector, started as a real
process, its DSN used by the command line's postgres backend, stopped cleanly by Ctrl-C with its data deleted;
run as root it refuses rather than add a system user, unless told which existing user to run the server as."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from memoryscope_plugins.bench.throwaway_postgres import PG_SYSTEM_USER, running_as_root
from tests.support.paths import console_script

ROOT_ONLY = "--as-user is for root only"


def _passwd() -> str:
    return Path("/etc/passwd").read_text(encoding="utf-8")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([console_script(), *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("as_user", [None, "no-such-user-for-memoryscope", "root"])
def test_it_never_adds_a_system_user_and_says_what_to_do(as_user):
    before = _passwd()
    if not running_as_root():  # as an ordinary user the server runs as you: no user to name
        done = _run("dev-postgres", "--as-user", as_user or PG_SYSTEM_USER)
        assert (done.returncode, done.stderr) == (2, f"error: {ROOT_ONLY}: without it the server runs as you\n")
        return
    done = _run("dev-postgres", *(["--as-user", as_user] if as_user else []))
    assert done.returncode == 2 and done.stdout == ""
    if as_user is None:
        assert done.stderr.startswith("error: PostgreSQL refuses to run as root") and "--as-user NAME" in done.stderr
    else:
        assert done.stderr.startswith("error: --as-user: ") and "never creates a system user" in done.stderr
    assert "useradd --system" in done.stderr  # what the operator can do
    assert _passwd() == before


def test_it_serves_the_postgres_backend_until_ctrl_c_then_deletes_its_data(tmp_path):
    as_user = ["--as-user", PG_SYSTEM_USER] if running_as_root() else []  # .ci/servers.sh makes that user
    server = subprocess.Popen([console_script(), "dev-postgres", *as_user], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stderr is not None
    try:
        dsn = server.stdout.readline().strip()
        said = server.stderr.readline()
        assert dsn.startswith("postgresql://postgres@127.0.0.1:") and dsn.endswith("/memoryscope"), said
        data = re.search(r"data in (\S+) ", said)
        assert data is not None and Path(data.group(1)).is_dir()
        env = {**os.environ, "MEMORYSCOPE_HOME": str(tmp_path / "home"), "MEMORYSCOPE_STORE__BACKEND": "postgres",
               "MEMORYSCOPE_STORE__URL": dsn}
        assert _run("add", "anna", "Anna keeps bees.", env=env).returncode == 0
        listed = _run("list", "anna", env=env)
        assert listed.returncode == 0 and "Anna keeps bees." in listed.stdout
    finally:
        server.send_signal(signal.SIGINT)
        status = server.wait(timeout=120)
    assert status == 0
    assert "stopped" in server.stderr.read()
    assert not Path(data.group(1)).exists()


def test_with_a_standby_its_dsn_serves_store_read_urls(tmp_path):
    """``--standby``: a second line with a streaming hot standby's DSN; the command line's postgres backend
    with it in ``store.read_urls`` writes to the primary and finds what it wrote."""
    import psycopg
    as_user = ["--as-user", PG_SYSTEM_USER] if running_as_root() else []
    server = subprocess.Popen([console_script(), "dev-postgres", "--standby", *as_user], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stderr is not None
    try:
        dsn, standby_dsn = server.stdout.readline().strip(), server.stdout.readline().strip()
        said = server.stderr.readline()
        assert standby_dsn.startswith("postgresql://postgres@127.0.0.1:") and standby_dsn != dsn, said
        assert "hot standby" in said and "READ_URLS" in said
        with psycopg.connect(standby_dsn) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            assert row is not None and row[0] is True
        env = {**os.environ, "MEMORYSCOPE_HOME": str(tmp_path / "home"), "MEMORYSCOPE_STORE__BACKEND": "postgres",
               "MEMORYSCOPE_STORE__URL": dsn, "MEMORYSCOPE_STORE__READ_URLS": f'["{standby_dsn}"]'}
        assert _run("add", "anna", "Anna keeps bees.", env=env).returncode == 0
        listed = _run("list", "anna", env=env)
        assert listed.returncode == 0 and "Anna keeps bees." in listed.stdout
    finally:
        server.send_signal(signal.SIGINT)
        status = server.wait(timeout=120)
    assert status == 0
