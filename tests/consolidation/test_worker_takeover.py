"""Issue 29 item 4: a worker that dies does not stall its users, and a worker that stalls past its
lease never commits over the worker that took its users over. Real `worker` processes over one
embedded PostgreSQL, the model faked at the HTTP boundary (tests/support/worker_fleet.py).

The time from a SIGKILL to the first consolidation by another worker is measured, not asserted,
by bench/worker_takeover.py (docs/consolidation.md)."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from tests.support import servers
from tests.support.consolidation_helpers import obs
from tests.support.fakes.fake_model_server import OPENAI_CHAT
from tests.support.worker_fleet import (
    USER,
    Gate,
    WorkerProcess,
    consolidated,
    recorder,
    requests_of,
    say,
    wait_until,
)

pytest.importorskip("psycopg")
pytestmark = pytest.mark.slow

TTL = 3.0  # short, so the tests are quick; the takeover comes within one TTL of the last renewal


@pytest.fixture(scope="module")
def pg():
    try:
        with servers.postgres_server() as server:
            yield server
    except servers.ServerUnavailable as exc:
        pytest.skip(f"embedded PostgreSQL could not start here: {exc}")


def assert_each_message_consolidated_once(engine) -> None:
    messages = engine.store.recent_messages(USER, None, None, 10_000)
    assert messages and all(m.state == "done" for m in messages)
    observations = engine.list(USER, types=["observation"], limit=10_000)
    sources = Counter(s for o in observations for s in o.source_ids)
    assert set(sources) == {m.id for m in messages} and set(sources.values()) == {1}, observations


def observations(engine) -> dict[str, tuple]:
    return {m.id: (m.content, m.status, m.updated_at) for m in engine.list(USER, types=["observation"], limit=1000)}


def test_a_killed_workers_user_is_consolidated_by_another_worker(tmp_path, pg, server, brain):
    dsn = pg.create_database("takeover_kill")
    gate = Gate(brain, held_key="sk-first")
    server.route(OPENAI_CHAT, gate)
    app = recorder(tmp_path, dsn, server.url)
    first = WorkerProcess(tmp_path, "first", dsn, server.url, lease_ttl_s=TTL)
    second = WorkerProcess(tmp_path, "second", dsn, server.url, lease_ttl_s=TTL)
    try:
        say(app, 1, "I'm vegetarian.")
        first.start()
        assert gate.waiting.wait(120), first.log_text()[-3000:]  # mid-step: it holds anna's lease
        second.start()
        first.signal(signal.SIGKILL)
        assert first.proc is not None and first.proc.wait(30) == -signal.SIGKILL
        gate.release.set()
        say(app, 2, "I moved to Lisbon last month.")  # the user's next message
        assert wait_until(lambda: consolidated(app), 120), second.log_text()[-3000:]
        assert requests_of(server, second.key) >= 1  # the survivor did it
        assert_each_message_consolidated_once(app)
    finally:
        gate.release.set()
        first.stop()
        second.stop()
        app.close()


def test_a_worker_paused_past_its_lease_does_not_commit_when_resumed(tmp_path, pg, server, brain):
    dsn = pg.create_database("takeover_pause")
    # the paused worker's answer has other words: anything it wrote would show
    gate = Gate(brain, held_key="sk-first",
                held_extract=lambda prompt: [obs(f"STALE {content}", [n]) for n, _, _, content in prompt.new])
    server.route(OPENAI_CHAT, gate)
    app = recorder(tmp_path, dsn, server.url)
    first = WorkerProcess(tmp_path, "first", dsn, server.url, lease_ttl_s=TTL)
    second = WorkerProcess(tmp_path, "second", dsn, server.url, lease_ttl_s=TTL)
    try:
        say(app, 1, "I'm vegetarian.")
        say(app, 2, "I moved to Lisbon last month.")
        first.start()
        assert gate.waiting.wait(120), first.log_text()[-3000:]  # mid-step: it holds anna's lease
        first.signal(signal.SIGSTOP)  # its heartbeat stops with it
        second.start()
        assert wait_until(lambda: consolidated(app), 120), second.log_text()[-3000:]  # taken over once lapsed
        before = observations(app)
        gate.release.set()  # the paused worker's model call returns...
        first.signal(signal.SIGCONT)  # ...and it carries on to its commit
        assert wait_until(lambda: "stopped: lease taken over" in first.log_text(), 120), first.log_text()[-3000:]
        assert first.stop() == 0 and second.stop() == 0
        after = observations(app)
        assert after == before  # nothing overwritten, nothing added
        assert not any("STALE" in content for content, _, _ in after.values())
        assert_each_message_consolidated_once(app)
    finally:
        gate.release.set()
        first.stop()
        second.stop()
        app.close()
