"""Issue 29 item 6 without a server: ``memoryscope-plugins stats`` prints the store's counts (what /metrics shows
as gauges), and a ``worker`` exposes its counters on --metrics-port, or through PROMETHEUS_MULTIPROC_DIR to a
scrape made by another process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from memoryscope_plugins.cli.main import main
from tests.support.server_harness import free_port

SECRET_TEXT = "Anna hides the spare key under the blue flowerpot"


def seed(path, embedder) -> None:
    from memoryscope_plugins import MemoryScope
    from memoryscope_plugins.types import Memory, MemoryStatus, MemoryType
    with MemoryScope(path=path, embedder=embedder) as engine:
        old = datetime.now(timezone.utc) - timedelta(hours=2)
        engine.record("anna", [{"role": "user", "content": SECRET_TEXT, "timestamp": old.isoformat()},
                               {"role": "assistant", "content": "Noted."}])
        engine.add("bob", "Bob likes tea.")
        engine.store.put([Memory(id="o1", user_id="bob", agent_id="assistant", content="Bob drinks tea.",
                                 type=MemoryType.OBSERVATION, status=MemoryStatus.EXPIRED)], None)


def test_stats_prints_the_stores_counts(tmp_path, local_embedder, capsys):
    store = tmp_path / "memory.db"
    seed(store, local_embedder)
    assert main(["--store", str(store), "stats", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["users"] == 2
    assert data["messages"] == {"pending": 2, "done": 0, "failed": 0} and data["pending"] == 2
    assert 7199 < data["oldest_pending_age_s"] < 9000  # two hours, and the time this test took
    assert data["memories"] == {"turn": 2, "custom": 1, "observation": 1}
    assert data["memories_by_status"]["observation/expired"] == 1

    assert main(["stats", "--store", str(store)]) == 0
    text = capsys.readouterr().out
    assert "users: 2" in text and "messages: 2 pending, 0 done, 0 failed" in text
    assert "oldest pending: 7" in text  # 7200 s and some
    assert "turn memories: 2 (2 active)" in text and "observation memories: 1 (1 expired)" in text
    assert SECRET_TEXT not in text and "anna" not in text


def test_stats_of_an_empty_store(tmp_path, capsys):
    from memoryscope_plugins.storage.sqlite_store import SQLiteStore
    SQLiteStore(tmp_path / "new.db").close()
    assert main(["--store", str(tmp_path / "new.db"), "stats"]) == 0
    out = capsys.readouterr().out
    assert "users: 0" in out and "messages: 0 pending, 0 done, 0 failed" in out and "oldest" not in out


def _worker_env(tmp_path, server, **extra: str) -> dict[str, str]:
    return {**os.environ, "MEMORYSCOPE_HOME": str(tmp_path / "home"), "MEMORYSCOPE_LLM__PROVIDER": "openai",
            "MEMORYSCOPE_LLM__MODEL": "fake-chat", "MEMORYSCOPE_LLM__BASE_URL": server.url + "/v1",
            "MEMORYSCOPE_LLM__API_KEY": "sk-test-0123456789", **extra}


def test_a_worker_serves_its_metrics_on_its_own_port(tmp_path, server, brain, local_embedder):
    pytest.importorskip("prometheus_client", reason="the [server] extra is not installed")
    from prometheus_client.parser import text_string_to_metric_families
    store = tmp_path / "memory.db"
    seed(store, local_embedder)
    port = free_port()
    worker = subprocess.Popen([sys.executable, "-m", "memoryscope_plugins", "--store", str(store), "worker",
                               "--interval", "0.2", "--metrics-port", str(port)],
                              env=_worker_env(tmp_path, server), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.monotonic() + 120
        found: dict[str, float] = {}
        while time.monotonic() < deadline and not found.get("memoryscope_consolidation_steps_total"):
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            except httpx.HTTPError:
                time.sleep(0.3)
                continue
            found = {}
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    found[sample.name] = found.get(sample.name, 0) + sample.value
            time.sleep(0.3)
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err[-2000:]
    assert found.get("memoryscope_consolidation_steps_total", 0) >= 1, found
    assert found["memoryscope_model_requests_total"] >= 1 and found["memoryscope_store_up"] == 1
    assert SECRET_TEXT not in text and "anna" not in text and "sk-test" not in text
    assert f"metrics on http://127.0.0.1:{port}/metrics" in err


def test_a_worker_writes_its_counters_for_a_multiprocess_scrape(tmp_path, server, brain, local_embedder):
    pytest.importorskip("prometheus_client", reason="the [server] extra is not installed")
    store = tmp_path / "memory.db"
    seed(store, local_embedder)
    folder = tmp_path / "prometheus"
    folder.mkdir()
    done = subprocess.run([sys.executable, "-m", "memoryscope_plugins", "--store", str(store), "worker", "--once"],
                          env=_worker_env(tmp_path, server, PROMETHEUS_MULTIPROC_DIR=str(folder)),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # what a `serve` on this host, started with the same PROMETHEUS_MULTIPROC_DIR, would show on /metrics
    code = ("from prometheus_client import CollectorRegistry, generate_latest\n"
            "from prometheus_client.multiprocess import MultiProcessCollector\n"
            "registry = CollectorRegistry(); MultiProcessCollector(registry)\n"
            "print(generate_latest(registry).decode())")
    scrape = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)})
    assert 'memoryscope_consolidation_steps_total{outcome="committed"}' in scrape.stdout, scrape.stderr
    assert 'memoryscope_consolidation_leases_total{event="acquired"}' in scrape.stdout
