"""``memoryscope-plugins tool-stats``: an agent's recorded tool calls as text and as JSON, on a real store."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from memoryscope_plugins.cli.main import main
from memoryscope_plugins.tool_calls import latency_bound

T0 = datetime(2026, 4, 2, 14, 30, tzinfo=timezone.utc)


@pytest.fixture
def store(tmp_path, capsys):
    path = str(tmp_path / "cli.db")
    from memoryscope_plugins import MemoryScope
    with MemoryScope(path=path) as memory:
        memory.record("anna", [
            {"role": "user", "content": "Find a flight to Oslo", "timestamp": T0},
            {"tool_call": {"name": "flights", "arguments": {"to": "OSL"}, "result": "3", "duration_ms": 250},
             "timestamp": T0},
            {"tool_call": {"name": "flights", "arguments": {"to": "OSL", "day": 3}, "error": "HTTP 502 from upstream",
                           "duration_ms": 4000}, "timestamp": T0},
        ], agent_id="travel")
        memory.record("ben", [{"tool_call": {"name": "flights", "arguments": {"to": "BGO"}, "result": "1"},
                               "timestamp": T0}], agent_id="travel")
    capsys.readouterr()
    return path


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_tool_stats_as_text(store, capsys):
    out = _run(capsys, "tool-stats", "travel", "--store", store).splitlines()
    p50, p95 = latency_bound(250), latency_bound(4000)
    assert out == [
        f"flights: 3 calls, 1 failed (33 %), p50 {p50:,.0f} ms, p95 {p95:,.0f} ms over 2 timed calls; "
        "first 2026-04-02 14:30, last 2026-04-02 14:30 UTC",
        "  error x1: HTTP <n> from upstream",
        "  arguments {to:str}: 2 ok, 0 failed",
        "  arguments {day:int,to:str}: 0 ok, 1 failed",
    ]
    assert _run(capsys, "tool-stats", "travel", "--user", "ben", "--top", "1", "--store", store).splitlines() == [
        "flights: 1 call, 0 failed (0 %), no durations; first 2026-04-02 14:30, last 2026-04-02 14:30 UTC",
        "  arguments {to:str}: 1 ok, 0 failed"]
    assert "no recorded calls of tool 'hotels' by agent 'travel'" in _run(
        capsys, "tool-stats", "travel", "--tool", "hotels", "--store", store)


def test_tool_stats_as_json(store, capsys):
    [flights] = json.loads(_run(capsys, "tool-stats", "travel", "--json", "--top", "1", "--store", store))
    assert (flights["calls"], flights["failures"], flights["timed_calls"]) == (3, 1, 2)
    assert flights["errors"] == [{"error": "HTTP <n> from upstream", "count": 1}]
    assert flights["shapes"] == [{"shape": "{to:str}", "succeeded": 2, "failed": 0}] and flights["shape_kinds"] == 2
    assert flights["first_used"] == T0.isoformat()


def test_tool_stats_refuses_bad_input(store, capsys):
    assert main(["tool-stats", "travel", "--tool", "no such tool", "--store", store]) == 1
    assert "tool must be a tool name" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["tool-stats", "travel", "--top", "0", "--store", store])
    assert exit_.value.code == 2
    assert main(["tool-stats", "travel", "--store", store + ".missing"]) == 1
    assert "no SQLite store" in capsys.readouterr().err


def test_procedures_as_text_and_json(tmp_path, capsys):
    from memoryscope_plugins import Memory, MemoryScope, MemoryStatus, MemoryType
    from memoryscope_plugins.procedures.scope import procedure_scope

    path = str(tmp_path / "procedures.db")
    scope = procedure_scope("acme:anna", "travel")
    with MemoryScope(path=path) as memory:
        kept = Memory(id="p-new", user_id=scope, agent_id="travel", type=MemoryType.PROCEDURE,
                      content="When searching flights: call flights with an IATA code (why: call 2 failed)",
                      metadata={"tools": ["flights"], "runs": 2, "uses": 3, "successes": 2, "failures": 1,
                                "weight": 1.5})
        old = Memory(id="p-old", user_id=scope, agent_id="travel", type=MemoryType.PROCEDURE,
                     content="When searching flights: call flights with a city name", status=MemoryStatus.EXPIRED,
                     superseded_by="p-new", metadata={"tools": ["flights"]})
        memory.store.put([kept, old], memory.embedder.embed([kept.content, old.content], kind="document"))
    capsys.readouterr()
    out = _run(capsys, "procedures", "travel", "--team", "acme", "--store", path).splitlines()
    assert out == ["p-new: When searching flights: call flights with an IATA code (why: call 2 failed)",
                   "  tools flights; runs 2, uses 3 (2 succeeded, 1 failed), weight 1.50"]
    both = json.loads(_run(capsys, "procedures", "travel", "--team", "acme", "--all", "--json", "--store", path))
    assert {m["id"]: m["status"] for m in both} == {"p-new": "active", "p-old": "expired"}
    assert "no procedures of agent 'travel'" in _run(capsys, "procedures", "travel", "--store", path)
