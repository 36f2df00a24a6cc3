"""The store contract: what every `MemoryStore` backend must do, the same way.

A module of test functions that take two fixtures, supplied by the module that imports them
(`tests/test_store_contract.py` parametrises them over SQLite, PostgreSQL and Elasticsearch):

- ``store``: a fresh, empty store with ``embedding_model == "model-a"``;
- ``store_factory``: ``store_factory(embedding_model)`` opens another store object over the same
  data (another connection / client, as a second process would), closed by the fixture.

Importing ``from tests.support.store_contract import *`` collects every ``test_*`` function here.
"""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timedelta, timezone
from typing import cast

import numpy as np
import pytest

from memoryscope_plugins.errors import LeaseLostError, MessagesGoneError, StoreError
from memoryscope_plugins.storage.base import Candidate, MemoryFilter, SearchRequest
from memoryscope_plugins.storage.filtering import matches
from memoryscope_plugins.storage.leases import Lease
from memoryscope_plugins.storage.messages import is_forgotten
from memoryscope_plugins.types import Memory, MemoryStatus, MemoryType, Message, TimeRange, ToolCall

DIM = 16
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)
IST = timezone(timedelta(hours=5, minutes=30))
PST = timezone(timedelta(hours=-8))


def unit(seed: int, dim: int = DIM) -> np.ndarray:
    vec = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vec / np.linalg.norm(vec)


def near(base: np.ndarray, seed: int, noise: float) -> np.ndarray:
    vec = base + noise * unit(seed, base.shape[0])
    return (vec / np.linalg.norm(vec)).astype(np.float32)


def mem(id: str, user: str = "alice", content: str = "hello world", **kw) -> Memory:
    kw.setdefault("agent_id", "agent")
    kw.setdefault("created_at", T0)
    kw.setdefault("updated_at", T0)
    return Memory(id=id, user_id=user, content=content, **kw)


def ids(items) -> list[str]:
    return [m.memory.id if isinstance(m, Candidate) else m.id for m in items]


def same(a: Memory, b: Memory) -> None:
    """Field-by-field equality, times including their UTC offset; `embedding_model` is the store's."""
    for name in Memory.__slots__:
        if name == "embedding_model":
            continue
        va, vb = getattr(a, name), getattr(b, name)
        assert va == vb, f"{name}: {va!r} != {vb!r}"
        if isinstance(va, datetime):
            assert va.utcoffset() == vb.utcoffset(), f"{name} offset: {va!r} vs {vb!r}"


def text_search(store, user, text, **flt) -> list[Candidate]:
    return store.search(SearchRequest(user_id=user, text=text, vector=None, filter=MemoryFilter(**flt)))


def vector_search(store, user, vector, limit=50, **flt) -> list[Candidate]:
    return store.search(SearchRequest(user_id=user, text=None, vector=vector, filter=MemoryFilter(**flt),
                                      limit=limit))


# -- records round-trip ------------------------------------------------------------------------
def test_round_trip_every_field_exactly(store):
    memory = Memory(
        id="m-ü-1", user_id="Zoë 用户", agent_id="agent/ä",
        content="Ich zog im Mai nach Lissabon 🇵🇹 — 我搬到了里斯本。",
        type=MemoryType.OBSERVATION, status=MemoryStatus.ACTIVE,
        created_at=datetime(2023, 5, 8, 13, 56, 1, 123456, tzinfo=IST),
        updated_at=datetime(2023, 5, 9, 1, 2, 3, 999999, tzinfo=PST),
        event_start=datetime(2023, 5, 1, tzinfo=timezone.utc), event_end=datetime(2023, 5, 2, 6, 30, tzinfo=IST),
        speaker="Zoë", role="user", session_id="session 7", context="the turn before: «hi»",
        superseded_by=None, source_ids=["msg-1", "msg-2"], previous_id="m-ü-0",
        metadata={"dia_id": "D1:3", "nested": {"list": [1, 2.5, "x", None, True]}, "emoji": "😀", "n": 10 ** 15},
    )
    store.put([memory], np.stack([unit(1)]))
    (got,) = store.get("Zoë 用户", ["m-ü-1"])
    same(memory, got)
    assert got.embedding_model == "model-a"


@pytest.mark.parametrize("content", [
    "  leading and trailing spaces  ", "line one\nline two\r\n\ttabbed", "quotes ' \" ` and \\ backslashes \\n",
    "Robert'); DROP TABLE memories;-- %s %(x)s {x} $1", "<b>html</b> &amp; ☃ e\u0301 (combining) مرحبا", "x" * 100_000,
    "😀😃😄 🇯🇵 中文 日本語 한국어", "",
])
def test_content_is_never_altered(store, content):
    store.put([mem("c1", content=content)])
    assert store.get("alice", ["c1"])[0].content == content


def test_naive_times_are_taken_as_utc(store):
    store.put([mem("n1", created_at=datetime(2024, 1, 2, 3, 4, 5), updated_at=datetime(2024, 1, 2, 3, 4, 6))])
    got = store.get("alice", ["n1"])[0]
    assert got.created_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert got.created_at.utcoffset() == timedelta(0)


def test_put_replaces_fields_and_keeps_vector_when_none(store):
    store.put([mem("u1", content="first version about sailing")], np.stack([unit(1)]))
    store.put([mem("u1", content="second version about sailing boats", type=MemoryType.INSIGHT,
                   status=MemoryStatus.EXPIRED, superseded_by="u2")])
    got = store.get("alice", ["u1"])[0]
    assert got.content == "second version about sailing boats"
    assert (got.type, got.status, got.superseded_by) == (MemoryType.INSIGHT, MemoryStatus.EXPIRED, "u2")
    assert got.embedding_model == "model-a"
    found = vector_search(store, "alice", unit(1), statuses=None)
    assert ids(found) == ["u1"] and found[0].vector_score == pytest.approx(1.0, abs=2e-3)
    assert store.count_needing_vectors() == 0


def test_put_with_new_vector_replaces_it(store):
    store.put([mem("v1")], np.stack([unit(1)]))
    store.put([mem("v1")], np.stack([unit(2)]))
    (found,) = vector_search(store, "alice", unit(2))
    assert found.vector_score == pytest.approx(1.0, abs=2e-3)


def test_put_accepts_rows_without_vectors(store):
    store.put([mem("r1"), mem("r2")], [unit(1), None])
    assert ids(vector_search(store, "alice", unit(1))) == ["r1"]
    assert store.count_needing_vectors() == 1


def test_put_of_an_id_owned_by_another_user_is_refused(store):
    store.put([mem("shared", user="alice", content="alice's secret")])
    with pytest.raises(ValueError):
        store.put([mem("shared", user="bob", content="bob overwrites")])
    assert store.get("alice", ["shared"])[0].content == "alice's secret"
    assert store.get("bob", ["shared"]) == []


def test_a_batch_that_fails_midway_writes_nothing(store):
    store.put([mem("old", content="old content"), mem("theirs", user="bob")])
    batch = [mem("new1"), mem("old", content="changed content"), mem("theirs", user="alice"), mem("new2")]
    with pytest.raises(ValueError):
        store.put(batch, np.stack([unit(i) for i in range(4)]))
    assert store.get("alice", ["new1", "new2"]) == []
    assert store.get("alice", ["old"])[0].content == "old content"
    assert store.count("alice", MemoryFilter()) == 1
    assert vector_search(store, "alice", unit(0)) == []


def test_vectors_must_align_with_records(store):
    with pytest.raises(ValueError):
        store.put([mem("a1"), mem("a2")], np.stack([unit(1)]))
    assert store.count("alice", MemoryFilter()) == 0


def test_vectors_a_search_could_not_use_are_refused_whole(store):
    """Not finite, beyond what the store keeps, or of another width than the model's stored vectors
    (one such vector as a user's first made that user's every vector search fail)."""
    store.put([mem("v1")], np.stack([unit(1)]))
    for bad in (np.full(DIM, np.nan, dtype=np.float32), unit(2, DIM + 4), unit(3) * 1e6):
        with pytest.raises(ValueError):
            store.put([mem("v2"), mem("v3", user="bob")], [unit(4), bad])
        with pytest.raises(ValueError):
            store.set_vectors(["v1"], [bad])
    assert ids(store.get("alice", ["v1", "v2"])) == ["v1"] and store.get("bob", ["v3"]) == []
    assert ids(vector_search(store, "alice", unit(1))) == ["v1"]
    assert store.vectors_of("alice", ["v1"])["v1"] == pytest.approx(unit(1), abs=1e-3)


def test_set_vectors_leaves_a_memory_of_a_none_row_as_it_is(store):
    store.put([mem("n1"), mem("n2")], np.stack([unit(1), unit(2)]))
    store.set_vectors(["n1", "n2"], [None, unit(3)])
    vectors = store.vectors_of("alice", ["n1", "n2"])
    assert vectors["n1"] == pytest.approx(unit(1), abs=1e-3) and vectors["n2"] == pytest.approx(unit(3), abs=1e-3)


@pytest.mark.parametrize("bad", ["g1", b"g1", 5, [5], None])
def test_ids_that_are_not_a_list_of_strings_are_refused(store, bad):
    store.put([mem("g"), mem("1"), mem("g1")])
    with pytest.raises(ValueError):
        store.delete("alice", bad)  # a string was read letter by letter: "g1" deleted "g" and "1"
    with pytest.raises(ValueError):
        store.get("alice", bad)
    assert store.count("alice", MemoryFilter()) == 3


def test_a_filter_takes_a_list_or_the_values_of_its_members(store):
    store.put([mem("f1", type=MemoryType.INSIGHT), mem("f2")], np.stack([unit(1), unit(2)]))
    for given in ([MemoryType.INSIGHT], ("insight",), "insight", MemoryType.INSIGHT):
        flt = MemoryFilter(types=given)
        assert flt.types == (MemoryType.INSIGHT,)
        assert store.count("alice", flt) == 1 and ids(store.list("alice", flt)) == ["f1"]
        assert ids(vector_search(store, "alice", unit(2), types=given)) == ["f1"]
    for bad in (["planet"], 5, [None]):
        with pytest.raises(ValueError):
            MemoryFilter(types=bad)
    with pytest.raises(ValueError):
        MemoryFilter(statuses=["gone"])


def test_get_is_scoped_to_the_user_and_keeps_the_asked_order(store):
    store.put([mem("g1"), mem("g2"), mem("g3"), mem("b1", user="bob")])
    assert ids(store.get("alice", ["g3", "missing", "g1", "b1", "g2"])) == ["g3", "g1", "g2"]
    assert store.get("alice", []) == []


def test_delete_only_touches_the_named_user(store):
    store.put([mem("d1"), mem("d2"), mem("b1", user="bob")])
    assert store.delete("alice", ["d1", "b1", "nope"]) == 1
    assert store.delete("alice", []) == 0
    assert ids(store.get("alice", ["d1", "d2"])) == ["d2"]
    assert ids(store.get("bob", ["b1"])) == ["b1"]


def test_delete_user_removes_memories_messages_and_leases_of_that_user_only(store):
    store.put([mem("a1", content="alice likes tea"), mem("a2"), mem("b1", user="bob", content="bob likes tea")],
              np.stack([unit(1), unit(2), unit(1)]))
    store.append_messages("alice", "agent", [Message(role="user", content="hi")])
    store.append_messages("bob", "agent", [Message(role="user", content="hi")])
    assert store.acquire_lease("alice", "w1", 60) and store.acquire_lease("bob", "w1", 60)
    assert store.delete_user("alice") == 2
    assert store.count("alice", MemoryFilter(statuses=None)) == 0
    assert store.pending_messages("alice") == [] and store.recent_messages("alice", None, None, 10) == []
    assert text_search(store, "alice", "tea") == [] and vector_search(store, "alice", unit(1)) == []
    assert "alice" not in store.users() and "alice" not in store.users_with_pending()
    assert store.acquire_lease("alice", "w2", 60)  # alice's lease went with her
    assert not store.acquire_lease("bob", "w2", 60)  # bob's did not
    assert ids(text_search(store, "bob", "tea")) == ["b1"]
    assert len(store.pending_messages("bob")) == 1


def test_rename_user_moves_memories_vectors_and_messages_of_that_user_only(store):
    legacy = "acme/alice"  # the server's user layout before the identifier rule
    store.put([mem("a1", user=legacy, content="alice likes tea"), mem("a2", user=legacy),
               mem("b1", user="bob", content="bob likes tea")], np.stack([unit(1), unit(2), unit(1)]))
    pending = store.append_messages(legacy, "agent", [Message(role="user", content="hi")])
    text_search(store, legacy, "tea")  # warm any per-user cache
    assert store.rename_user(legacy, "acme:alice") == 2
    assert legacy not in store.users() and "acme:alice" in store.users()
    assert store.count(legacy, MemoryFilter(statuses=None)) == 0 and store.pending_messages(legacy) == []
    assert ids(store.get("acme:alice", ["a1", "a2"])) == ["a1", "a2"]
    assert ids(text_search(store, "acme:alice", "tea")) == ["a1"]
    assert ids(vector_search(store, "acme:alice", unit(2)))[0] == "a2"  # the vectors moved with them
    assert [p.id for p in store.pending_messages("acme:alice")] == pending
    assert ids(text_search(store, "bob", "tea")) == ["b1"] and text_search(store, legacy, "tea") == []
    with pytest.raises(ValueError):  # never merges into a user that has data
        store.rename_user("bob", "acme:alice")
    assert ids(store.get("bob", ["b1"])) == ["b1"] and store.count("acme:alice", MemoryFilter(statuses=None)) == 2


# -- list / count --------------------------------------------------------------------------------
def test_list_orders_by_time_then_insertion_and_pages(store):
    batch = [mem(f"l{i:02d}", created_at=T0 + timedelta(hours=i // 2)) for i in range(20)]  # pairs share a time
    store.put(batch[:10])
    store.put(batch[10:])
    newest = store.list("alice", MemoryFilter(), limit=100)
    assert ids(newest) == [f"l{i:02d}" for i in reversed(range(20))]
    oldest = store.list("alice", MemoryFilter(), limit=100, newest_first=False)
    assert ids(oldest) == [f"l{i:02d}" for i in range(20)]
    pages = [ids(store.list("alice", MemoryFilter(), limit=7, offset=o)) for o in (0, 7, 14, 21)]
    assert [len(p) for p in pages] == [7, 7, 6, 0]
    assert sum(pages, []) == ids(newest)


def test_list_and_count_filters(store):
    store.put([
        mem("f1", agent_id="a1", type=MemoryType.TURN, session_id="s1", created_at=T0),
        mem("f2", agent_id="a1", type=MemoryType.INSIGHT, session_id="s2", created_at=T0 + timedelta(days=1)),
        mem("f3", agent_id="a2", type=MemoryType.OBSERVATION, status=MemoryStatus.EXPIRED,
            created_at=T0 + timedelta(days=2)),
        mem("f4", agent_id="a2", type=MemoryType.CUSTOM, created_at=T0 + timedelta(days=3),
            event_start=T0 - timedelta(days=30), event_end=T0 - timedelta(days=20)),
        mem("f5", agent_id="a2", created_at=T0 + timedelta(days=4), event_start=T0 + timedelta(days=10)),
        mem("x1", user="bob", created_at=T0),
    ])

    def both(**flt):
        got = sorted(ids(store.list("alice", MemoryFilter(**flt), limit=100)))
        assert store.count("alice", MemoryFilter(**flt)) == len(got)
        return got

    assert both() == ["f1", "f2", "f4", "f5"]  # active only by default
    assert both(statuses=None) == ["f1", "f2", "f3", "f4", "f5"]
    assert both(statuses=(MemoryStatus.EXPIRED,)) == ["f3"]
    assert both(agent_id="a1") == ["f1", "f2"]
    assert both(types=(MemoryType.INSIGHT, MemoryType.CUSTOM)) == ["f2", "f4"]
    assert both(session_id="s2") == ["f2"]
    day = TimeRange(T0 + timedelta(days=1), T0 + timedelta(days=2))  # half-open: f3 starts at the end
    assert both(time_range=day, statuses=None) == ["f2"]
    # the event range [T0-30d, T0-20d] overlaps, although the message time does not
    assert both(time_range=TimeRange(T0 - timedelta(days=25), T0 - timedelta(days=24))) == ["f4"]
    assert both(time_range=TimeRange(T0 - timedelta(days=20), T0 - timedelta(days=19))) == ["f4"]  # end inclusive
    assert both(time_range=TimeRange(T0 - timedelta(days=19), T0 - timedelta(days=18))) == []
    # an event with no end is an instant
    assert both(time_range=TimeRange(T0 + timedelta(days=10), T0 + timedelta(days=11))) == ["f5"]
    assert both(time_range=TimeRange(None, T0 + timedelta(hours=1))) == ["f1", "f4"]
    assert both(time_range=TimeRange(T0 + timedelta(days=4), None)) == ["f5"]
    # ranges in other offsets compare by instant
    assert both(time_range=TimeRange((T0 + timedelta(days=1)).astimezone(PST),
                                     (T0 + timedelta(days=1, seconds=1)).astimezone(IST))) == ["f2"]
    assert store.count("bob", MemoryFilter()) == 1 and store.count("nobody", MemoryFilter()) == 0


# -- the filter semantics: every backend's translation against the reference ----------------
DAY = timedelta(days=1)
MICRO = timedelta(microseconds=1)
# (created_at, event_start, event_end): on, just inside and just outside the window [T0, T0 + 1 day)
# and its open-ended variants, by message time and by event
TIME_SHAPES = [
    (T0 - DAY, None, None), (T0, None, None), (T0 + DAY, None, None), (T0 + DAY - MICRO, None, None),
    (T0 - MICRO, None, None), (T0.astimezone(IST), None, None), (T0 + 12 * timedelta(hours=1), None, None),
    (T0 - 10 * DAY, T0 + DAY, None), (T0 - 10 * DAY, T0 - 5 * DAY, T0), (T0 - 10 * DAY, T0 - 5 * DAY, T0 - MICRO),
    (T0 + 5 * DAY, T0 + DAY - MICRO, None), (T0 - 10 * DAY, T0 - 2 * DAY, T0 + 3 * DAY),
    (T0 + 5 * DAY, T0 - MICRO, None), (T0 + 5 * DAY, (T0 + DAY).astimezone(PST), (T0 + 2 * DAY).astimezone(IST)),
]
WINDOWS = [
    None, TimeRange(T0, T0 + DAY), TimeRange(T0, None), TimeRange(None, T0), TimeRange(None, None),
    TimeRange(T0 - MICRO, T0), TimeRange(T0 + DAY, T0 + DAY + timedelta(hours=1)),
    TimeRange(T0.astimezone(PST), (T0 + DAY).astimezone(IST)),
]
FILTER_VALUES: dict[str, list] = {
    "agent_id": [None, "a1", "nobody"],
    "types": [None, (), (MemoryType.TURN,), (MemoryType.INSIGHT, MemoryType.OBSERVATION)],
    "statuses": [None, (), (MemoryStatus.ACTIVE,), (MemoryStatus.EXPIRED,)],
    "session_id": [None, "s1"],
    "time_range": WINDOWS,
}


def filter_corpus() -> list[Memory]:
    """Memories varied over every field a filter reads: each combination of type, status, agent
    and session, with the time shapes in turn; and one of another user per time shape."""
    combos = itertools.product(MemoryType, MemoryStatus, ("a1", "a2"), (None, "s1", "s2"))
    corpus = []
    for n, (type_, status, agent, session) in enumerate(combos):
        created, start, end = TIME_SHAPES[n % len(TIME_SHAPES)]
        corpus.append(mem(f"p{n}", content=f"ledger entry {n}", type=type_, status=status, agent_id=agent,
                          session_id=session, created_at=created, event_start=start, event_end=end))
    corpus += [mem(f"b{n}", user="bob", content="ledger entry", agent_id="a1", session_id="s1", created_at=created,
                   event_start=start, event_end=end) for n, (created, start, end) in enumerate(TIME_SHAPES)]
    return corpus


def test_every_filter_selects_what_the_reference_matches(store):
    """For every combination of the filter's fields (None, empty, one and several values, windows on
    and beside the memories' times, in other offsets), list, count and both search channels
    return exactly the memories `filtering.matches` selects: the backend's translation of the
    filter (SQL, numpy mask, Elasticsearch query) cannot drift from the reference."""
    corpus = filter_corpus()
    store.put(corpus, np.stack([near(unit(0), n, 0.5) for n in range(len(corpus))]))
    alice = [m for m in corpus if m.user_id == "alice"]
    names = list(FILTER_VALUES)
    for values in itertools.product(*FILTER_VALUES.values()):
        flt = MemoryFilter(**dict(zip(names, values)))
        expected = sorted(m.id for m in alice if matches(m, flt))
        assert sorted(ids(store.list("alice", flt, limit=1000))) == expected, flt
        assert store.count("alice", flt) == len(expected), flt
        request = SearchRequest(user_id="alice", text="ledger", vector=unit(0), filter=flt, limit=1000)
        found = store.search(request)
        assert sorted(c.memory.id for c in found if c.text_rank is not None) == expected, flt
        assert sorted(c.memory.id for c in found if c.vector_rank is not None) == expected, flt


def test_users_lists_users_with_memories_or_messages(store):
    store.put([mem("u1", user="carol"), mem("u2", user="alice")])
    store.append_messages("bob", "agent", [Message(role="user", content="hi")])
    assert store.users() == ["alice", "bob", "carol"]


def test_overview_counts_users_messages_per_state_and_memories_per_type(store):
    from memoryscope_plugins.storage.overview import store_overview
    assert store_overview(store).users == 0 and store_overview(store).oldest_pending is None
    store.put([mem("o1", type=MemoryType.OBSERVATION), mem("n1", user="carol", type=MemoryType.INSIGHT),
               mem("o2", type=MemoryType.OBSERVATION, status=MemoryStatus.EXPIRED)])
    first = store.append_messages("bob", "agent", [Message(role="user", content="a",
                                                           timestamp=T0 + timedelta(hours=1))])
    store.append_messages("bob", "agent", [Message(role="user", content="b", timestamp=T0 - timedelta(hours=1))] * 2)
    store.append_messages("alice", "agent", [Message(role="user", content="c", timestamp=T0)])
    done = store.append_messages("dave", "agent", [Message(role="user", content="d", timestamp=T0)])
    store.mark_messages(done, "done")
    store.mark_messages(first, "failed")  # the first message logged is no longer pending: the next one is
    overview = store_overview(store)
    assert overview.users == 4
    assert overview.messages == {"pending": 3, "done": 1, "failed": 1} and overview.pending == 3
    assert overview.oldest_pending == T0 - timedelta(hours=1)  # logged second, with its own (earlier) time
    assert overview.memories == {("observation", "active"): 1, ("observation", "expired"): 1,
                                 ("insight", "active"): 1}
    assert overview.memories_by_type() == {"observation": 2, "insight": 1}
    assert overview.oldest_pending_age_s(T0 + timedelta(minutes=61)) == 7260
    assert overview.oldest_pending_age_s(T0 - timedelta(hours=2)) == 0.0  # a clock behind the message's time


def test_iter_memories_in_insertion_order(store):
    store.put([mem(f"i{i}", user="alice" if i % 3 else "bob", created_at=T0 - timedelta(minutes=i)) for i in range(25)])
    batches = list(store.iter_memories(None, batch_size=10))
    assert [len(b) for b in batches] == [10, 10, 5]
    assert [m.id for b in batches for m in b] == [f"i{i}" for i in range(25)]
    alice = [m.id for b in store.iter_memories("alice", batch_size=4) for m in b]
    assert alice == [f"i{i}" for i in range(25) if i % 3]


# -- search ------------------------------------------------------------------------------------
def test_text_channel_ranks_matching_memories(store):
    store.put([
        mem("t1", content="I moved to Lisbon last May and love the city"),
        mem("t2", content="Moving again: Lisbon, Lisbon, Lisbon!"),
        mem("t3", content="My cat is called Tom"),
        mem("t4", content="The weather was nice", speaker="Lisbon"),  # the speaker is indexed too
        mem("t5", content="unrelated", context="we talked about moving"),  # and the context
    ])
    found = text_search(store, "alice", "When did she move to Lisbon?")
    assert set(ids(found)) == {"t1", "t2", "t4", "t5"}
    assert sorted(c.text_rank for c in found) == [1, 2, 3, 4]
    assert all(c.vector_rank is None and c.vector_score is None for c in found)
    by_rank = sorted(found, key=lambda c: c.text_rank)
    scores = [c.text_score for c in by_rank]
    assert all(s is not None and s > 0 for s in scores) and scores == sorted(scores, reverse=True)
    assert by_rank[0].memory.id in ("t1", "t2")
    assert text_search(store, "alice", "the and of") == []  # stop words only
    assert text_search(store, "alice", "") == []
    assert text_search(store, "alice", "zebra") == []


def test_vector_channel_ranks_by_cosine(store):
    base = unit(100)
    vectors = np.stack([near(base, i, 0.2 * (i + 1)) for i in range(6)])
    store.put([mem(f"v{i}") for i in range(6)], vectors)
    expected_order = [f"v{i}" for i in np.argsort(-(vectors @ base), kind="stable")[:4]]
    found = vector_search(store, "alice", base, limit=4)
    assert ids(sorted(found, key=lambda c: c.vector_rank)) == expected_order
    assert [c.vector_rank for c in sorted(found, key=lambda c: c.vector_rank)] == [1, 2, 3, 4]
    for cand in found:
        expected = float(vectors[int(cand.memory.id[1:])] @ base)
        assert cand.vector_score == pytest.approx(expected, abs=3e-3)
        assert cand.text_rank is None and cand.text_score is None


def test_search_returns_both_channels_on_one_candidate(store):
    store.put([mem("b1", content="sailing on the lake"), mem("b2", content="baking bread")],
              np.stack([unit(1), unit(2)]))
    found = {c.memory.id: c for c in store.search(SearchRequest(user_id="alice", text="sailing", vector=unit(1)))}
    assert found["b1"].text_rank == 1 and found["b1"].vector_rank == 1
    assert found["b1"].vector_score == pytest.approx(1.0, abs=2e-3)
    assert found["b2"].text_rank is None and found["b2"].vector_rank == 2
    assert store.search(SearchRequest(user_id="alice", text=None, vector=None)) == []
    assert store.search(SearchRequest(user_id="nobody", text="sailing", vector=unit(1))) == []
    assert found["b1"].memory.content == "sailing on the lake"


def test_a_candidates_vector_when_given_is_its_stored_one(store):
    """Retrieval reads every candidate's vector (`Candidate.vector` where the store holds it at hand,
    else `vectors_of`): both must be the vector stored, for candidates of either channel."""
    vectors = np.stack([unit(11), unit(12), unit(13)])
    store.put([mem("c1", content="sailing on the lake"), mem("c2", content="baking bread"),
               mem("c3", content="sailing again")], vectors)
    for request in (SearchRequest(user_id="alice", text="sailing", vector=None),
                    SearchRequest(user_id="alice", text=None, vector=unit(12))):
        found = store.search(request)
        stored = store.vectors_of("alice", [c.memory.id for c in found])
        assert set(stored) == {c.memory.id for c in found}
        for cand in found:
            expected = vectors[int(cand.memory.id[1:]) - 1]
            assert np.allclose(stored[cand.memory.id], expected, atol=2e-3)
            if cand.vector is not None:
                assert np.allclose(cand.vector, stored[cand.memory.id], atol=1e-6)
    assert store.vectors_of("bob", ["c1"]) == {}  # another user's ids give nothing


def test_search_limit_applies_per_channel(store):
    store.put([mem(f"k{i}", content=f"garden party number {i}") for i in range(30)],
              np.stack([unit(i) for i in range(30)]))
    found = store.search(SearchRequest(user_id="alice", text="garden", vector=unit(3), limit=5))
    assert sum(c.text_rank is not None for c in found) == 5
    assert sum(c.vector_rank is not None for c in found) == 5
    assert [c.memory.id for c in found if c.vector_rank == 1] == ["k3"]


@pytest.mark.parametrize("channel", ["text", "vector"])
def test_search_filters_apply_to_both_channels(store, channel):
    query = unit(7)
    items = [
        ("s1", {"agent_id": "a1", "type": MemoryType.TURN, "session_id": "x", "created_at": T0}),
        ("s2", {"agent_id": "a2", "type": MemoryType.INSIGHT, "session_id": "y", "created_at": T0 + timedelta(days=5)}),
        ("s3", {"agent_id": "a1", "type": MemoryType.TURN, "status": MemoryStatus.EXPIRED, "created_at": T0}),
        ("s4", {"agent_id": "a1", "type": MemoryType.OBSERVATION, "created_at": T0 + timedelta(days=40),
                    "event_start": T0 + timedelta(days=4, hours=12)}),
        ("s5", {"agent_id": "a1", "type": MemoryType.CUSTOM, "created_at": T0 + timedelta(days=40),
                    "event_start": T0 - timedelta(days=10), "event_end": T0 + timedelta(days=4, hours=1)}),
    ]
    store.put([mem(i, content="the violin concert downtown", **kw) for i, kw in items],
              np.stack([near(query, n, 0.1) for n in range(len(items))]))
    store.put([mem("other", user="bob", content="the violin concert downtown")], np.stack([query]))

    def run(**flt):
        if channel == "text":
            found = text_search(store, "alice", "violin concert", **flt)
        else:
            found = vector_search(store, "alice", query, **flt)
        return sorted(ids(found))

    assert run() == ["s1", "s2", "s4", "s5"]
    assert run(statuses=None) == ["s1", "s2", "s3", "s4", "s5"]
    assert run(statuses=(MemoryStatus.EXPIRED,)) == ["s3"]
    assert run(agent_id="a2") == ["s2"]
    assert run(types=(MemoryType.INSIGHT, MemoryType.OBSERVATION)) == ["s2", "s4"]
    assert run(session_id="x") == ["s1"]
    window = TimeRange(T0 + timedelta(days=4), T0 + timedelta(days=6))
    assert run(time_range=window) == ["s2", "s4", "s5"]  # by message time, event instant, event overlap
    assert run(time_range=window, types=(MemoryType.CUSTOM,)) == ["s5"]


def test_many_users_with_identical_texts_never_see_each_other(store):
    users = [f"user-{n:02d}" for n in range(24)]
    vector = unit(5)
    store.put([mem(f"{u}-m", user=u, content="my favourite colour is teal") for u in users],
              np.stack([vector] * len(users)))
    for user in users:
        found = store.search(SearchRequest(user_id=user, text="favourite colour teal", vector=vector, limit=50))
        assert ids(found) == [f"{user}-m"], user
        assert found[0].text_rank == 1 and found[0].vector_rank == 1
        assert {m.user_id for m in store.list(user, MemoryFilter())} == {user}
    assert len(store.users()) == len(users)


def test_query_vector_of_the_wrong_dimension_is_refused(store):
    store.put([mem("w1")], np.stack([unit(1)]))
    with pytest.raises(ValueError):
        vector_search(store, "alice", unit(1, DIM + 4))


# -- embedding models ----------------------------------------------------------------------------
def test_vectors_of_another_model_are_never_compared(store, store_factory):
    base = unit(42)
    store.put([mem(f"e{i}", content=f"note {i} about chess") for i in range(4)],
              np.stack([near(base, i, 0.1) for i in range(4)]))
    store.put([mem("e-none", content="note without vector about chess")])
    assert store.count_needing_vectors() == 1
    other = store_factory("model-b")
    assert other.embedding_model == "model-b"
    assert vector_search(other, "alice", base) == []
    assert len(text_search(other, "alice", "chess")) == 5  # full text still finds them all
    assert other.count_needing_vectors() == 5
    needing = [m.id for b in other.iter_needing_vectors(batch_size=2) for m in b]
    assert sorted(needing) == ["e-none", "e0", "e1", "e2", "e3"]
    other.set_vectors(["e1", "e-none"], np.stack([base, near(base, 9, 0.5)]))
    assert other.count_needing_vectors() == 3
    found = vector_search(other, "alice", base)
    assert sorted(ids(found)) == ["e-none", "e1"]
    assert other.get("alice", ["e1"])[0].embedding_model == "model-b"
    # and the first model no longer sees the re-embedded ones
    assert sorted(ids(vector_search(store, "alice", base))) == ["e0", "e2", "e3"]
    assert store.count_needing_vectors() == 2


def test_another_model_may_have_another_dimension(store, store_factory):
    store.put([mem("d1", content="alpha")], np.stack([unit(1)]))
    other = store_factory("model-c")
    other.set_vectors(["d1"], np.stack([unit(2, DIM * 2)]))
    assert ids(vector_search(other, "alice", unit(2, DIM * 2))) == ["d1"]
    other.put([mem("d2", content="beta")], np.stack([unit(3, DIM * 2)]))
    assert sorted(ids(vector_search(other, "alice", unit(3, DIM * 2)))) == ["d1", "d2"]
    assert vector_search(store, "alice", unit(1)) == []


def test_set_vectors_skips_unknown_ids(store):
    store.put([mem("s1")])
    store.set_vectors(["s1", "ghost"], np.stack([unit(1), unit(2)]))
    assert ids(vector_search(store, "alice", unit(1))) == ["s1"]
    assert store.count_needing_vectors() == 0


# -- message log -------------------------------------------------------------------------------
def _msgs(n: int, start: int = 0, tz=timezone.utc) -> list[Message]:
    return [Message(role="user" if i % 2 == 0 else "assistant", content=f"message {i} ✓", name=f"speaker{i % 2}",
                    timestamp=datetime(2024, 1, 1, 10, i, tzinfo=tz), metadata={"i": i})
            for i in range(start, start + n)]


def test_message_log_append_pending_mark_recent(store):
    first = store.append_messages("alice", "agent-1", _msgs(3, tz=IST), session_id="s1")
    second = store.append_messages("alice", "agent-2", _msgs(2, 3))
    store.append_messages("bob", "agent-1", _msgs(1))
    assert len(set(first + second)) == 5
    pending = store.pending_messages("alice")
    assert [p.id for p in pending] == first + second
    assert [p.seq for p in pending] == sorted(p.seq for p in pending)
    head = pending[0]
    assert ((head.user_id, head.agent_id, head.session_id, head.state, head.attempts)
            == ("alice", "agent-1", "s1", "pending", 0))
    assert head.message.content == "message 0 ✓" and head.message.name == "speaker0" and head.message.role == "user"
    assert head.message.timestamp == datetime(2024, 1, 1, 10, 0, tzinfo=IST)
    assert head.message.timestamp.utcoffset() == IST.utcoffset(None)
    assert head.message.metadata == {"i": 0}
    assert [p.id for p in store.pending_messages("alice", limit=2)] == first[:2]
    assert sorted(store.users_with_pending()) == ["alice", "bob"]

    store.mark_messages(first, "done")
    store.mark_messages([second[0]], "failed")
    assert [p.id for p in store.pending_messages("alice")] == [second[1]]
    recent = store.recent_messages("alice", None, None, 10)
    assert [r.id for r in recent] == first + second
    assert [r.state for r in recent] == ["done", "done", "done", "failed", "pending"]
    assert recent[3].attempts == 1
    assert [r.id for r in store.recent_messages("alice", None, None, 2)] == second
    assert [r.id for r in store.recent_messages("alice", "agent-1", None, 10)] == first
    assert [r.id for r in store.recent_messages("alice", None, recent[3].seq, 2)] == first[1:]
    store.mark_messages([second[0]], "pending")
    assert [p.id for p in store.pending_messages("alice")] == second
    store.mark_messages(second, "done")
    assert store.users_with_pending() == ["bob"]
    with pytest.raises(ValueError):
        store.mark_messages(first, "eaten")


def test_message_timestamp_defaults_to_now(store):
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    store.append_messages("alice", "agent", [Message(role="user", content="no time")])
    (stored,) = store.pending_messages("alice")
    assert before <= stored.message.timestamp <= datetime.now(timezone.utc) + timedelta(seconds=5)


def test_append_messages_with_memories_is_atomic(store):
    store.put([mem("owned", user="bob")])
    store.append_messages("alice", "agent", _msgs(1), memories=[mem("turn-1", content="hello there")],
                          vectors=np.stack([unit(1)]))
    assert ids(store.get("alice", ["turn-1"])) == ["turn-1"]
    assert ids(vector_search(store, "alice", unit(1))) == ["turn-1"]
    with pytest.raises(ValueError):
        store.append_messages("alice", "agent", _msgs(1, 1), memories=[mem("turn-2"), mem("owned")],
                              vectors=np.stack([unit(2), unit(3)]))
    assert len(store.recent_messages("alice", None, None, 10)) == 1
    assert store.get("alice", ["turn-2"]) == []


def test_commit_consolidation_is_all_or_nothing(store):
    message_ids = store.append_messages("alice", "agent", _msgs(3))
    store.put([mem("keep", content="original"), mem("owned", user="bob")], np.stack([unit(1), unit(2)]))
    bad = [mem("ins-1", type=MemoryType.INSIGHT, content="likes tea"), mem("keep", content="changed"),
           mem("owned", content="hijack")]
    with pytest.raises(ValueError):
        store.commit_consolidation(bad, [unit(5), None, None], message_ids[:2])
    assert [p.id for p in store.pending_messages("alice")] == message_ids
    assert store.get("alice", ["ins-1"]) == [] and store.get("alice", ["keep"])[0].content == "original"

    good = [mem("ins-1", type=MemoryType.INSIGHT, content="likes tea"),
            mem("keep", content="changed", status=MemoryStatus.EXPIRED, superseded_by="ins-1")]
    store.commit_consolidation(good, [unit(5), None], message_ids[:2])
    assert [p.id for p in store.pending_messages("alice")] == message_ids[2:]
    assert store.get("alice", ["keep"])[0].status == MemoryStatus.EXPIRED
    assert ids(vector_search(store, "alice", unit(1), statuses=None)) [0] == "keep"  # vector kept
    assert ids(vector_search(store, "alice", unit(5)))[0] == "ins-1"
    store.commit_consolidation([], None, message_ids[2:])
    assert store.pending_messages("alice") == []


# -- leases ------------------------------------------------------------------------------------
def test_lease_has_one_owner_at_a_time(store, store_factory):
    other = store_factory("model-a")
    assert store.acquire_lease("alice", "worker-1", 30)
    assert not other.acquire_lease("alice", "worker-2", 30)
    assert store.acquire_lease("alice", "worker-1", 30)  # renewal
    assert other.acquire_lease("bob", "worker-2", 30)  # per user
    other.release_lease("alice", "worker-2")  # not the owner: no effect
    assert not other.acquire_lease("alice", "worker-2", 30)
    store.release_lease("alice", "worker-1")
    assert other.acquire_lease("alice", "worker-2", 30)
    assert not store.acquire_lease("alice", "worker-1", 30)


def test_lease_expires(store, store_factory):
    other = store_factory("model-a")
    assert store.acquire_lease("alice", "worker-1", 0.3)
    assert not other.acquire_lease("alice", "worker-2", 30)
    time.sleep(0.8)
    assert other.acquire_lease("alice", "worker-2", 30)
    assert not store.acquire_lease("alice", "worker-1", 30)


def _fenced_commit_setup(store):
    """A user with three pending messages and one memory the commit would change."""
    message_ids = store.append_messages("alice", "agent", _msgs(3))
    store.put([mem("keep", content="original")], np.stack([unit(1)]))
    return message_ids, [mem("obs-1", content="likes tea"), mem("keep", content="changed")]


def _unchanged(store, message_ids) -> None:
    assert [p.id for p in store.pending_messages("alice")] == message_ids
    assert store.get("alice", ["obs-1"]) == [] and store.get("alice", ["keep"])[0].content == "original"


def test_a_fenced_commit_by_the_lease_owner_goes_through(store):
    message_ids, memories = _fenced_commit_setup(store)
    assert store.acquire_lease("alice", "worker-1", 30)
    store.commit_consolidation(memories, [unit(5), None], message_ids[:2], lease=Lease("alice", "worker-1"))
    assert [p.id for p in store.pending_messages("alice")] == message_ids[2:]
    assert store.get("alice", ["keep"])[0].content == "changed" and ids(store.get("alice", ["obs-1"])) == ["obs-1"]
    store.commit_consolidation([], None, message_ids[2:], lease=Lease("alice", "worker-1"))  # messages only
    assert store.pending_messages("alice") == []
    assert not store.acquire_lease("alice", "worker-2", 30)  # the commit left the lease with its owner


def test_a_fenced_commit_by_another_owner_is_refused_and_changes_nothing(store, store_factory):
    message_ids, memories = _fenced_commit_setup(store)
    other = store_factory("model-a")
    assert other.acquire_lease("alice", "worker-2", 30)
    with pytest.raises(LeaseLostError):
        store.commit_consolidation(memories, [unit(5), None], message_ids[:2], lease=Lease("alice", "worker-1"))
    with pytest.raises(LeaseLostError):  # nor without any memory to write
        store.commit_consolidation([], None, message_ids[:2], lease=Lease("alice", "worker-1"))
    _unchanged(store, message_ids)
    assert not store.acquire_lease("alice", "worker-1", 30)  # the refusal did not touch the lease


def test_a_fenced_commit_after_the_lease_expired_or_without_one_is_refused(store, store_factory):
    message_ids, memories = _fenced_commit_setup(store)
    with pytest.raises(LeaseLostError):  # never taken
        store.commit_consolidation(memories, [unit(5), None], message_ids[:2], lease=Lease("alice", "worker-1"))
    assert store.acquire_lease("alice", "worker-1", 0.3)
    time.sleep(0.8)  # expired, and nobody took it over yet
    with pytest.raises(LeaseLostError):
        store.commit_consolidation(memories, [unit(5), None], message_ids[:2], lease=Lease("alice", "worker-1"))
    _unchanged(store, message_ids)
    assert store.acquire_lease("alice", "worker-1", 30)  # taken again: the commit goes through
    store.commit_consolidation(memories, [unit(5), None], message_ids[:2], lease=Lease("alice", "worker-1"))
    assert [p.id for p in store.pending_messages("alice")] == message_ids[2:]


def test_a_fence_is_per_user(store):
    message_ids, memories = _fenced_commit_setup(store)
    assert store.acquire_lease("bob", "worker-1", 30)  # bob's lease does not cover alice
    with pytest.raises(LeaseLostError):
        store.commit_consolidation(memories, [unit(5), None], message_ids[:2], lease=Lease("alice", "worker-1"))
    _unchanged(store, message_ids)


def test_renewal_extends_only_a_lease_still_held(store, store_factory):
    other = store_factory("model-a")
    assert not store.renew_lease("alice", "worker-1", 30)  # nothing to renew: a renewal never takes
    # margins of 1.5 s either side of each expiry: a loaded machine's pauses never decide the outcome
    assert store.acquire_lease("alice", "worker-1", 3.0)
    time.sleep(1.5)
    assert store.renew_lease("alice", "worker-1", 3.0)  # before it ran out
    time.sleep(1.5)  # 3 s after it was taken: still held, thanks to the renewal
    assert not other.acquire_lease("alice", "worker-2", 30) and not other.renew_lease("alice", "worker-2", 30)
    time.sleep(3.0)
    assert not store.renew_lease("alice", "worker-1", 30)  # lapsed: a renewal does not take it back
    assert other.acquire_lease("alice", "worker-2", 30)
    assert not store.renew_lease("alice", "worker-1", 30)  # taken over


# -- meta --------------------------------------------------------------------------------------
def test_meta_get_and_set(store, store_factory):
    assert store.get_meta("contract.key") is None
    store.set_meta("contract.key", "one")
    store.set_meta("contract.key", "two ✓")
    assert store.get_meta("contract.key") == "two ✓"
    assert store_factory("model-a").get_meta("contract.key") == "two ✓"


def test_an_empty_vector_row_clears_the_stored_vector(store):
    store.put([mem("c1", content="cleared later")], np.stack([unit(1)]))
    assert store.count_needing_vectors() == 0
    store.put([mem("c1", content="changed text")], [np.zeros(0, dtype=np.float32)])
    assert store.count_needing_vectors() == 1
    assert ids(vector_search(store, "alice", unit(1))) == []
    assert ids(text_search(store, "alice", "changed")) == ["c1"]


def test_messages_can_take_the_ids_they_are_given(store):
    logged = store.append_messages("alice", "agent", [Message(role="user", content="one", timestamp=T0)],
                                   memories=[mem("given-1", content="one")], vectors=np.stack([unit(1)]),
                                   message_ids=["given-1"])
    assert logged == ["given-1"]
    assert [m.id for m in store.pending_messages("alice")] == ["given-1"]
    assert ids(store.get("alice", ["given-1"])) == ["given-1"]


def test_logged_message_ids_are_those_of_the_users_log_in_any_state(store):
    first = store.append_messages("alice", "agent", _msgs(3))
    (bobs,) = store.append_messages("bob", "agent", _msgs(1))
    store.mark_messages(first[:1], "done")
    store.mark_messages(first[1:2], "failed")
    assert store.logged_message_ids("alice", [*first, bobs, "never-logged"]) == set(first)
    assert store.logged_message_ids("bob", first) == set()
    assert store.logged_message_ids("alice", []) == set()


def test_deleting_a_turn_forgets_its_logged_message_and_nothing_else(store):
    """A turn's message is logged under the turn's id: deleting the turn keeps the message's row
    (its id, so a retry of its key records nothing) without its words, done (consolidation never
    brings it back); another user's, another memory's, a tool call's stay as they were."""
    turns = ["t1", "t2"]
    store.append_messages("alice", "agent", _msgs(2), memories=[mem(i, content=f"turn {i}") for i in turns],
                          vectors=np.stack([unit(1), unit(2)]), message_ids=turns)
    tool = Message("tool", "ok", tool_call=ToolCall("search", status="ok"))
    (call,) = store.append_messages("alice", "agent", [tool])
    (bobs,) = store.append_messages("bob", "agent", _msgs(1), memories=[mem("b1", user="bob")],
                                    vectors=np.stack([unit(3)]), message_ids=["b1"])
    assert store.delete("bob", ["t1"]) == 0  # not bob's: nothing of alice's goes
    assert store.delete("alice", ["t1", call, "b1", "never"]) == 1
    assert store.logged_message_ids("alice", [*turns, call]) == {"t1", "t2", call}
    assert [m.id for m in store.pending_messages("alice")] == ["t2"]
    logged = {m.id: m for m in store.recent_messages("alice", None, None, 10)}
    forgotten = logged["t1"]
    assert (forgotten.state, forgotten.message.content, forgotten.message.name) == ("done", "", None)
    assert is_forgotten(forgotten.message.content, forgotten.message.metadata) and forgotten.message.role == "user"
    assert logged["t2"].message.content == "message 1 ✓"
    assert not is_forgotten(logged["t2"].message.content, logged["t2"].message.metadata)
    assert logged[call].message.tool_call is not None and logged[call].state == "done"
    # counting a consolidation attempt (failed, then pending again) never revives a forgotten message
    store.mark_messages(["t1", "t2"], "failed")
    store.mark_messages(["t1", "t2"], "pending")
    assert [m.id for m in store.pending_messages("alice")] == ["t2"]
    assert {m.id: m.state for m in store.recent_messages("alice", None, None, 10)}["t1"] == "done"
    # a tool call's message under a memory's id (a hand-made import) keeps its call
    store.append_messages("alice", "agent", [tool], message_ids=["shared"])
    store.put([mem("shared", content="a memory under the same id")])
    assert store.delete("alice", ["shared"]) == 1
    (kept,) = [m for m in store.recent_messages("alice", None, None, 10) if m.id == "shared"]
    assert kept.message.tool_call is not None and kept.message.content == "ok"
    assert ids(store.get("alice", turns)) == ["t2"] and ids(store.get("bob", ["b1"])) == ["b1"]
    assert store.logged_message_ids("bob", [bobs]) == {bobs}


def test_a_commit_marking_a_message_no_longer_pending_writes_nothing(store):
    """A consolidation step commits only while every message it marks done is still pending: one
    forgotten (its turn deleted) or done meanwhile refuses the whole commit."""
    store.append_messages("alice", "agent", _msgs(2), memories=[mem("t1"), mem("t2")],
                          vectors=np.stack([unit(1), unit(2)]), message_ids=["t1", "t2"])
    store.delete("alice", ["t1"])
    with pytest.raises(MessagesGoneError):
        store.commit_consolidation([mem("obs", content="from both")], [unit(3)], ["t1", "t2"])
    with pytest.raises(MessagesGoneError):
        store.commit_consolidation([mem("obs", content="from one never logged")], [unit(3)], ["t2", "never"])
    assert store.get("alice", ["obs"]) == [] and [m.id for m in store.pending_messages("alice")] == ["t2"]
    store.commit_consolidation([mem("obs", content="from t2")], [unit(3)], ["t2"])
    assert ids(store.get("alice", ["obs"])) == ["obs"] and store.pending_messages("alice") == []


def test_a_message_id_logged_already_refuses_the_whole_write(store):
    """What a keyed `record` relies on when another writer logged the same key meanwhile: the
    write fails as a whole (no message, memory or counter of it is kept) with a `StoreError`."""
    store.append_messages("alice", "agent", _msgs(1), memories=[mem("k1", content="first words")],
                          vectors=np.stack([unit(1)]), message_ids=["k1"])
    with pytest.raises(StoreError):
        store.append_messages("alice", "agent", _msgs(2, 1),
                              memories=[mem("k2", content="new"), mem("k1", content="again")],
                              vectors=np.stack([unit(2), unit(3)]), message_ids=["k2", "k1"])
    assert [m.id for m in store.recent_messages("alice", None, None, 10)] == ["k1"]
    assert store.get("alice", ["k2"]) == []
    assert [m.content for m in store.get("alice", ["k1"])] == ["first words"]
    assert store.logged_message_ids("alice", ["k1", "k2"]) == {"k1"}


def test_text_ranking_weighs_a_rare_term_above_a_common_one(store):
    store.put([mem(f"c{i}", content=f"coffee with friend number {i}") for i in range(12)]
              + [mem("v", content="violin with friend number 99")])
    found = sorted(text_search(store, "alice", "coffee violin"), key=lambda c: c.text_rank)
    assert found[0].memory.id == "v"
    assert len(found) == 13


def test_text_statistics_are_the_users_own(store):
    """Another user's memories never change which of alice's memories match; on the stores that
    rank with per-user statistics (SQLite, PostgreSQL) they change neither order nor scores.
    Elasticsearch ranks with index-wide statistics (docs/storage.md)."""
    assert store.text_statistics in ("user", "index")
    store.put([mem(f"c{i}", content=f"coffee with friend number {i}") for i in range(3)]
              + [mem("v", content="violin with friend number 99")])

    def ranked() -> list[tuple[str, float | None]]:
        found = sorted(text_search(store, "alice", "coffee violin"), key=lambda c: cast(int, c.text_rank))
        return [(c.memory.id, c.text_score) for c in found]

    alone = ranked()
    store.put([mem(f"b{i}", user="bob", content=f"violin lesson {i}") for i in range(30)])
    shared = ranked()
    assert {i for i, _ in shared} == {i for i, _ in alone} == {"c0", "c1", "c2", "v"}
    if store.text_statistics == "user":
        assert [i for i, _ in shared] == [i for i, _ in alone]
        assert [s for _, s in shared] == pytest.approx([s for _, s in alone], rel=1e-4)


# -- reading back what a copy to another store needs (`migrate`) ---------------------------------
def test_memory_pages_go_on_from_a_position(store):
    store.put([mem(f"p{i}", user="alice" if i % 3 else "bob") for i in range(12)])
    pages = list(store.memory_pages("alice", batch_size=3))
    assert [[m.id for m in batch] for _, batch in pages] == [["p1", "p2", "p4"], ["p5", "p7", "p8"],
                                                              ["p10", "p11"]]
    rest = [m.id for _, batch in store.memory_pages("alice", after=pages[0][0], batch_size=3) for m in batch]
    assert rest == ["p5", "p7", "p8", "p10", "p11"]
    assert list(store.memory_pages("alice", after=pages[-1][0])) == []


def test_vectors_of_returns_the_stored_vectors_of_the_users_memories(store, store_factory):
    store.put([mem("v1"), mem("v2"), mem("v3"), mem("v4", user="bob")],
              [unit(1), unit(2), None, unit(4)])
    found = store.vectors_of("alice", ["v1", "v2", "v3", "v4", "missing"])
    assert sorted(found) == ["v1", "v2"]
    assert found["v1"].dtype == np.float32 and found["v1"].shape == (DIM,)
    # as stored: SQLite keeps half precision
    assert np.allclose(found["v1"], unit(1), atol=1e-3) and np.allclose(found["v2"], unit(2), atol=1e-3)
    assert store.vectors_of("alice", []) == {}
    store_factory("model-b").set_vectors(["v2"], np.stack([unit(9, 8)]))
    again = store.vectors_of("alice", ["v2"])
    assert again["v2"].shape == (8,) and np.allclose(again["v2"], unit(9, 8), atol=1e-3)
    assert store.get("alice", ["v2"])[0].embedding_model == "model-b"


def test_iter_messages_reads_every_state_in_order(store):
    first = store.append_messages("alice", "agent-1", _msgs(3), session_id="s1")
    store.append_messages("bob", "agent-1", _msgs(2))
    second = store.append_messages("alice", "agent-2", _msgs(2, 3))
    store.mark_messages(first[:2], "done")
    store.mark_messages([second[0]], "failed")
    batches = list(store.iter_messages("alice", batch_size=2))
    assert [len(b) for b in batches] == [2, 2, 1]
    read = [m for b in batches for m in b]
    assert [m.id for m in read] == first + second
    assert [m.state for m in read] == ["done", "done", "pending", "failed", "pending"]
    assert read[0].session_id == "s1" and read[3].agent_id == "agent-2" and read[3].message.metadata == {"i": 3}
    assert list(store.iter_messages("nobody")) == []


def test_copy_messages_keeps_ids_agents_sessions_and_states(store):
    from memoryscope_plugins.storage.base import StoredMessage
    texts = _msgs(4, tz=IST)
    copied = [StoredMessage(id=f"c{i}", user_id="carol", agent_id=f"agent-{i % 2}", message=texts[i], seq=0,
                            state=("pending", "done", "failed", "pending")[i], session_id="s" if i else None)
              for i in range(4)]
    store.copy_messages(copied)
    read = [m for b in store.iter_messages("carol") for m in b]
    assert [(m.id, m.agent_id, m.session_id, m.state) for m in read] == [
        ("c0", "agent-0", None, "pending"), ("c1", "agent-1", "s", "done"),
        ("c2", "agent-0", "s", "failed"), ("c3", "agent-1", "s", "pending")]
    assert [m.message for m in read] == texts
    assert read[0].message.timestamp.utcoffset() == IST.utcoffset(None)
    assert [m.id for m in store.pending_messages("carol")] == ["c0", "c3"]
    assert store.users_with_pending() == ["carol"]
