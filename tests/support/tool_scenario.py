"""The tool-call scenario every adapter's capture test runs (issue 43): the fake model asks for
two real tools in one turn, one succeeds and one raises; the run is then checked the same way for
every framework: `tool_stats` holds exactly those two calls, the user's memories hold none of the
tools' output, and the message log holds each call once.
"""

from __future__ import annotations

from typing import Any

from memoryscope_plugins import MemoryScope

REQUEST = "Book me a table at Rosa and tell me the weather in Oslo."
FORECAST = "forecast: 14C and clear"  # what the weather tool returns (never a memory of the user)
FULL = "no table free at Rosa on Friday"  # what the booking tool raises
ANSWER = "It will be clear in Oslo, but Rosa is full on Friday."
WEATHER_ARGS = '{"city": "Oslo"}'
BOOKING_ARGS = '{"restaurant": "Rosa", "day": "Friday"}'


def weather(city: str) -> str:
    """Today's weather in a city."""
    return FORECAST


def book_table(restaurant: str, day: str) -> str:
    """Book a table at a restaurant."""
    raise RuntimeError(FULL)


def logged_calls(engine: MemoryScope, user_id: str, agent_id: str | None = None) -> list[Any]:
    """The tool calls in the user's message log (of one agent, when given), oldest first."""
    logged = engine.store.recent_messages(user_id, agent_id, None, 100)
    return sorted((m for m in logged if m.message.tool_call is not None), key=lambda m: m.message.timestamp)


def check_run(engine: MemoryScope, user_id: str, agent_id: str, *, timed: bool,
              weather_name: str = "weather", booking_name: str = "book_table",
              call_ids: tuple[str, str] | None = None) -> None:
    """The checks every framework's scenario ends with (see the module docstring)."""
    stats = {s.tool: s for s in engine.tool_stats(agent_id)}
    assert sorted(stats) == sorted([weather_name, booking_name])
    ok, failed = stats[weather_name], stats[booking_name]
    assert (ok.calls, ok.failures, ok.shapes) == (1, 0, [("{city:str}", 1, 0)])
    assert (failed.calls, failed.failures, failed.shapes) == (1, 1, [("{day:str,restaurant:str}", 0, 1)])
    assert len(failed.errors) == 1 and failed.errors[0][1] == 1
    # the error repeats the call's values ("at Rosa on Friday"): counted without them
    assert "<str>" in failed.errors[0][0] and "Rosa" not in failed.errors[0][0] and "Friday" not in failed.errors[0][0]
    if timed:
        assert ok.timed_calls == 1 and failed.timed_calls == 1
    memories = engine.list(user_id)
    assert memories and {m.role for m in memories} <= {"user", "assistant"}
    assert all(FORECAST not in m.content and FULL not in m.content for m in memories)
    # by name: a framework running the two tools concurrently logs them in the order they ended
    calls = sorted((m.message.tool_call for m in logged_calls(engine, user_id, agent_id)),
                   key=lambda c: c.name != weather_name)
    assert [(c.name, c.status) for c in calls] == [(weather_name, "ok"), (booking_name, "error")]
    assert calls[0].arguments == {"city": "Oslo"} and calls[0].result == FORECAST
    assert calls[1].arguments == {"restaurant": "Rosa", "day": "Friday"} and FULL in (calls[1].error or "")
    if call_ids is not None:
        assert tuple(c.call_id for c in calls) == call_ids
