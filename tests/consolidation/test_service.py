"""The consolidation service: triggers, leases, failures, restarts, the worker process."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.consolidation.service import ConsolidationService
from memoryscope_plugins.consolidation.worker import run_worker
from memoryscope_plugins.errors import ConfigError
from memoryscope_plugins.log_hygiene import user_ref
from memoryscope_plugins.settings import ConsolidationSettings
from tests.support.consolidation_helpers import (
    OPENAI_CHAT,
    Brain,
    Reply,
    at,
    fast_policy,
    make_engine,
    make_settings,
    user_msg,
    wait_for,
)
from tests.support.fakes.fake_model_server import DASHSCOPE_GENERATION, openai_completion
from tests.support.paths import ROOT

SECRET = "sk-test-0123456789"


class NoFlushOnClose(ConsolidationSettings):
    """Until ConsolidationSettings has the field, a subclass carries it (the service reads it)."""

    flush_on_close: bool = False


def all_messages(engine, user):
    return engine.store.recent_messages(user, None, None, 10_000)


def assert_exactly_once(engine, user, expected_observations):
    """Every message done, and each user message behind exactly one observation."""
    messages = all_messages(engine, user)
    assert messages and all(m.state == "done" for m in messages)
    observations = engine.list(user, types=["observation"], limit=10_000)
    assert len(observations) == expected_observations
    sources = Counter(s for o in observations for s in o.source_ids)
    user_ids = {m.id for m in messages if m.message.role == "user"}
    assert set(sources) == user_ids and set(sources.values()) == {1}


# -- failures -------------------------------------------------------------------------------------


def test_llm_failure_leaves_messages_pending_then_a_later_run_consolidates(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, attempts=2)
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        server.script(OPENAI_CHAT, [Reply(status=500, json={"error": {"message": "boom"}})] * 2)
        report = engine.consolidate("anna")
        assert report.errors and "gave up after 2 attempts" in report.errors[0]
        [pending] = engine.store.pending_messages("anna")
        assert pending.attempts == 1
        assert engine.list("anna", types=["observation"]) == []
        report = engine.consolidate("anna")
        assert report.ok and report.added == ["Anna is vegetarian."]
        assert engine.store.pending_messages("anna") == []
    finally:
        engine.close()


def test_after_max_attempts_messages_are_marked_failed_and_logged_without_content(tmp_path, server, brain,
                                                                                  local_embedder, caplog):
    caplog.set_level(logging.DEBUG)
    engine = make_engine(tmp_path, server, local_embedder, attempts=1, max_attempts=2)
    secret_text = "My secret diary entry about Zanzibar."
    try:
        engine.record("anna", [user_msg(secret_text, at(1))])
        server.script(OPENAI_CHAT, [Reply(status=503, json={"error": {"message": "overloaded"}})] * 2)
        assert engine.consolidate("anna").failed_messages == 0
        report = engine.consolidate("anna")
        assert report.failed_messages == 1
        [message] = all_messages(engine, "anna")
        assert message.state == "failed" and message.attempts == 2
        assert engine.store.users_with_pending() == []
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any(f"gave up on 1 message(s) of user {user_ref('anna')} after 2 attempts" in w for w in warnings)
        everything = "\n".join(r.getMessage() for r in caplog.records)
        assert "Zanzibar" not in everything and SECRET not in everything and "anna" not in everything
    finally:
        engine.close()


def test_malformed_json_then_a_good_answer_on_the_re_ask(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        server.script(OPENAI_CHAT, [Reply(json=openai_completion('Sure! {"observations": [{"content": "Anna'))])
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        report = engine.consolidate("anna")
        assert report.ok and report.added == ["Anna is vegetarian."] and report.llm_calls == 2
        reask = server.requests_to(OPENAI_CHAT)[1].json["messages"]
        assert reask[-1]["role"] == "user" and "not valid JSON" in reask[-1]["content"]
    finally:
        engine.close()


def test_json_of_the_wrong_shape_counts_as_a_failed_attempt(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder)
    brain.extract = lambda p: '{"messages": "none today"}'
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        report = engine.consolidate("anna")
        assert report.errors and report.errors[0] == "ExtractionError"
        assert engine.store.pending_messages("anna")[0].attempts == 1
    finally:
        engine.close()


def test_json_wrapped_in_prose_and_fences_is_accepted(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder)
    brain.extract = lambda p: ('Here you go:\n```json\n{"messages": [{"n": 1, "says": "I\'m vegetarian.", '
                               '"observations": [{"content": "Anna is vegetarian.", "kind": "preference",}]}]}\n```')
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        report = engine.consolidate("anna")
        assert report.added == ["Anna is vegetarian."] and report.llm_calls == 1
    finally:
        engine.close()


# -- concurrency and leases -------------------------------------------------------------------------


def test_concurrent_records_for_many_users_while_workers_run_lose_nothing(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, start_worker=True, every_messages=2,
                         every_seconds=0.05)
    rival = ConsolidationService(engine, owner="another-process")  # a second worker on the same store
    rival.start()
    users = [f"user{i}" for i in range(8)]
    per_user = 10
    errors: list[BaseException] = []

    def talk(user: str) -> None:
        try:
            for n in range(per_user):
                engine.record(user, [user_msg(f"{user} fact number {n}", at(1 + n % 20), name=user)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=talk, args=(u,)) for u in users]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert engine.flush(timeout=60) is True
        assert wait_for(lambda: not engine.store.users_with_pending())
        rival.stop(flush=False)
        for user in users:
            assert_exactly_once(engine, user, per_user)
        assert sum(1 for p in brain.prompts if p.kind == "consolidate") >= len(users)
    finally:
        rival.stop(flush=False)
        engine.close()


def test_a_lease_held_elsewhere_is_waited_for_on_demand_and_skipped_by_the_worker(tmp_path, server, brain,
                                                                                  local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, lease_ttl_s=5)
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        assert engine.store.acquire_lease("anna", "someone-else", 0.4)
        service = engine._consolidation
        stop = threading.Event()
        worker = threading.Thread(target=service.run, args=(stop,))
        worker.start()
        time.sleep(0.2)
        assert brain.prompts == []  # the worker does not wait for a held lease
        stop.set()
        worker.join()
        started = time.monotonic()
        report = engine.consolidate("anna")  # on demand: waits for the lease to expire
        assert time.monotonic() - started >= 0.1
        assert report.added == ["Anna is vegetarian."]
    finally:
        engine.close()


def test_the_worker_tries_a_user_held_elsewhere_again_soon_not_at_the_next_sweep(tmp_path, server, brain,
                                                                                 local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, lease_ttl_s=1.0, every_seconds=3600)
    stop = threading.Event()
    worker = threading.Thread(target=engine._consolidation.run, args=(stop,))
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        assert engine.store.acquire_lease("anna", "a-worker-that-died", 30)
        worker.start()  # sweeps at once: anna is held elsewhere
        time.sleep(0.5)
        assert brain.prompts == []
        engine.store.release_lease("anna", "a-worker-that-died")  # as if its lease had run out
        assert wait_for(lambda: engine.list("anna", types=["observation"]) != [])  # long before the sweep
    finally:
        stop.set()
        worker.join()
        engine.close()


def test_the_heartbeat_keeps_the_lease_through_a_step_longer_than_its_ttl(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, lease_ttl_s=0.6)
    entered, release = threading.Event(), threading.Event()
    normal = brain.extract

    def slow(prompt):
        entered.set()
        release.wait(20)
        return normal(prompt)
    brain.extract = slow
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        step = threading.Thread(target=engine.consolidate, args=("anna",))
        step.start()
        assert entered.wait(10)
        for _ in range(4):  # well past the TTL: the lease is renewed meanwhile, no one else gets it
            time.sleep(0.5)
            assert not engine.store.acquire_lease("anna", "another-worker", 30)
        release.set()
        step.join(20)
        assert [m.content for m in engine.list("anna", types=["observation"])] == ["Anna is vegetarian."]
        assert engine.store.acquire_lease("anna", "another-worker", 30)  # released at the end of the step
    finally:
        release.set()
        engine.close()


def test_a_step_whose_lease_was_taken_over_commits_nothing(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, lease_ttl_s=30)
    normal = brain.extract
    service = engine._consolidation

    def taken_over(prompt):  # while the model answers, another worker takes the lease over
        engine.store.release_lease("anna", service.owner)
        assert engine.store.acquire_lease("anna", "another-worker", 30)
        return normal(prompt)
    brain.extract = taken_over
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        report = engine.consolidate("anna")
        assert report.errors == ["the user's lease was taken over by another worker"]
        assert engine.list("anna", types=["observation"]) == []
        assert [m.state for m in all_messages(engine, "anna")] == ["pending"]  # left for the new owner
        assert not engine.store.acquire_lease("anna", service.owner, 30)  # and its lease was not touched
    finally:
        engine.close()


def test_stop_finishes_the_current_step_and_commits_it(tmp_path, server, brain, local_embedder):
    engine = MemoryScope(make_settings(tmp_path).model_copy(update={"consolidation": NoFlushOnClose(
        worker="thread", every_messages=1, every_seconds=0.05, language="en")}),
        embedder=local_embedder, llm=_llm(server))
    entered, release = threading.Event(), threading.Event()
    normal = brain.extract

    def slow(prompt):
        entered.set()
        release.wait(10)
        return normal(prompt)
    brain.extract = slow
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        assert entered.wait(10)
        closing = threading.Thread(target=engine.close)
        closing.start()
        time.sleep(0.1)
        assert closing.is_alive()  # close waits for the step in progress
        release.set()
        closing.join(10)
        assert not closing.is_alive()
        reopened = MemoryScope(make_settings(tmp_path), embedder=local_embedder)  # no LLM: just look
        try:
            assert [m.content for m in reopened.list("anna", types=["observation"])] == ["Anna is vegetarian."]
            assert reopened.store.users_with_pending() == []
        finally:
            reopened.close()
    finally:
        release.set()
        engine.close()


def _llm(server, attempts: int = 2):
    from memoryscope_plugins.models.openai_compat import OpenAIChatModel
    return OpenAIChatModel("fake-llm", base_url=server.url + "/v1", api_key=SECRET, retry_policy=fast_policy(attempts))


def test_close_without_flush_leaves_work_pending_and_a_new_engine_resumes_it(tmp_path, server, brain,
                                                                            local_embedder):
    settings = make_settings(tmp_path).model_copy(update={"consolidation": NoFlushOnClose(
        worker="thread", every_messages=1000, every_seconds=3600, language="en")})
    first = MemoryScope(settings, embedder=local_embedder, llm=_llm(server))
    first.record("anna", [user_msg("I'm vegetarian.", at(1))])
    first.record("bob", [user_msg("I play chess.", at(1), name="Bob")])
    first.consolidate("anna")
    first.close()
    assert brain.kinds() == ["consolidate"]
    second = make_engine(tmp_path, server, local_embedder, start_worker=True, every_seconds=3600)
    try:  # the worker sweeps at start: bob's pending message is picked up without any new record
        assert wait_for(lambda: not second.store.users_with_pending())
        assert_exactly_once(second, "anna", 1)
        assert_exactly_once(second, "bob", 1)
    finally:
        second.close()


def _observations_in(path: Path) -> int:
    """Committed observations in the child's SQLite file, read beside it (WAL allows a reader)."""
    import sqlite3
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT count(*) FROM memories WHERE type = 'observation'").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet, or busy
        return 0


CHILD = textwrap.dedent("""
    import sys, time
    from memoryscope_plugins import MemoryScope, Settings
    settings = Settings(store={"path": sys.argv[1]},
                        llm={"provider": "openai", "model": "fake", "base_url": sys.argv[2], "api_key": "sk-x-123456"},
                        consolidation={"worker": "thread", "every_messages": 1, "every_seconds": 0.05,
                                       "lease_ttl_s": 1.0, "reflect_every_observations": 1000, "language": "en"})
    memory = MemoryScope(settings)
    for user in ("u1", "u2", "u3"):
        memory.record(user, [{"role": "user", "name": "Anna", "content": f"{user} likes item {i}"} for i in range(4)])
    print("recorded", flush=True)
    time.sleep(120)
""")


@pytest.mark.slow
def test_a_crash_mid_way_resumes_on_restart_without_duplicates(tmp_path, server, brain, local_embedder):
    first_done, hold = threading.Event(), threading.Event()
    calls = Counter()
    normal = brain.extract

    def slow(prompt):  # the first user's step completes; the others are in flight when the crash comes
        with brain.lock:
            calls["n"] += 1
            number = calls["n"]
        if number == 1:
            try:
                return normal(prompt)
            finally:
                first_done.set()
        hold.wait(20)
        return normal(prompt)
    brain.extract = slow
    store = tmp_path / "memory.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYSCOPE_")}
    env["MEMORYSCOPE_HOME"] = str(tmp_path / "home")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(store), server.url + "/v1"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=str(ROOT))
    try:
        assert child.stdout.readline().strip() == "recorded", child.stderr.read()
        assert first_done.wait(20)
        assert wait_for(lambda: calls["n"] >= 2)
        assert wait_for(lambda: _observations_in(store) > 0)  # the first step commits (slow under load)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
        hold.set()
    brain.extract = normal
    restarted = make_engine(tmp_path, server, local_embedder, lease_ttl_s=1.0)
    try:
        # the crash left some work done and some pending (the batch in flight was not committed)
        assert restarted.store.users_with_pending()
        done_before = sum(len(restarted.list(u, types=["observation"])) for u in ("u1", "u2", "u3"))
        assert 0 < done_before < 12
        assert restarted.flush(timeout=30) is True
        assert restarted.store.users_with_pending() == []
        for user in ("u1", "u2", "u3"):
            assert_exactly_once(restarted, user, 4)
    finally:
        restarted.close()


# -- triggers ---------------------------------------------------------------------------------------


def test_every_n_messages_wakes_the_worker(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, start_worker=True, every_messages=3, every_seconds=3600)
    try:
        engine.record("anna", [user_msg("one", at(1))])
        engine.record("anna", [user_msg("two", at(1))])
        time.sleep(0.3)
        assert brain.prompts == []
        engine.record("anna", [user_msg("three", at(1))])
        assert wait_for(lambda: not engine.store.users_with_pending())
        # one extraction call for the three
        assert brain.kinds().count("consolidate") == 1 and len(brain.of_kind("consolidate")[0].new) == 3
    finally:
        engine.close()


def test_every_t_seconds_a_sweep_finds_pending_work(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, start_worker=True, every_messages=1000,
                         every_seconds=0.2)
    try:
        time.sleep(0.05)
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        assert wait_for(lambda: not engine.store.users_with_pending(), timeout=5)
    finally:
        engine.close()


def test_close_flushes_by_default(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, start_worker=True, every_messages=1000,
                         every_seconds=3600)
    engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
    engine.close()
    reopened = MemoryScope(make_settings(tmp_path), embedder=local_embedder)
    try:
        assert reopened.store.users_with_pending() == []
        assert len(reopened.list("anna", types=["observation"])) == 1
    finally:
        reopened.close()


def test_flush_returns_false_when_messages_stay_pending(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, attempts=1)
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        server.script(OPENAI_CHAT, [Reply(status=500, json={"error": {"message": "x"}})])
        assert engine._consolidation.flush(timeout=10) is False
        assert engine._consolidation.flush(timeout=10) is True
    finally:
        engine.close()


def test_tokens_are_metered_per_user_and_operation(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, reflect_every_observations=1)
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        engine.record("bob", [user_msg("I play chess.", at(1), name="Bob")])
        engine.consolidate()
        meter = engine._consolidation.usage
        snapshot = meter.snapshot()
        assert set(snapshot) == {"anna", "bob"}
        assert set(snapshot["anna"]) == {"consolidate", "reflect"}
        assert meter.get("anna", "consolidate").prompt_tokens > 0
        stats = engine._consolidation.stats()
        assert stats["messages"] == 2 and stats["llm_calls"] == 4
    finally:
        engine.close()


def test_service_needs_a_model(tmp_path, local_embedder):
    engine = MemoryScope(make_settings(tmp_path), embedder=local_embedder)
    try:
        with pytest.raises(ConfigError, match="needs a model"):
            ConsolidationService(engine)
        assert engine.consolidate().skipped_reason
    finally:
        engine.close()


# -- other clients, async, the worker process ---------------------------------------------------------


def test_dashscope_native_model_consolidates_too(tmp_path, server, local_embedder):
    from memoryscope_plugins.models.dashscope_native import DashScopeChatModel
    brain = Brain()
    server.route(DASHSCOPE_GENERATION, brain.dashscope)
    llm = DashScopeChatModel("qwen-plus", api_key=SECRET, base_url=server.url + "/api/v1",
                             retry_policy=fast_policy())
    engine = MemoryScope(make_settings(tmp_path), embedder=local_embedder, llm=llm)
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        report = engine.consolidate("anna")
        assert report.added == ["Anna is vegetarian."] and report.prompt_tokens > 0
        body = server.requests_to(DASHSCOPE_GENERATION)[0].json
        # structured output the strongest way: the answer's JSON schema
        assert body["parameters"]["response_format"]["type"] == "json_schema"
        assert "messages" in body["parameters"]["response_format"]["json_schema"]["schema"]["properties"]
    finally:
        engine.close()


async def test_async_twins_and_the_asyncio_worker(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, every_seconds=0.05)
    service = engine._consolidation
    try:
        await engine.arecord("anna", [user_msg("I'm vegetarian.", at(1))])
        report = await service.aconsolidate("anna")
        assert report.added == ["Anna is vegetarian."]
        stop = asyncio.Event()
        task = asyncio.ensure_future(service.arun(stop))
        await engine.arecord("bob", [user_msg("I play chess.", at(1), name="Bob")])
        for _ in range(200):
            if not engine.store.users_with_pending():
                break
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.wait_for(task, 10)
        assert engine.store.users_with_pending() == []
        assert (await service.areflect("anna")).insights
        assert await service.aflush(5) is True
    finally:
        await engine.aclose()


def _worker_settings(tmp_path, server):
    from memoryscope_plugins import Settings
    return Settings(store={"path": tmp_path / "memory.db"},
                    llm={"provider": "openai", "model": "fake", "base_url": server.url + "/v1", "api_key": SECRET},
                    consolidation={"worker": "none", "every_seconds": 0.05, "language": "en"})


def test_run_worker_consolidates_what_applications_recorded(tmp_path, server, brain, local_embedder):
    app = MemoryScope(make_settings(tmp_path), embedder=local_embedder)  # records only, no LLM
    app.record("anna", [user_msg("I'm vegetarian.", at(1))])
    stop = threading.Event()
    result: dict = {}
    worker_engine = MemoryScope(_worker_settings(tmp_path, server), embedder=local_embedder)
    thread = threading.Thread(target=lambda: result.update(r=run_worker(worker_engine.settings, stop,
                                                                        engine=worker_engine)))
    thread.start()
    try:
        assert wait_for(lambda: not app.store.users_with_pending())
        app.record("bob", [user_msg("I play chess.", at(1), name="Bob")])
        assert wait_for(lambda: not app.store.users_with_pending())
    finally:
        stop.set()
        thread.join(10)
        worker_engine.close()
    assert result["r"].stats["messages"] == 2 and result["r"].drained
    assert {m.content for m in app.list("anna", types=["observation"])} == {"Anna is vegetarian."}
    app.close()


def test_worker_command_once(tmp_path, server, brain, local_embedder, monkeypatch, capsys):
    from memoryscope_plugins.cli.worker import add_parser
    app = MemoryScope(make_settings(tmp_path), embedder=local_embedder)
    app.record("anna", [user_msg("I'm vegetarian.", at(1))])
    app.close()
    for key, value in {"LLM__PROVIDER": "openai", "LLM__MODEL": "fake", "LLM__BASE_URL": server.url + "/v1",
                       "LLM__API_KEY": SECRET, "CONSOLIDATION__LANGUAGE": "en"}.items():
        monkeypatch.setenv("MEMORYSCOPE_" + key, value)
    parser = argparse.ArgumentParser()
    parser.add_argument("--config")
    parser.add_argument("--store")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["--store", str(tmp_path / "memory.db"), "worker", "--once", "--json"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["messages"] == 1 and out["drained"] is True
    assert out["usage"]["anna"]["consolidate"]["prompt_tokens"] > 0


def test_worker_command_without_a_model_says_so(tmp_path, capsys):
    from memoryscope_plugins.cli.main import main
    assert main(["--store", str(tmp_path / "m.db"), "worker"]) == 1  # the exit status of every "error:" line
    err = capsys.readouterr().err
    assert err.startswith("error: consolidation needs a model") and "running" not in err
    assert not (tmp_path / "m.db").exists()  # checked before the store is opened


def test_delete_all_during_a_step_brings_nothing_back(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder)
    entered, release = threading.Event(), threading.Event()
    normal = brain.extract

    def slow(prompt):
        entered.set()
        release.wait(10)
        return normal(prompt)
    brain.extract = slow
    try:
        engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
        result: dict = {}
        step = threading.Thread(target=lambda: result.update(r=engine.consolidate("anna")))
        step.start()
        assert entered.wait(10)
        assert engine.delete_all("anna") == 1
        release.set()
        step.join(10)
        assert result["r"].added == []  # computed, but dropped at commit
        assert engine.list("anna") == [] and engine.store.users_with_pending() == []
    finally:
        release.set()
        engine.close()


def _pin_turn(engine) -> str:
    engine.record("anna", [user_msg("my bank code is 4921.", at(1))])
    engine.record("anna", [user_msg("I'm vegetarian.", at(2))])
    return next(m.id for m in engine.list("anna") if "4921" in m.content)


def test_a_deleted_turn_is_forgotten_by_consolidation_too(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, start_worker=False)
    try:
        engine.delete("anna", _pin_turn(engine))
        report = engine.consolidate("anna")
        assert report.added == ["Anna is vegetarian."]
        prompts = [p.user for p in brain.of_kind("consolidate")]
        assert prompts and not any("4921" in p for p in prompts)  # neither consolidated nor shown as context
        assert not any("4921" in m.content for m in engine.list("anna", include_expired=True))
        logged = [m.message.content for batch in engine.store.iter_messages("anna") for m in batch]
        assert logged == ["", "I'm vegetarian."] and engine.store.users_with_pending() == []  # kept without words
    finally:
        engine.close()


def test_a_turn_deleted_during_its_step_brings_nothing_back(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, start_worker=False)
    entered, release = threading.Event(), threading.Event()
    normal = brain.extract

    def slow(prompt):
        if not entered.is_set():  # only the first step waits
            entered.set()
            release.wait(10)
        return normal(prompt)
    brain.extract = slow
    try:
        pin = _pin_turn(engine)
        result: dict = {}
        step = threading.Thread(target=lambda: result.update(r=engine.consolidate("anna")))
        step.start()
        assert entered.wait(10)
        engine.delete("anna", pin)  # the step read the message and is asking the model about it
        release.set()
        step.join(30)
        assert result["r"].added == []  # computed, but dropped at commit: one of its messages is gone
        engine.consolidate("anna")  # the message left is consolidated again, alone
        assert not any("4921" in m.content for m in engine.list("anna", include_expired=True))
        assert [m.content for m in engine.list("anna", types=["observation"])] == ["Anna is vegetarian."]
        assert engine.store.users_with_pending() == []
    finally:
        release.set()
        engine.close()


def test_a_turn_deleted_just_before_the_commit_brings_nothing_back(tmp_path, server, brain, local_embedder):
    """The step's check that its messages are pending passed; the delete lands before the commit's
    transaction, which then refuses (`MessagesGoneError`): the step is dropped like any gone one."""
    engine = make_engine(tmp_path, server, local_embedder, start_worker=False)
    try:
        pin = _pin_turn(engine)
        store, commit = engine.store, engine.store.commit_consolidation

        def delete_first(*args, **kwargs):
            if pin in args[2]:  # the batch's done ids
                engine.delete("anna", pin)
            return commit(*args, **kwargs)
        store.commit_consolidation = delete_first
        assert engine.consolidate("anna").added == []
        store.commit_consolidation = commit
        engine.consolidate("anna")
        assert not any("4921" in m.content for m in engine.list("anna", include_expired=True))
        assert [m.content for m in engine.list("anna", types=["observation"])] == ["Anna is vegetarian."]
    finally:
        engine.close()
