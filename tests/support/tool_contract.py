"""The tool statistics' part of the store contract (imported by tests/storage/test_store_contract.py,
which runs it on SQLite, PostgreSQL and Elasticsearch): a scripted run of tool calls, counted by hand,
must give the same statistics on every store; duplicates, deletes, renames, copies and concurrent
writers must keep them the exact fold of the logged calls."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins.errors import StoreError
from memoryscope_plugins.tool_calls import latency_bound
from memoryscope_plugins.tool_stats import fold
from memoryscope_plugins.types import Message, ToolCall, ToolStats

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def call(name: str, minute: int, *, args: dict | None = None, error: str | None = None,
         ms: float | None = None, result: str | None = None) -> Message:
    tool = ToolCall(name=name, arguments=args or {}, status="error" if error is not None else "ok",
                    result=result if error is None else None, error=error, duration_ms=ms)
    return Message(role="tool", content=result if error is None and result is not None else (error or ""),
                   timestamp=T0 + timedelta(minutes=minute), tool_call=tool)


def scripted_run() -> dict[str, list[Message]]:
    """Two users' runs of agent "planner" (and one call of another agent, which must not count)."""
    alice = [
        Message(role="user", content="Find me a train to Leeds", timestamp=T0),
        call("search", 1, args={"q": "train Leeds", "limit": 5}, ms=120, result="3 trains"),
        call("search", 2, args={"q": "train Leeds"}, ms=80, result="3 trains"),
        call("search", 3, args={"q": "x", "limit": "5"}, ms=2500,
             error="Timeout after 2500 ms calling https://api.example.com/v1/search?q=Leeds"),
        call("book", 4, args={"train_id": "T-9912", "seat": {"class": "first"}}, ms=640,
             error="Seat 'A12' already taken for Alice Smith"),
        call("book", 5, args={"train_id": "T-9913", "seat": {"class": "first"}}, ms=700, result="booked"),
    ]
    bob = [
        call("search", 10, args={"q": "hotel"}, ms=95, result="2 hotels"),
        call("search", 11, args={"q": "hotel", "limit": 2}, ms=3000, error="Timeout after 3000 ms calling "
             "https://api.example.com/v1/search?q=hotel"),
        call("book", 12, args={"train_id": "T-1"}, error="Seat 'B7' already taken for Bob Jones"),
    ]
    other = [call("search", 20, args={"q": "secret"}, ms=5, result="none")]
    return {"alice": alice, "bob": bob, "other": other}


def record_run(store) -> None:
    run = scripted_run()
    store.append_messages("alice", "planner", run["alice"])
    store.append_messages("bob", "planner", run["bob"])
    store.append_messages("alice", "other-agent", run["other"])


TIMEOUT = "Timeout after <n> ms calling <url>"
TAKEN = "Seat <str> already taken for <name> <name>"
# counted by hand from `scripted_run`
EXPECTED = [
    ToolStats(agent_id="planner", tool="book", calls=3, failures=2, errors=[(TAKEN, 2)], error_kinds=1,
              timed_calls=2, p50_ms=latency_bound(640), p95_ms=latency_bound(700),
              shapes=[("{seat:object,train_id:str}", 1, 1), ("{train_id:str}", 0, 1)], shape_kinds=2,
              first_used=T0 + timedelta(minutes=4), last_used=T0 + timedelta(minutes=12)),
    # durations 80, 95, 120, 2500, 3000: p50 is the 3rd (120), p95 the 5th (3000); shapes by use, ties by text
    ToolStats(agent_id="planner", tool="search", calls=5, failures=2, errors=[(TIMEOUT, 2)], error_kinds=1,
              timed_calls=5, p50_ms=latency_bound(120), p95_ms=latency_bound(3000),
              shapes=[("{limit:int,q:str}", 1, 1), ("{q:str}", 2, 0), ("{limit:str,q:str}", 0, 1)], shape_kinds=3,
              first_used=T0 + timedelta(minutes=1), last_used=T0 + timedelta(minutes=11)),
]


def stats(store, agent_id: str = "planner", **kw) -> list[ToolStats]:
    return fold(agent_id, store.tool_counters(agent_id, **kw), 10)


def test_tool_statistics_match_a_hand_count(store):
    record_run(store)
    assert stats(store) == EXPECTED
    assert stats(store, tool="book") == EXPECTED[:1]
    assert 120 <= EXPECTED[1].p50_ms < 120 * 1.045 and 3000 <= EXPECTED[1].p95_ms < 3000 * 1.045


def test_an_error_never_keeps_a_value_the_call_was_given(store):
    """A value the error repeats without quotes (lower case, or Chinese, which the placeholders alone
    keep) is counted as ``<str>``: the statistics an agent shares across a team carry no user's value."""
    store.append_messages("alice", "planner", [
        call("weather", 1, args={"city": "成都"}, error="未知的城市编码：成都"),
        call("weather", 2, args={"city": "oslo", "opts": {"near": ["bergen"]}}, error="unknown city oslo near bergen"),
        call("weather", 3, args={"city": "成都"}, error="未知的城市编码：成都"),
    ])
    [weather] = stats(store, tool="weather")
    assert weather.errors == [("未知的城市编码：<str>", 2), ("unknown city <str> near <str>", 1)]


def test_tool_statistics_are_per_agent_and_per_user_on_request(store):
    record_run(store)
    other = stats(store, "other-agent")
    assert [(s.tool, s.calls, s.p50_ms) for s in other] == [("search", 1, latency_bound(5))]
    bob = stats(store, user_id="bob")
    assert [(s.tool, s.calls, s.failures) for s in bob] == [("book", 1, 1), ("search", 2, 1)]
    assert stats(store, "nobody") == [] and stats(store, user_id="carol") == []


def test_a_tool_call_is_logged_done_and_reads_back_whole(store):
    message = call("book", 4, args={"train_id": "T-9912", "seat": {"class": "first"}}, ms=640, error="no seat")
    store.append_messages("alice", "planner", [Message(role="user", content="hi", timestamp=T0), message])
    logged = store.recent_messages("alice", None, None, 10)
    assert [m.state for m in logged] == ["pending", "done"]
    assert logged[1].message == message and logged[0].message.tool_call is None
    assert [m.message.content for m in store.pending_messages("alice")] == ["hi"]


def test_a_message_id_logged_twice_counts_once(store):
    run = scripted_run()["alice"]
    store.append_messages("alice", "planner", run, message_ids=[f"m{i}" for i in range(len(run))])
    with pytest.raises((StoreError, ValueError)):
        store.append_messages("alice", "planner", run[1:3], message_ids=["m1", "m2"])
    with pytest.raises((StoreError, ValueError)):  # a new id beside a logged one: nothing of the call kept
        store.append_messages("alice", "planner", run[1:3], message_ids=["fresh", "m2"])
    assert len(store.recent_messages("alice", None, None, 100)) == len(run)
    assert [(s.tool, s.calls, s.failures, s.timed_calls) for s in stats(store)] == [("book", 2, 1, 2),
                                                                                   ("search", 3, 1, 3)]


def test_deleting_or_renaming_a_user_takes_their_tool_counts(store):
    record_run(store)
    store.delete_user("bob")
    assert [(s.tool, s.calls) for s in stats(store)] == [("book", 2), ("search", 3)]
    store.rename_user("alice", "alicia")
    assert stats(store, user_id="alice") == []
    assert [(s.tool, s.calls) for s in stats(store, user_id="alicia")] == [("book", 2), ("search", 3)]
    store.append_messages("alicia", "planner", [call("book", 30, args={"train_id": "T-2"}, ms=10, result="ok")])
    assert [(s.tool, s.calls, s.last_used) for s in stats(store, tool="book")] == [
        ("book", 3, T0 + timedelta(minutes=30))]


def test_copying_a_log_rebuilds_the_counts_exactly(store, store_factory):
    record_run(store)
    assert stats(store_factory("model-a")) == EXPECTED  # the same data, read by another client
    logged = [m for user in ("alice", "bob") for batch in store.iter_messages(user) for m in batch]
    for user in ("alice", "bob"):
        store.delete_user(user)
    assert stats(store) == []
    store.copy_messages(logged)  # what `migrate` does to a target store
    assert stats(store) == EXPECTED


def test_concurrent_writers_lose_no_count(store, store_factory):
    stores = [store_factory("model-a") for _ in range(3)]
    errors: list[BaseException] = []

    def write(worker: int, target) -> None:
        try:
            for i in range(8):
                ok = (i + worker) % 3 != 0
                target.append_messages(f"user-{worker}", "planner", [call(
                    "search", i, args={"q": "x"}, ms=10.0 * (i + 1), result="r" if ok else None,
                    error=None if ok else f"failed on item {i}")])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w, s)) for w, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    [search] = stats(store)
    failures = sum(1 for w in range(3) for i in range(8) if (i + w) % 3 == 0)
    assert (search.calls, search.failures, search.timed_calls) == (24, failures, 24)
    assert search.errors == [("failed on item <n>", failures)]
    assert search.shapes == [("{q:str}", 24 - failures, failures)]


def test_a_call_without_an_outcome_counts_as_a_call_neither_failed_nor_succeeded(store):
    unseen = Message(role="tool", content="", timestamp=T0 + timedelta(minutes=40),
                     tool_call=ToolCall(name="book", arguments={"train_id": "T-3"}, status="unknown", duration_ms=50))
    record_run(store)
    store.append_messages("alice", "planner", [unseen])
    [book] = stats(store, tool="book")
    assert (book.calls, book.failures, book.unknown, book.timed_calls) == (4, 2, 1, 3)
    assert book.shapes == EXPECTED[0].shapes and book.errors == EXPECTED[0].errors  # in no shape, no error
    assert book.last_used == T0 + timedelta(minutes=40)
    assert store.recent_messages("alice", "planner", None, 1)[0].message == unseen  # reads back whole
    assert [s.unknown for s in stats(store, user_id="bob")] == [0, 0]


def record_teams(store) -> None:
    """Agent "planner"'s calls for users of teams (tenants: the user id's part before its first ':')
    "acme", "globex", "zürich" and "" (ids without ':'), with ids that share a team's letters
    without being of it ("acme", "acmex:carl", "acme;x"), and one call of another agent."""
    store.append_messages("acme:anna", "planner", [
        call("search", 1, args={"q": "train"}, ms=100, result="3 trains"),
        call("search", 2, args={"q": "train", "limit": 5}, ms=2500, error="Timeout after 2500 ms"),
        call("book", 3, args={"train_id": "T-1"}, ms=40, error="Seat 'A1' already taken")])
    store.append_messages("acme:ben", "planner", [
        call("search", 4, args={"q": "hotel"}, ms=300, result="2 hotels"),
        call("book", 5, args={"train_id": "T-2"}, ms=50, result="booked")])
    store.append_messages("acme:", "planner", [call("book", 6, args={"train_id": "T-3"}, result="booked")])
    for user in ("acme", "acmex:carl", "acme;x"):
        store.append_messages(user, "planner", [call("search", 7, args={"q": "x"}, error="Quota exceeded")])
    store.append_messages("globex:dan", "planner", [
        call("search", 8, args={"q": "y"}, error="Quota exceeded"),
        call("search", 9, args={"q": "y"}, error="Quota exceeded")])
    store.append_messages("zürich:eva", "planner", [call("search", 10, args={"q": "z"}, ms=7, result="1")])
    store.append_messages("plain", "planner", [call("search", 11, args={"q": "p"}, ms=9, result="1")])
    store.append_messages("acme:anna", "other-agent", [call("search", 12, args={"q": "o"}, error="Quota exceeded")])


# counted by hand from `record_teams`: team "acme" is acme:anna, acme:ben and acme: (not "acme",
# "acmex:carl", "acme;x", nor another agent's call)
ACME = [
    ToolStats(agent_id="planner", tool="book", calls=3, failures=1, errors=[("Seat <str> already taken", 1)],
              error_kinds=1, timed_calls=2, p50_ms=latency_bound(40), p95_ms=latency_bound(50),
              shapes=[("{train_id:str}", 2, 1)], shape_kinds=1,
              first_used=T0 + timedelta(minutes=3), last_used=T0 + timedelta(minutes=6)),
    ToolStats(agent_id="planner", tool="search", calls=3, failures=1, errors=[("Timeout after <n> ms", 1)],
              error_kinds=1, timed_calls=3, p50_ms=latency_bound(300), p95_ms=latency_bound(2500),
              shapes=[("{q:str}", 2, 0), ("{limit:int,q:str}", 0, 1)], shape_kinds=2,
              first_used=T0 + timedelta(minutes=1), last_used=T0 + timedelta(minutes=4)),
]


def test_a_teams_tool_statistics_sum_its_users_calls_and_no_other_teams(store):
    record_teams(store)
    assert stats(store, team="acme") == ACME
    assert stats(store, tool="search", team="acme") == ACME[1:]
    brief = {team: [(s.tool, s.calls, s.failures, s.errors) for s in stats(store, tool="search", team=team)]
             for team in ("", "acmex", "acme;x", "globex", "zürich", "nobody")}
    assert brief == {
        "": [("search", 3, 2, [("Quota exceeded", 2)])],  # "acme", "acme;x" and "plain": the ids without ':'
        "acmex": [("search", 1, 1, [("Quota exceeded", 1)])],
        "acme;x": [],  # no user id starts with "acme;x:"
        "globex": [("search", 2, 2, [("Quota exceeded", 2)])],
        "zürich": [("search", 1, 0, [])],
        "nobody": [],
    }
    assert [(s.tool, s.calls) for s in stats(store, "other-agent", team="acme")] == [("search", 1)]
    # the teams' figures add up to the agent's: every user is of exactly one team
    teams = ("", "acme", "acmex", "globex", "zürich")
    assert sum(s.calls for team in teams for s in stats(store, team=team)) == sum(s.calls for s in stats(store))


def test_a_teams_tool_statistics_follow_deletes_and_renames(store):
    record_teams(store)
    store.delete_user("acme:ben")
    assert [(s.tool, s.calls) for s in stats(store, team="acme")] == [("book", 2), ("search", 2)]
    store.rename_user("acme:anna", "globex:anna")  # moved to another team: counted there only
    assert [(s.tool, s.calls) for s in stats(store, team="acme")] == [("book", 1)]
    assert [(s.tool, s.calls, s.failures) for s in stats(store, team="globex")] == [("book", 1, 1), ("search", 4, 3)]
