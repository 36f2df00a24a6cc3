"""Tool calls through `MemoryScope.record` and `tool_stats` (issue 43, the model-free part): what
the entry point accepts and refuses, that a call is the agent's and never the user's memory, and
that the statistics are exact and scoped."""

from __future__ import annotations

import asyncio
import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings, strategies as st

from memoryscope_plugins import Message, ToolCall, ToolStats
from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.storage.records import TOOL_CALL_KEY
from memoryscope_plugins.tool_calls import (
    GROWTH,
    MAX_ARGUMENT_CHARS,
    MAX_ERROR_CHARS,
    MAX_ERROR_INPUT_CHARS,
    argument_shape,
    bucket_bound,
    latency_bound,
    latency_bucket,
    normalise_error,
)

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=timezone.utc)


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def test_a_run_with_tool_calls_keeps_the_conversation_and_counts_the_calls(engine):
    ids = engine.record("anna", [
        {"role": "user", "content": "Book me a table at Rosa's for Friday", "timestamp": at(0)},
        {"role": "tool", "tool_call": {"name": "find_restaurant", "arguments": {"name": "Rosa's"},
                                       "result": "Rosa's, 12 High St", "duration_ms": 210}, "timestamp": at(1)},
        {"tool_call": ToolCall(name="book_table", arguments={"restaurant_id": 77, "day": "Friday"},
                               error="No table free on 2026-05-08 for Anna Berg", duration_ms=900),
         "timestamp": at(2)},
        {"role": "assistant", "content": "Rosa's is full on Friday, sorry.", "timestamp": at(3)},
    ], agent_id="concierge")
    assert len(ids) == 4 and len(set(ids)) == 4
    turns = engine.list("anna")
    assert {m.role for m in turns} == {"user", "assistant"}  # no tool output among the user's memories
    assert {m.id for m in turns} == {ids[0], ids[3]}
    reply = next(m for m in turns if m.role == "assistant")
    assert reply.previous_id == ids[0]  # the conversation's turns link past the tool calls
    hits = engine.retrieve("anna", "12 High St", top_k=10)
    assert all("High St" not in h.memory.content for h in hits)
    logged = engine.store.recent_messages("anna", None, None, 10)
    assert [(m.id, m.state) for m in logged] == list(zip(ids, ["pending", "done", "done", "pending"]))
    assert logged[2].message.tool_call == ToolCall(
        name="book_table", arguments={"restaurant_id": 77, "day": "Friday"}, status="error",
        error="No table free on 2026-05-08 for Anna Berg", duration_ms=900.0)
    assert logged[2].message.content == "No table free on 2026-05-08 for Anna Berg"
    assert engine.tool_stats("concierge") == [
        ToolStats(agent_id="concierge", tool="book_table", calls=1, failures=1,
                  errors=[("No table free on <n> for <name> <name>", 1)], error_kinds=1, timed_calls=1,
                  p50_ms=latency_bound(900), p95_ms=latency_bound(900),
                  shapes=[("{day:str,restaurant_id:int}", 0, 1)], shape_kinds=1, first_used=at(2), last_used=at(2)),
        ToolStats(agent_id="concierge", tool="find_restaurant", calls=1, failures=0, timed_calls=1,
                  p50_ms=latency_bound(210), p95_ms=latency_bound(210), shapes=[("{name:str}", 1, 0)],
                  shape_kinds=1, first_used=at(1), last_used=at(1)),
    ]


def test_tool_calls_alone_make_no_memory_and_stay_with_their_agent(engine):
    ids = engine.record("anna", [Message(role="tool", content="", timestamp=at(5), tool_call=ToolCall(
        name="search", arguments={"q": "x"}, result="found"))], agent_id="scout")
    engine.record("ben", [{"tool_call": {"name": "search", "arguments": {"q": "y", "page": 2},
                                         "status": "error"}}], agent_id="scout")
    engine.record("ben", [{"tool_call": {"name": "search"}}], agent_id="other")
    assert len(ids) == 1 and engine.list("anna") == [] and engine.count("anna") == 0
    [scout] = engine.tool_stats("scout")
    assert (scout.calls, scout.failures, scout.errors, scout.timed_calls, scout.p50_ms) == (
        2, 1, [("<no message>", 1)], 0, None)
    assert [(s.calls, s.failures) for s in engine.tool_stats("scout", user_id="ben")] == [(1, 1)]
    assert [(s.calls, s.shapes) for s in engine.tool_stats("other")] == [(1, [("{}", 1, 0)])]
    assert engine.tool_stats("scout", "missing") == [] and engine.tool_stats("nobody") == []
    assert engine.store.pending_messages("anna") == []  # nothing for consolidation


def test_deleting_a_user_takes_their_calls_out_of_the_statistics(engine):
    engine.record("anna", [{"tool_call": {"name": "search", "result": "a"}}], agent_id="scout")
    engine.record("ben", [{"tool_call": {"name": "search", "error": "boom"}}], agent_id="scout")
    engine.delete_all("ben")
    [search] = engine.tool_stats("scout")
    assert (search.calls, search.failures) == (1, 0)


def test_the_async_twin_gives_the_same_answer(engine):
    engine.record("anna", [{"tool_call": {"name": "search", "result": "a", "duration_ms": 3}}], agent_id="scout")
    assert asyncio.run(engine.atool_stats("scout", "search")) == engine.tool_stats("scout", "search")


BAD_MESSAGES = [
    ({"tool_call": "search"}, "must be a ToolCall or a dict"),
    ({"tool_call": {"name": "search", "args": {}}}, "unknown keys ['args']"),
    ({"tool_call": {"name": ""}}, "name must be a tool name"),
    ({"tool_call": {"name": "a/b"}}, "name must be a tool name"),
    ({"tool_call": {"name": 3}}, "name must be a tool name"),
    ({"tool_call": {"name": "s", "arguments": ["x"]}}, "arguments must be a JSON object"),
    ({"tool_call": {"name": "s", "arguments": {"x": float("nan")}}}, "arguments must be JSON"),
    ({"tool_call": {"name": "s", "arguments": {"x": object()}}}, "arguments must be JSON"),
    ({"tool_call": {"name": "s", "arguments": {1: "x"}}}, "arguments must be JSON"),
    ({"tool_call": {"name": "s", "arguments": {"x": "y" * MAX_ARGUMENT_CHARS}}}, "the limit is"),
    ({"tool_call": {"name": "s", "arguments": {"x": "a\x00"}}}, "NUL"),
    ({"tool_call": {"name": "s", "status": "maybe"}}, "status must be one of"),
    ({"tool_call": {"name": "s", "status": "ok", "error": "e"}}, "has an error but status 'ok'"),
    ({"tool_call": {"name": "s", "status": "error", "result": "r"}}, "has a result but status 'error'"),
    ({"tool_call": {"name": "s", "status": "unknown", "result": "r"}}, "has status 'unknown'"),
    ({"tool_call": {"name": "s", "status": "unknown", "error": "e"}}, "has status 'unknown'"),
    ({"tool_call": {"name": "s", "result": 5}}, "result must be a string"),
    ({"tool_call": {"name": "s", "duration_ms": -1}}, "duration_ms must be from 0"),
    ({"tool_call": {"name": "s", "duration_ms": math.inf}}, "duration_ms must be from 0"),
    ({"tool_call": {"name": "s", "duration_ms": True}}, "duration_ms must be a number"),
    ({"tool_call": {"name": "s", "duration_ms": "5"}}, "duration_ms must be a number"),
    ({"tool_call": {"name": "s", "call_id": "a\nb"}}, "call_id must be"),
    ({"tool_call": {"name": "s", "arguments": {"a": {2: 1}}}}, "a key is not a string"),
    ({"role": "user", "tool_call": {"name": "s"}}, "its role must be 'tool'"),
    ({"tool_call": {"name": "s", "result": "r"}, "content": "something else"}, "content must be empty or"),
    ({"role": "user", "content": "hi", "metadata": {TOOL_CALL_KEY: 1}}, "reserved key"),
]


@pytest.mark.parametrize("message,expected", BAD_MESSAGES, ids=[e for _, e in BAD_MESSAGES])
def test_a_bad_tool_call_is_refused_clearly_and_nothing_is_written(engine, message, expected):
    with pytest.raises(ValidationError, match=expected.replace("(", r"\(").replace("[", r"\[")):
        engine.record("anna", [{"role": "user", "content": "first"}, message], agent_id="scout")
    assert engine.count("anna") == 0 and engine.tool_stats("scout") == []


def test_a_huge_result_is_refused_like_huge_content(engine):
    limit = engine.settings.max_content_chars
    with pytest.raises(ValidationError, match="result has"):
        engine.record("anna", [{"tool_call": {"name": "s", "result": "x" * (limit + 1)}}])


@pytest.mark.parametrize("call,expected", [
    ({"agent_id": ""}, "agent_id"), ({"agent_id": 5}, "agent_id"), ({"tool": "a b"}, "tool must be"),
    ({"tool": 3}, "tool must be"), ({"top": 0}, "top must be between"), ({"top": True}, "top must be an integer"),
    ({"user_id": ""}, "user_id"),
])
def test_tool_stats_checks_its_arguments(engine, call, expected):
    kwargs = {"agent_id": "scout", **call}
    with pytest.raises(ValidationError, match=expected):
        engine.tool_stats(**kwargs)


def test_top_keeps_the_most_frequent_errors_and_shapes(engine):
    errors = ["disk full"] * 3 + ["quota exceeded"] * 2 + ["bad gateway"]
    engine.record("anna", [{"tool_call": {"name": "upload", "error": e, "arguments": {"n": i} if i % 2 else {}}}
                           for i, e in enumerate(errors)], agent_id="scout")
    [upload] = engine.tool_stats("scout", top=2)
    assert upload.errors == [("disk full", 3), ("quota exceeded", 2)] and upload.error_kinds == 3
    assert upload.shapes == [("{n:int}", 0, 3), ("{}", 0, 3)] and upload.shape_kinds == 2


# -- what the statistics keep of a call ------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("Contact 'Ann Lee' not found (id 4411)", "Contact <str> not found (id <n>)"),
    ('KeyError: "user_email"', "KeyError: <str>"),
    ("No route to Leeds from Paris", "No route to <name> from <name>"),
    ("HTTP 503 from https://api.example.com/x?token=abc", "HTTP <n> from <url>"),
    ("cannot open /home/anna/notes/diary.txt", "cannot open <path>"),
    ("mail to anna.berg@example.org bounced", "mail to <email> bounced"),
    ("order 9f8e7d6c5b4a3f2e1d0c failed", "order <id> failed"),
    ("request 123e4567-e89b-12d3-a456-426614174000 timed out", "request <id> timed out"),
    ("ValueError: Invalid date. Use ISO dates", "ValueError: Invalid date. Use ISO dates"),
    ("  many\n\nspaces  ", "many spaces"),
    ("", "<no message>"),
    (None, "<no message>"),
])
def test_errors_are_normalised(text, expected):
    assert normalise_error(text) == expected


@pytest.mark.parametrize(("text", "arguments", "expected"), [
    ("未知的城市编码：成都", {"city": "成都"}, "未知的城市编码：<str>"),
    ("no flights to oslo on monday", {"to": "oslo", "day": "monday"}, "no flights to <str> on <str>"),
    ("code de is not supported", {"target": "de"}, "code <str> is not supported"),  # not inside "code"
    ("unknown carrier dhl express; carriers: DHL", {"carrier": "dhl express"}, "unknown carrier <str>; carriers: DHL"),
    ("no room for anna", {"guests": [{"name": "anna"}]}, "no room for <str>"),  # at any depth
    ("limit x too high", {"limit": "x"}, "limit x too high"),  # one character: no value to hide
    ("timeout", {}, "timeout"),
])
def test_an_error_loses_the_values_the_call_was_given(text, arguments, expected):
    assert normalise_error(text, arguments) == expected


def test_a_long_error_is_cut():
    out = normalise_error("word " * 100)
    assert len(out) == MAX_ERROR_CHARS and out.endswith("...")


@pytest.mark.parametrize("text", ["Word " * 20_000, "x@" * 50_000, 'bad "' + "secret " * 20_000 + '"'])
def test_only_the_start_of_a_huge_error_is_normalised(text):
    """At most `MAX_ERROR_INPUT_CHARS` are read (the regular expressions are not linear in the text's
    length); a quote still open there is a placeholder, never the quoted words."""
    out = normalise_error(text)
    assert len(out) <= MAX_ERROR_CHARS and "secret" not in out
    assert out == normalise_error(text[:MAX_ERROR_INPUT_CHARS])


def test_an_argument_shape_names_top_level_arguments_and_types_never_values():
    assert argument_shape({"city": "Leeds", "days": 3, "when": None, "ok": True, "ratio": 0.5,
                           "tags": ["x"], "opts": {"secret": "s3cr3t"}}) == \
        "{city:str,days:int,ok:bool,opts:object,ratio:float,tags:list,when:null}"
    assert argument_shape({"Anna Berg": 1, "ok": 2}) == "{<key>:int,ok:int}"
    assert argument_shape({}) == "{}"
    assert argument_shape({f"a{i:02d}": 1 for i in range(40)}).endswith(",a31:int,+8}")


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=0, max_value=7 * 24 * 3600 * 1000.0, allow_nan=False))
def test_a_latency_is_reported_at_most_one_bucket_above_its_value(ms):
    bucket = latency_bucket(ms)
    assert bucket_bound(bucket) >= ms
    assert bucket == 0 or bucket_bound(bucket - 1) < ms
    assert latency_bound(ms) < max(1.0001, ms * 1.045)  # what the docs promise: < 4.5 % above
    assert GROWTH < 1.045


def test_a_logged_call_with_fields_of_a_later_release_still_reads():
    from memoryscope_plugins.storage import records
    row = records.message_values("m1", "anna", "scout", None, Message(
        role="tool", content="r", timestamp=T0, tool_call=ToolCall(name="search", result="r", status="ok")), "done")
    stored = row[:8] + (row[8].replace('"call_id": null', '"call_id": null, "retries": 2'),) + row[9:]
    assert '"retries": 2' in stored[8]
    read = records.message_from_row([*stored[:9], 1, stored[9], 0])  # MESSAGE_COLUMNS: seq, state, attempts
    assert read.message.tool_call == ToolCall(name="search", result="r", status="ok")


def test_a_call_whose_outcome_was_never_seen_counts_as_neither(engine):
    engine.record("anna", [{"role": "user", "content": "Book Rosa"},
                           {"role": "tool", "tool_call": {"name": "book", "arguments": {"day": "Fri"}, "result": "ok"}},
                           {"role": "tool", "tool_call": {"name": "book", "arguments": {"day": "Sat"},
                                                          "status": "unknown", "call_id": "c2"}}], agent_id="scout")
    [stats] = engine.tool_stats("scout")
    assert (stats.calls, stats.failures, stats.unknown, stats.shapes) == (2, 0, 1, [("{day:str}", 1, 0)])
    assert stats.to_dict()["unknown"] == 1
    logged = [m.message.tool_call for m in engine.store.recent_messages("anna", "scout", None, 10)
              if m.message.tool_call is not None]
    assert [(c.status, c.result, c.error, c.call_id) for c in logged] == [("ok", "ok", None, None),
                                                                          ("unknown", None, None, "c2")]
    assert engine.list("anna")[0].content == "Book Rosa"  # a call is never the user's memory, known or not
