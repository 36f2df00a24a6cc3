"""Tool calls in export and import: an export carries the agents' tool calls made for a user, an
import logs them again (idempotently) and the tool statistics follow exactly."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.errors import ValidationError

T0 = datetime(2026, 2, 1, 8, 0, tzinfo=timezone(timedelta(hours=1)))


def _run(memory: MemoryScope, user: str) -> None:
    memory.record(user, [
        {"role": "user", "content": "Plan my trip to Porto", "timestamp": T0},
        {"tool_call": {"name": "flights", "arguments": {"to": "OPO"}, "result": "2 flights", "duration_ms": 340,
                       "call_id": "c1"}, "timestamp": T0 + timedelta(minutes=1), "metadata": {"step": 1}},
        {"tool_call": {"name": "hotels", "arguments": {"city": "Porto", "nights": 3}, "error": "HTTP 502",
                       "duration_ms": 1200}, "timestamp": T0 + timedelta(minutes=2), "name": "hotel-bot"},
    ], agent_id="planner", session_id="trip")
    memory.record(user, [{"tool_call": {"name": "flights", "arguments": {"to": "LIS"}, "duration_ms": 90,
                                        "result": "1 flight"}, "timestamp": T0 + timedelta(minutes=3)}],
                  agent_id="booker")


def _export(memory: MemoryScope, user: str) -> str:
    out = io.StringIO()
    memory.export(user, out)
    return out.getvalue()


def test_an_export_carries_the_tool_calls_and_an_import_rebuilds_their_statistics(tmp_path, local_embedder):
    with MemoryScope(path=tmp_path / "a.db", embedder=local_embedder, start_worker=False) as source:
        _run(source, "anna")
        text = _export(source, "anna")
        expected = {agent: source.tool_stats(agent) for agent in ("planner", "booker")}
        logged = [m for b in source.store.iter_messages("anna") for m in b if m.message.tool_call is not None]
    calls = [json.loads(line) for line in text.splitlines() if '"record": "tool_call"' in line]
    assert [c["tool_call"]["name"] for c in calls] == ["flights", "hotels", "flights"]
    assert calls[0]["metadata"] == {"step": 1} and calls[1]["name"] == "hotel-bot"
    with MemoryScope(path=tmp_path / "b.db", embedder=local_embedder, start_worker=False) as target:
        result = target.import_with_ids("bea", io.StringIO(text))
        assert result.tool_calls == 3 and result.imported == 1  # the user's turn; no call is a memory
        assert {agent: target.tool_stats(agent) for agent in ("planner", "booker")} == expected
        copied = [m for b in target.store.iter_messages("bea") for m in b if m.message.tool_call is not None]
        assert [(m.agent_id, m.session_id, m.state, m.message) for m in copied] == \
            [(m.agent_id, m.session_id, m.state, m.message) for m in logged]
        again = target.import_with_ids("bea", io.StringIO(text))  # the same file twice: counted once
        assert again.tool_calls == 0
        own = target.import_with_ids("bea", io.StringIO(_export(target, "bea")))  # its own export
        assert own.tool_calls == 0
        assert {agent: target.tool_stats(agent) for agent in ("planner", "booker")} == expected
        assert [m.role for m in target.list("bea")] != [] and all(m.role != "tool" for m in target.list("bea"))


@pytest.mark.parametrize("change,expected", [
    (lambda c: c.update(tool_call={"name": "x y"}), "line 2: tool_call name must be a tool name"),
    (lambda c: c.update(extra=1), "line 2: unknown tool_call fields"),
    (lambda c: c.pop("timestamp"), "line 2: a tool call needs its timestamp"),
    (lambda c: c.update(agent_id=""), "line 2: agent_id"),
    (lambda c: c["tool_call"].update(duration_ms=-5), "line 2: tool_call duration_ms"),
])
def test_a_bad_tool_call_line_is_refused_and_nothing_is_imported(engine, change, expected):
    engine.record("anna", [{"role": "user", "content": "hello there", "timestamp": T0}])
    engine.record("anna", [{"tool_call": {"name": "search", "result": "r"}, "timestamp": T0}], agent_id="scout")
    lines = _export(engine, "anna").splitlines()
    assert len(lines) == 2 and '"tool_call"' in lines[1]  # the turn, then the call
    call = json.loads(lines[1])
    change(call)
    lines[1] = json.dumps(call)
    with pytest.raises(ValidationError, match=expected):
        engine.import_("bea", io.StringIO("\n".join(lines)))
    assert engine.count("bea") == 0 and engine.tool_stats("scout", user_id="bea") == []
