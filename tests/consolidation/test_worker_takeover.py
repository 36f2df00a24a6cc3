"""Issue 29 item 4: a worker that dies does not stall its users, and a worker that stalls past its
lease never commits over the worker that took its users over. Real `worker` processes over one
embedded PostgreSQL, the model faked at the HTTP boundary (tests/support/worker_fleet.py).

The time from a SIGKILL to the first consolidation by another worker is measured, not asserted,
by bench/worker_takeover.py (docs/consolidation.md)."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from tests.support.consolidation_helpers import obs, wait_for
from tests.support.worker_fleet import USER, consolidated, fleet, requests_of, say

pytest.importorskip("psycopg")
pytestmark = pytest.mark.slow

TTL = 3.0  # short, so the tests are quick; the takeover comes within one TTL of the last renewal


def assert_each_message_consolidated_once(engine) -> None:
    messages = engine.store.recent_messages(USER, None, None, 10_000)
    assert messages and all(m.state == "done" for m in messages)
    observations = engine.list(USER, types=["observation"], limit=10_000)
    sources = Counter(s for o in observations for s in o.source_ids)
    assert set(sources) == {m.id for m in messages} and set(sources.values()) == {1}, observations


def observations(engine) -> dict[str, tuple]:
    return {m.id: (m.content, m.status, m.updated_at) for m in engine.list(USER, types=["observation"], limit=1000)}


def test_a_killed_workers_user_is_consolidated_by_another_worker(tmp_path, postgres, server, brain):
    with fleet(tmp_path, postgres.create_database("takeover_kill"), server, brain, lease_ttl_s=TTL) as f:
        say(f.app, 1, "I'm vegetarian.")
        f.first.start()
        assert f.gate.waiting.wait(120), f.first.log_text()[-3000:]  # mid-step: it holds anna's lease
        f.second.start()
        f.first.signal(signal.SIGKILL)
        assert f.first.proc is not None and f.first.proc.wait(30) == -signal.SIGKILL
        f.gate.release.set()
        say(f.app, 2, "I moved to Lisbon last month.")  # the user's next message
        assert wait_for(lambda: consolidated(f.app), 120), f.second.log_text()[-3000:]
        assert requests_of(server, f.second.key) >= 1  # the survivor did it
        assert_each_message_consolidated_once(f.app)


def test_a_worker_paused_past_its_lease_does_not_commit_when_resumed(tmp_path, postgres, server, brain):
    # the paused worker's answer has other words: anything it wrote would show
    def stale(prompt):
        return [obs(f"STALE {content}", [n]) for n, _, _, content in prompt.new]
    with fleet(tmp_path, postgres.create_database("takeover_pause"), server, brain, lease_ttl_s=TTL,
               held_extract=stale) as f:
        say(f.app, 1, "I'm vegetarian.")
        say(f.app, 2, "I moved to Lisbon last month.")
        f.first.start()
        assert f.gate.waiting.wait(120), f.first.log_text()[-3000:]  # mid-step: it holds anna's lease
        f.first.signal(signal.SIGSTOP)  # its heartbeat stops with it
        f.second.start()
        assert wait_for(lambda: consolidated(f.app), 120), f.second.log_text()[-3000:]  # taken over once lapsed
        before = observations(f.app)
        f.gate.release.set()  # the paused worker's model call returns...
        f.first.signal(signal.SIGCONT)  # ...and it carries on to its commit
        assert wait_for(lambda: "stopped: lease taken over" in f.first.log_text(), 120), f.first.log_text()[-3000:]
        assert f.first.stop() == 0 and f.second.stop() == 0
        after = observations(f.app)
        assert after == before  # nothing overwritten, nothing added
        assert not any("STALE" in content for content, _, _ in after.values())
        assert_each_message_consolidated_once(f.app)
