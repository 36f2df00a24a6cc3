"""The framework-free part of tool-call capture: pairing calls with results, and whatever the model
or the tool produced becoming a call the engine records (adapters/_tool_capture.py)."""

from __future__ import annotations

import math

import pytest

from memoryscope_plugins.adapters._tool_capture import (
    CUT,
    UNPARSED,
    CallSeen,
    ResultSeen,
    arguments_of,
    tool_messages,
    tool_name,
)
from memoryscope_plugins.tool_calls import MAX_ARGUMENT_CHARS

LIMIT = 1000


def test_results_pair_with_their_calls_by_id_and_unanswered_calls_are_left_out(engine):
    calls = [CallSeen("a", '{"x": 1}', "1"), CallSeen("b", {"y": "z"}, "2"), CallSeen("c", None, "3")]
    results = [ResultSeen("2", "boom", failed=True, duration_ms=12.5), ResultSeen("1", "fine")]
    messages = tool_messages(calls, results, max_chars=LIMIT, durations={"1": 3.0})
    assert [m["tool_call"]["call_id"] for m in messages] == ["1", "2"]  # the calls' order; "3" got no result
    first, second = (m["tool_call"] for m in messages)
    assert (first["status"], first["result"], first["arguments"], first["duration_ms"]) == ("ok", "fine", {"x": 1}, 3.0)
    assert (second["status"], second["error"], second["duration_ms"]) == ("error", "boom", 12.5)
    engine.record("anna", messages, agent_id="scout")
    assert sorted((s.tool, s.calls, s.failures) for s in engine.tool_stats("scout")) == [("a", 1, 0), ("b", 1, 1)]


def test_results_without_ids_pair_by_tool_name_in_order():
    calls = [CallSeen("a", {}, None), CallSeen("a", {}, None), CallSeen("b", {}, None)]
    results = [ResultSeen(None, "first", name="a"), ResultSeen(None, "second", name="a")]
    assert [m["tool_call"]["result"] for m in tool_messages(calls, results, max_chars=LIMIT)] == ["first", "second"]


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"city": "Oslo"}', {"city": "Oslo"}),
    ({"city": "Oslo", "days": 3}, {"city": "Oslo", "days": 3}),
    (None, {}), ("", {}),
    ("{city: Oslo", {UNPARSED: "{city: Oslo"}),
    ('["Oslo"]', {UNPARSED: '["Oslo"]'}),
    ("42", {UNPARSED: "42"}),
    ({1: "a"}, {"1": "a"}),  # as JSON writes it
    ({"x": math.nan}, {UNPARSED: "{'x': nan}"}),
    ({"when": object}, {"when": str(object)}),
])
def test_arguments_become_a_json_object_or_their_text(raw, expected):
    assert arguments_of(raw, LIMIT) == expected


def test_huge_deep_and_broken_arguments_are_kept_as_cut_text(engine):
    huge = arguments_of({"q": "x" * (MAX_ARGUMENT_CHARS + 10)}, 100_000)
    assert list(huge) == [UNPARSED] and huge[UNPARSED].endswith(CUT)
    deep: dict = {}
    node = deep
    for _ in range(40):
        node["a"] = node = {}
    assert list(arguments_of(deep, LIMIT)) == [UNPARSED]
    broken = arguments_of('{"q": "a\\u0000b\\ud800"}', LIMIT)
    assert list(broken) == [UNPARSED] and "\x00" not in broken[UNPARSED]
    calls = [CallSeen("search", raw, str(i)) for i, raw in enumerate([huge, deep, '{"q": "a\\u0000b\\ud800"}'])]
    messages = tool_messages(calls, [ResultSeen(str(i), "r") for i in range(3)], max_chars=LIMIT)
    engine.record("anna", messages, agent_id="scout")
    assert engine.tool_stats("scout")[0].calls == 3


def test_names_results_and_ids_the_engine_would_refuse_are_made_safe(engine):
    assert tool_name("get weather/now") == "get_weather_now"
    assert tool_name("-x") == "_-x" and tool_name("") == "unnamed_tool" and tool_name("a" * 300) == "a" * 128
    calls = [CallSeen("get weather", {}, "id\nwith newline"), CallSeen("ok", {}, "2")]
    results = [ResultSeen("id\nwith newline", "x\x00" * LIMIT), ResultSeen("2", "\ud800", failed=True, duration_ms=-1)]
    messages = tool_messages(calls, results, max_chars=LIMIT)
    first, second = (m["tool_call"] for m in messages)
    assert first["call_id"] is None  # not printable: the call is kept without it
    assert len(first["result"]) == LIMIT and first["result"].endswith(CUT) and "\x00" not in first["result"]
    assert second["duration_ms"] is None and second["error"] == "?"
    engine.record("anna", messages, agent_id="scout")
    assert sorted(s.tool for s in engine.tool_stats("scout")) == ["get_weather", "ok"]
