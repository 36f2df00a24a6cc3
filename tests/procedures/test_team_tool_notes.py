"""`retrieve(..., tools=[...])`'s tool notes over a team: the figures of the tools that failed before,
summed over the agent's calls for every user of the asking user's team (tenant), never another team's,
holding no value a user gave; nothing read without tools (no model: the store and embedder are real)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.errors import ValidationError

AGENT = "concierge"
T0 = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
# what anna gave: none of it may reach another user's context or notes
PRIVATE = ("Friday", "Anna", "Smith", "anna.smith@example.com", "2026-05-08", "88123", "nuts", "Rosa")


def call(tool: str, minute: int, *, error: str | None = None, **arguments: object) -> dict:
    body: dict = {"name": tool, "arguments": arguments, "duration_ms": 100 + minute}
    body.update({"error": error} if error else {"result": "done"})
    return {"role": "tool", "tool_call": body, "timestamp": T0 + timedelta(minutes=minute)}


def anna_calls() -> list[dict]:
    return [
        {"role": "user", "content": "Book Rosa's for Friday, I am allergic to nuts", "timestamp": T0},
        call("find_restaurant", 1, name="Rosa's"),
        call("book_table", 2, error="Invalid date 'Friday' for anna.smith@example.com: expected YYYY-MM-DD",
             guest="Anna Smith", day="Friday", notes={"allergy": "nuts"}),
        call("book_table", 3, error="No table free for Anna Smith on 2026-05-08 (booking 88123)",
             guest="Anna Smith", day="2026-05-08"),
        call("book_table", 4, guest="Anna Smith", day="2026-05-09"),
    ]


@pytest.fixture
def engine(tmp_path, local_embedder):
    settings = Settings(store={"path": tmp_path / "memory.db"}, procedures={"enabled": True},
                        consolidation={"worker": "none"})
    memory = MemoryScope(settings, embedder=local_embedder, start_worker=False)
    memory.record("acme:anna", anna_calls(), agent_id=AGENT)
    memory.record("acme:carl", [call("book_table", 5, error="Invalid date 'Monday': expected YYYY-MM-DD", day="Mon")],
                  agent_id=AGENT)
    memory.record("acme:carl", [call("book_table", 6, error="Timeout", day="Mon")], agent_id="other-agent")
    memory.record("globex:dan", [call("book_table", 7, error="Quota exceeded", day="x"),
                                 call("find_restaurant", 8, error="Quota exceeded", name="y")], agent_id=AGENT)
    memory.record("eve", [call("book_table", 9, error="Rate limited", day="z")], agent_id=AGENT)
    yield memory
    memory.close()


TASK = "reserve a restaurant table for next Tuesday"


def test_a_user_is_warned_of_the_failures_of_the_other_users_of_their_team(engine):
    result = engine.retrieve("acme:ben", TASK, agent_id=AGENT, tools=["book_table", "find_restaurant"])
    # counted by hand: anna's 3 book_table calls (2 failed) and carl's 1 (failed); find_restaurant never failed;
    # not carl's call for another agent, not globex's nor eve's
    [note] = result.tool_notes
    assert (note.tool, note.calls, note.failures, note.unknown) == ("book_table", 4, 3, 0)
    assert note.errors == [("Invalid date <str> for <email>: expected YYYY-MM-DD", 1)]
    assert note.error_kinds == 3 and note.shapes == [("{day:str,guest:str}", 1, 1)] and note.shape_kinds == 3
    assert "Tools that failed before:\n- book_table: 3 of 4 calls failed; most often: Invalid date <str> for " \
           "<email>: expected YYYY-MM-DD" in result.context
    assert "find_restaurant" not in result.context
    shown = f"{result.context} {[n.to_dict() for n in result.tool_notes]}"
    assert [word for word in PRIVATE if word in shown] == []
    twin = asyncio.run(engine.aretrieve("acme:ben", TASK, agent_id=AGENT, tools=["book_table", "find_restaurant"]))
    assert twin.context == result.context and twin.tool_notes == result.tool_notes


def test_another_teams_failures_are_never_counted(engine):
    [globex] = engine.retrieve("globex:bob", TASK, agent_id=AGENT, tools=["book_table"]).tool_notes
    assert (globex.calls, globex.failures, globex.errors) == (1, 1, [("Quota exceeded", 1)])
    [plain] = engine.retrieve("frank", TASK, agent_id=AGENT, tools=["book_table"]).tool_notes  # ids without ':'
    assert (plain.calls, plain.failures, plain.errors) == (1, 1, [("Rate limited", 1)])
    assert engine.retrieve("initech:zoe", TASK, agent_id=AGENT, tools=["book_table"]).tool_notes == []
    other = engine.retrieve("acme:ben", TASK, agent_id="other-agent", tools=["book_table"]).tool_notes
    assert [(n.calls, n.errors) for n in other] == [(1, [("Timeout", 1)])]


def test_the_teams_figures_follow_a_deleted_user(engine):
    engine.delete_all("acme:anna")
    [note] = engine.retrieve("acme:ben", TASK, agent_id=AGENT, tools=["book_table"]).tool_notes
    assert (note.calls, note.failures) == (1, 1)


def test_without_tools_no_counter_is_read_and_each_tool_is_read_once(engine, monkeypatch):
    reads: list[dict] = []
    real = engine.store.tool_counters

    def counted(agent_id, **kwargs):
        reads.append({"agent_id": agent_id, **kwargs})
        return real(agent_id, **kwargs)

    monkeypatch.setattr(engine.store, "tool_counters", counted)
    engine.retrieve("acme:ben", TASK, agent_id=AGENT)
    engine.retrieve("acme:ben", TASK, agent_id=AGENT, tools=[])
    assert reads == []
    engine.retrieve("acme:ben", TASK, agent_id=AGENT, tools=["book_table", "find_restaurant", "book_table"])
    assert reads == [{"agent_id": AGENT, "tool": tool, "user_id": None, "team": "acme"}
                     for tool in ("book_table", "find_restaurant")]


def test_tool_stats_of_a_team_are_checked(engine):
    assert [(s.tool, s.calls) for s in engine.tool_stats(AGENT, team="acme")] == [("book_table", 4),
                                                                                 ("find_restaurant", 1)]
    assert [(s.tool, s.calls) for s in engine.tool_stats(AGENT, team="")] == [("book_table", 1)]
    for bad in ("acme:anna", 3, "a/b", " "):
        with pytest.raises(ValidationError, match="team"):
            engine.tool_stats(AGENT, team=bad)
    with pytest.raises(ValidationError, match="user_id or team"):
        engine.tool_stats(AGENT, user_id="acme:anna", team="acme")
