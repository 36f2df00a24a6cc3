"""Issue 29 item 3: an engine (or a `serve` instance) set to ``consolidation.worker: none`` never calls a
model on close; pending messages stay for the worker processes. `flush_on_close` flushes only where this
process runs consolidation. The model is a fake OpenAI-compatible server that counts the calls."""

from __future__ import annotations

import signal

import httpx
import pytest

from memoryscope_plugins import MemoryScope
from tests.support.consolidation_helpers import OPENAI_CHAT, at, make_engine, make_settings, user_msg
from tests.support.server_harness import ServeProcess


def pending(tmp_path, local_embedder) -> list[str]:
    with MemoryScope(make_settings(tmp_path), embedder=local_embedder) as reopened:  # no LLM: reads only
        return [m.message.content for m in reopened.store.pending_messages("anna")]


def test_close_with_worker_none_calls_no_model_and_leaves_messages_pending(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, worker="none", flush_on_close=True,
                         every_messages=1000, every_seconds=3600)
    engine.record("anna", [user_msg("I'm vegetarian.", at(1)), user_msg("I moved to Lisbon.", at(2))])
    engine.close()
    assert server.requests_to(OPENAI_CHAT) == []
    assert sorted(pending(tmp_path, local_embedder)) == ["I moved to Lisbon.", "I'm vegetarian."]


def test_close_of_an_engine_that_ran_the_worker_still_flushes(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, worker="thread", flush_on_close=True,
                         every_messages=1000, every_seconds=3600)
    engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
    engine.close()
    assert server.requests_to(OPENAI_CHAT)
    assert pending(tmp_path, local_embedder) == []


async def test_aclose_after_astart_worker_flushes(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, worker="asyncio", flush_on_close=True,
                         every_messages=1000, every_seconds=3600)
    await engine.astart_worker()
    await engine.arecord("anna", [user_msg("I'm vegetarian.", at(1))])
    await engine.aclose()
    assert server.requests_to(OPENAI_CHAT)
    assert pending(tmp_path, local_embedder) == []


def test_serve_with_worker_none_calls_no_model_on_sigterm(tmp_path, server, brain):
    pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
    config = tmp_path / "settings.yaml"
    config.write_text(f"llm: {{provider: openai, model: fake-llm, base_url: '{server.url}/v1', api_key: sk-test}}\n"
                      "consolidation: {worker: none, flush_on_close: true}\n", encoding="utf-8")
    srv = ServeProcess(tmp_path / "serve")
    srv.env["MEMORYSCOPE_CONFIG"] = str(config)
    key = srv.create_key("acme", "--admin")
    srv.start()
    try:
        for day in (1, 2, 3, 4):
            recorded = httpx.post(f"{srv.url}/v1/users/anna/record", headers={"X-API-Key": key}, timeout=60,
                                  json={"messages": [{"role": "user", "content": f"Note number {day}."}]})
            assert recorded.status_code == 201
    finally:
        assert srv.stop(signal.SIGTERM) == 0
    assert server.requests_to(OPENAI_CHAT) == []
    with MemoryScope(path=srv.store) as reopened:
        assert len(reopened.store.pending_messages("acme:anna")) == 4
