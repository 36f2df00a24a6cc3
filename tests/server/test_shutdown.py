"""Issue 20, item 6: SIGTERM and SIGINT stop a real `serve` process cleanly (exit 0, the store closed with its
WAL checkpointed away) and no acknowledged write is lost across a SIGTERM restart under load. The load run is
bench/load_server.py --durability (8 clients for 60 s there); here a short one keeps CI fast."""

from __future__ import annotations

import importlib.util
import signal

import httpx
import pytest

pytest.importorskip("uvicorn", reason="the [server] extra is not installed")

from tests.support.paths import ROOT  # noqa: E402
from tests.support.server_harness import ServeProcess  # noqa: E402

BENCH = ROOT / "bench" / "load_server.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("load_server_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sigterm_restart_under_load_loses_no_acknowledged_write():
    result = load_bench().durability(clients=3, seconds=3.0, restart_at=1.5)
    assert result["acknowledged_before_restart"] > 0  # the SIGTERM came mid-load ...
    assert result["acknowledged"] > result["acknowledged_before_restart"]  # ... and the restart served writes
    assert result["lost"] == 0
    assert result["exit_codes"] == [0, 0, 0]  # SIGTERM, SIGTERM, SIGINT
    assert result["wal_bytes_after_stop"] == [0, 0, 0]
    assert result["tracebacks_in_log"] == 0
    assert result["ok"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_closes_the_store(tmp_path, sig):
    proc = ServeProcess(tmp_path)
    key = proc.create_key("acme", "--admin")
    proc.start()
    ids = []
    with httpx.Client(base_url=proc.url, headers={"X-API-Key": key}, timeout=60) as http:
        for i in range(20):
            ids.append(http.post("/v1/users/anna/memories", json={"content": f"Fact {i} about Anna."}).json()["id"])
    wal = proc.store.with_name("memory.db-wal")
    assert wal.exists() and wal.stat().st_size > 0  # the writes sit in the WAL while the server runs
    assert proc.stop(sig) == 0
    assert not wal.exists() or wal.stat().st_size == 0
    assert "stopped" in proc.log_text()
    from memoryscope_plugins.storage.sqlite_store import SQLiteStore
    store = SQLiteStore(proc.store)
    try:
        assert {m.id for batch in store.iter_memories("acme:anna") for m in batch} == set(ids)
    finally:
        store.close()
