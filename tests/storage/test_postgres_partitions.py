"""The partitioned layout of the PostgreSQL store (`postgres_partitions`, ``store.partitions``): made
when the tables are created, recorded and kept; every statement about one user planned on one
partition (EXPLAIN); writers of different users not waiting for each other (real PostgreSQL).

The store contract runs on this layout too (``postgres-partitioned`` in test_store_contract.py)."""

from __future__ import annotations

import itertools
import json
import re
from datetime import timedelta
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from memoryscope_plugins.errors import ConfigError, StoreLockedError
from memoryscope_plugins.storage import postgres_partitions as parts
from memoryscope_plugins.storage.base import LedgerChanges, MemoryFilter, SearchRequest
from memoryscope_plugins.storage.leases import Lease
from memoryscope_plugins.types import (
    Entity,
    EntityMention,
    Memory,
    MemoryType,
    Message,
    ProfileValue,
    TimeRange,
    ToolCall,
)
from tests.storage.test_postgres_search import START, corpus

pytest.importorskip("psycopg")

_counter = itertools.count()
USER_TABLES = ("memories", "messages", "leases", "entities", "mentions", "profile", "user_sizes", "user_terms")


@pytest.fixture(scope="module")
def dsn(postgres):
    return postgres.create_database("pgparts")


@pytest.fixture
def make_store(dsn):
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    opened = []

    def factory(prefix: str | None = None, **kwargs):
        store = PostgresStore(dsn, embedding_model="m", table_prefix=prefix or f"pp{next(_counter)}_", **kwargs)
        opened.append(store)
        return store
    yield factory
    for store in opened:
        store.close()


def partitions_of(dsn: str, table: str) -> int | None:
    """The number of partitions of `table`, or None when it is a plain table."""
    with psycopg.connect(dsn) as conn:
        kind = conn.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", (table,)).fetchone()
        if kind is None or kind[0] != "p":
            return None
        count = conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", (table,)).fetchone()
        return None if count is None else int(count[0])


def test_the_layout_is_made_at_creation_recorded_and_kept(make_store, dsn):
    store = make_store(partitions=4)
    assert store.partitions == 4 and store.get_meta(parts.LAYOUT_KEY) == "4"
    assert {t: partitions_of(dsn, store.prefix + t) for t in USER_TABLES} == dict.fromkeys(USER_TABLES, 4)
    assert partitions_of(dsn, store.prefix + "owners") is None and partitions_of(dsn, store.prefix + "meta") is None
    store.put([Memory(id="k1", user_id="alice", agent_id="a", content="kept")])
    assert make_store(store.prefix).partitions == 4  # unset: the stored layout is followed
    assert make_store(store.prefix, partitions=4).get("alice", ["k1"])[0].content == "kept"
    for other in (0, 8):
        with pytest.raises(ConfigError, match="partitions"):
            make_store(store.prefix, partitions=other)

    plain = make_store()
    assert plain.partitions == 0 and plain.get_meta(parts.LAYOUT_KEY) is None
    assert partitions_of(dsn, plain.prefix + "memories") is None
    assert make_store(plain.prefix, partitions=0).partitions == 0
    with pytest.raises(ConfigError, match="no partitions"):
        make_store(plain.prefix, partitions=4)


def columns_of(dsn: str, prefix: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the store `prefix` names: its columns (name, type, nullable, default, identity)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable, c.column_default, c.is_identity "
            "FROM information_schema.columns c JOIN pg_class k ON k.relname = c.table_name "
            "WHERE c.table_name LIKE %s AND NOT k.relispartition ORDER BY c.table_name, c.ordinal_position",
            (prefix.replace("_", r"\_") + "%",)).fetchall()
    tables: dict[str, list[tuple[Any, ...]]] = {}
    for table, *column in rows:
        tables.setdefault(table[len(prefix):], []).append(tuple(column))
    return tables


def test_both_layouts_have_the_same_columns_and_tables(make_store, dsn):
    """The partitioned tables are written out at their current shape, the unpartitioned ones grow by
    migrations: a column added to one and not the other would show here (the identity sequences
    and `owners` aside)."""
    plain, partitioned = make_store(partitions=0), make_store(partitions=4)
    ours, theirs = columns_of(dsn, plain.prefix), columns_of(dsn, partitioned.prefix)
    assert set(theirs) - set(ours) == {"owners"} and set(ours) <= set(theirs)
    assert {"tool_counters", *USER_TABLES} <= set(ours)
    for table in ours:
        assert ours[table] == theirs[table], table


@pytest.mark.parametrize("value", [-1, parts.MAX_PARTITIONS + 1, "4", 2.0, True])
def test_a_wrong_number_of_partitions_is_refused(make_store, value):
    with pytest.raises(ValueError, match="partitions"):
        make_store(partitions=value)


def test_the_setting_is_checked_and_reaches_the_store(make_store, dsn):
    from pydantic import ValidationError

    from memoryscope_plugins.settings import StoreSettings
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    for bad in (-1, parts.MAX_PARTITIONS + 1):
        with pytest.raises(ValidationError):
            StoreSettings(backend="postgres", partitions=bad)
    for backend in ("sqlite", "elasticsearch"):
        with pytest.raises(ValidationError, match="postgres"):
            StoreSettings(backend=backend, partitions=4)
    assert StoreSettings(backend="sqlite", partitions=0).partitions == 0
    cfg = StoreSettings(backend="postgres", url=dsn, index_prefix=f"pps{next(_counter)}", partitions=2)
    store = PostgresStore.from_settings(cfg, embedding_model="m")
    try:
        assert store.partitions == 2 and partitions_of(dsn, store.prefix + "memories") == 2
    finally:
        store.close()


def test_ids_stay_unique_across_users_and_follow_deletes_and_renames(make_store):
    store = make_store(partitions=4)
    store.put([Memory(id="x1", user_id="alice", agent_id="a", content="one")])
    store.append_messages("alice", "a", [Message(role="user", content="hi")], message_ids=["g1"])
    with pytest.raises(ValueError, match="another user"):
        store.append_messages("bob", "a", [Message(role="user", content="hi")], message_ids=["g1"])
    store.rename_user("alice", "carol")
    with pytest.raises(ValueError, match="another user"):
        store.put([Memory(id="x1", user_id="alice", agent_id="a", content="taken by carol now")])
    store.mark_messages(["g1"], "done")  # found by id alone, in carol's partition
    assert [m.state for m in store.recent_messages("carol", None, None, 5)] == ["done"]
    store.set_vectors(["x1"], np.ones((1, 4), dtype=np.float32))
    assert list(store.vectors_of("carol", ["x1"])) == ["x1"]
    assert store.delete("carol", ["x1"]) == 1
    store.put([Memory(id="x1", user_id="bob", agent_id="a", content="free again")])
    assert store.get("bob", ["x1"])[0].content == "free again" and store.get("carol", ["x1"]) == []


def test_writers_of_different_users_do_not_wait_for_each_other(make_store, dsn):
    """The statistics and the write order take a per-user lock in the partitioned layout: while
    one transaction holds alice's, bob's writes go through and alice's wait (here: time out); the
    unpartitioned layout's one lock stops every writer."""
    for partitions, key in ((4, "user:alice"), (None, "stats")):
        store = make_store(partitions=partitions, lock_timeout_s=0.5)
        store.put([Memory(id="a0", user_id="alice", agent_id="a", content="first")])
        with psycopg.connect(dsn) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (store.prefix + key,))
            if partitions:
                store.put([Memory(id="b1", user_id="bob", agent_id="a", content="bob writes meanwhile")])
                assert [m.id for m in store.get("bob", ["b1"])] == ["b1"]
            else:
                with pytest.raises(StoreLockedError):
                    store.put([Memory(id="b1", user_id="bob", agent_id="a", content="bob waits too")])
            with pytest.raises(StoreLockedError):
                store.put([Memory(id="a1", user_id="alice", agent_id="a", content="alice waits")])
            holder.rollback()
        store.put([Memory(id="a1", user_id="alice", agent_id="a", content="alice after")])
        assert store.count("alice", MemoryFilter()) == 2


# -- every statement of one user on one partition ---------------------------------------------------------
class Recorder:
    """The statements the store's connections run (text and parameters), while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statements: list[tuple[Any, Any]] = []
        for cls in (psycopg.Cursor, psycopg.ClientCursor):
            for name in ("execute", "executemany"):
                self._wrap(monkeypatch, cls, name)

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> None:
        original = getattr(cls, name)

        def recorded(cursor: Any, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
            first = list(params)[0] if name == "executemany" and params else params
            self.statements.append((query, first))
            return original(cursor, query, params, *args, **kwargs)
        monkeypatch.setattr(cls, name, recorded)


def relations(plan: dict[str, Any]) -> list[str]:
    found = [plan["Relation Name"]] if "Relation Name" in plan else []
    for child in plan.get("Plans", []):
        found += relations(child)
    return found


def one_user_at_work(store, user: str, memories: list[Memory], vectors: np.ndarray) -> None:
    """Every per-user call of the store, for `user`."""
    store.put(memories[:30], vectors[:30])
    store.append_messages(user, "a", [Message(role="user", content="I bought a violin")], memories=memories[30:40],
                          vectors=vectors[30:40], message_ids=[f"{user}-g1"])
    ledger = LedgerChanges(user, entities=[Entity(id=f"{user}-e1", user_id=user, name="Mel")],
                           mentions=[EntityMention(f"{user}-e1", memories[0].id, user, said_at=START)],
                           profile=[ProfileValue(id=f"{user}-p1", user_id=user, key="home", value="Leeds",
                                                 created_at=START, updated_at=START)])
    assert store.acquire_lease(user, "w1", 60) and store.renew_lease(user, "w1", 60)
    store.commit_consolidation(memories[40:], vectors[40:], [f"{user}-g1"], lease=Lease(user, "w1"), ledger=ledger)
    store.release_lease(user, "w1")
    store.edit_ledger(user, lambda reader: LedgerChanges(user, entities=[
        Entity(id=f"{user}-e2", user_id=user, name=f"{len(reader.entities(user))} known")]))
    window = TimeRange(start=START, end=START + timedelta(minutes=20))
    for flt in (MemoryFilter(), MemoryFilter(types=(MemoryType.TURN,), agent_id="a", time_range=window)):
        for text, vector in (("apple river guitar", None), (None, vectors[3]), ("coffee yoga", vectors[5])):
            store.search(SearchRequest(user_id=user, text=text, vector=vector, filter=flt, limit=10))
        store.list(user, flt, limit=5)
        store.count(user, flt)
    store.get(user, [m.id for m in memories[:5]])
    store.vectors_of(user, [m.id for m in memories[:5]])
    store.entities(user), store.mentions(user), store.profile_values(user)
    list(store.iter_memories(user, 20)), list(store.iter_messages(user, 20))
    store.pending_messages(user), store.recent_messages(user, "a", None, 5)
    store.mark_messages([f"{user}-g1"], "failed")
    store.set_vectors([memories[0].id], vectors[:1])
    store.put_ledger(LedgerChanges(user, removed_entities=[f"{user}-e2"]))
    store.delete(user, [memories[1].id])
    store.delete_user(user)


@pytest.mark.parametrize("user_index_rows", [0, 200_000])
def test_each_statement_of_one_user_is_planned_on_one_partition(make_store, dsn, monkeypatch, user_index_rows):
    """EXPLAIN of every statement the store runs for one user (searched by the database with common
    terms and the HNSW walk, or by the in-process index): each partitioned table it reads or writes
    is read on one partition, the user's, which is the same remainder in every table."""
    store = make_store(partitions=4, user_index_rows=user_index_rows, text_term_rows=3, exact_vector_rows=10)
    for other in ("bob", "carol", "dave", "erin"):  # every partition holds rows
        others, other_vectors = corpus(30, user=other, seed=len(other))
        store.put(others, other_vectors)
    memories, vectors = corpus(60, user="alice", seed=3)
    recorder = Recorder(monkeypatch)
    one_user_at_work(store, "alice", memories, vectors)
    monkeypatch.undo()

    touched: dict[str, set[str]] = {}
    explained = 0
    with store._pool.connection() as conn:
        for query, params in recorder.statements:
            text = query.as_string(conn) if isinstance(query, sql.Composable) else str(query)
            if not re.match(r"\s*(WITH|SELECT|INSERT|UPDATE|DELETE)\b", text, re.IGNORECASE):
                continue
            with conn.transaction(force_rollback=True):
                (plan,), = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + sql.SQL(text), params).fetchone()
            for name in relations(plan["Plan"] if isinstance(plan, dict) else json.loads(plan)[0]["Plan"]):
                match = re.fullmatch(re.escape(store.prefix) + r"(\w+)_p(\d+)", name)
                if match:
                    touched.setdefault(match.group(1), set()).add(match.group(2))
            explained += 1
    assert explained > 40
    assert {"memories", "messages", "leases", "entities", "mentions", "profile"} <= set(touched)
    if not user_index_rows:
        assert "user_terms" in touched and "user_sizes" in touched  # the database's search read them
    assert {t: len(p) for t, p in touched.items()} == dict.fromkeys(touched, 1), touched
    assert len(set().union(*touched.values())) == 1  # the same partition number in every table


# -- migrate into and out of the layout, and the same results in both ------------------------------------------
def seed(store) -> None:
    """Users of several sizes (text and vectors), a memory without a vector (inserted last), messages
    pending, done and failed, the agent's tool calls, and a ledger."""
    for n, user in enumerate(("alice", "bob", "chloé")):
        memories, vectors = corpus((120, 40, 12)[n], user=user, seed=n + 11)
        store.put(memories, vectors)
        store.put([Memory(id=f"{user}-novec", user_id=user, agent_id="a", content="apple without a vector",
                          created_at=START, updated_at=START)])
        logged = store.append_messages(user, "a", [Message(role="user", content=f"turn {i}") for i in range(4)],
                                       session_id="s1")
        store.mark_messages(logged[:2], "done")
        store.mark_messages(logged[2:3], "failed")
        store.append_messages(user, "scout", [  # the agent's tool calls: their counters follow the log
            Message(role="tool", content="", timestamp=START + timedelta(minutes=i),
                    tool_call=ToolCall(name=f"tool-{i % 2}", arguments={"q": user} if i % 2 else {},
                                       error=f"failed {i}" if i == 1 else None, duration_ms=5.0 * (i + 1)))
            for i in range(3 + n)], session_id="s2")
        store.put_ledger(LedgerChanges(
            user, entities=[Entity(id=f"{user}-e1", user_id=user, name="Mel", aliases=["M"])],
            mentions=[EntityMention(f"{user}-e1", memories[0].id, user, said_at=START)],
            profile=[ProfileValue(id=f"{user}-p1", user_id=user, key="home", value="Leeds", created_at=START,
                                  updated_at=START)]))


def results(store, users=("alice", "bob", "chloé")) -> list:
    """Every candidate (id, ranks, scores) of text, vector and hybrid searches, with and without filters."""
    out = []
    _, vectors = corpus(5, user="q", seed=99)
    window = TimeRange(start=START + timedelta(minutes=5), end=START + timedelta(minutes=90))
    for user in users:
        for flt in (MemoryFilter(), MemoryFilter(types=(MemoryType.TURN,), time_range=window)):
            for i, text in enumerate(("apple river", "violin chess museum", "dog", None)):
                for vector in (None, vectors[i]):
                    if text is None and vector is None:
                        continue
                    found = store.search(SearchRequest(user_id=user, text=text, vector=vector, filter=flt, limit=15))
                    out.append([(c.memory.id, c.text_rank, c.text_score, c.vector_rank, c.vector_score)
                                for c in found])
    return out


def test_migrate_round_trips_the_layout_with_the_same_contents_and_results(make_store, dsn):
    """Unpartitioned -> 4 partitions -> unpartitioned: every record, vector, message and ledger item
    the same, and every search gives the same candidates with the same ranks and scores, whether
    searched by the database (common terms bounded) or by the in-process index."""
    from memoryscope_plugins.storage import migrate as mig
    from tests.storage.test_migrate import assert_same_contents
    names = [f"rt{next(_counter)}{s}" for s in "abc"]
    source = make_store(names[0] + "_")
    seed(source)
    there = mig.migrate(f"{dsn}#{names[0]}", f"{dsn}#{names[1]}", partitions=4, batch_size=7, sample=200)
    back = mig.migrate(f"{dsn}#{names[1]}", f"{dsn}#{names[2]}", partitions=0, batch_size=5, sample=200)
    assert there.mismatches == [] and back.mismatches == [] and there.memories == back.memories == 175
    partitioned, unpartitioned = make_store(names[1] + "_"), make_store(names[2] + "_")
    assert (partitioned.partitions, unpartitioned.partitions) == (4, 0)
    assert_same_contents(source, partitioned)
    assert_same_contents(source, unpartitioned)
    for options in ({"user_index_rows": 0, "text_term_rows": 5}, {}):
        expected = results(make_store(names[0] + "_", **options))
        assert sum(map(len, expected)) > 300
        assert results(make_store(names[1] + "_", **options)) == expected
        assert results(make_store(names[2] + "_", **options)) == expected


def test_migrate_refuses_a_layout_it_cannot_make(make_store, dsn, tmp_path):
    from memoryscope_plugins.errors import ValidationError
    from memoryscope_plugins.storage import migrate as mig
    name = f"rf{next(_counter)}"
    seed(make_store(name + "_"))
    for bad in (-1, mig.MAX_PARTITIONS + 1, "4", True):
        with pytest.raises(ValidationError, match="partitions"):
            mig.migrate(f"{dsn}#{name}", f"{dsn}#never", partitions=bad)
    with pytest.raises(ValidationError, match="PostgreSQL"):
        mig.migrate(f"{dsn}#{name}", tmp_path / "copy.db", partitions=4)
    assert not (tmp_path / "copy.db").exists()
    with pytest.raises(ConfigError, match="no partitions"):  # an existing target keeps its layout
        mig.migrate(f"{dsn}#{name}", f"{dsn}#{name}", partitions=4, force=True)


def test_the_command_line_copies_into_partitions(make_store, dsn, capsys):
    from memoryscope_plugins.cli.main import main
    name = f"cli{next(_counter)}"
    seed(make_store(name + "_"))
    assert main(["migrate", "--from", f"{dsn}#{name}", "--to", f"{dsn}#{name}p", "--partitions", "3"]) == 0
    assert "copied 175 memories" in capsys.readouterr().out
    assert make_store(name + "p_").partitions == 3
    with pytest.raises(SystemExit) as stop:
        main(["migrate", "--from", f"{dsn}#{name}", "--to", f"{dsn}#{name}q", "--partitions", "-2"])
    assert stop.value.code == 2


def test_a_message_logged_without_its_owner_is_still_found_by_id(make_store, dsn):
    """A message an older release logged into partitioned tables (it knows nothing of `owners`) is
    still marked by id: found in its partition, so consolidation never redoes it."""
    store = make_store(partitions=4)
    [logged] = store.append_messages("alice", "a", [Message(role="user", content="hi")])
    with psycopg.connect(dsn) as conn:
        conn.execute(f"DELETE FROM {store.prefix}owners WHERE id = %s", (logged,))
    store.commit_consolidation([], None, [logged])
    assert store.pending_messages("alice") == []
    store.mark_messages([logged, "no-such-message"], "failed")
    assert [m.state for m in store.recent_messages("alice", None, None, 5)] == ["failed"]


def test_claim_refuses_one_id_for_two_users_in_one_call(make_store):
    store = make_store(partitions=2)
    owners = sql.Identifier(store.prefix + "owners")
    with store._tx() as conn:
        assert parts.claim(conn, owners, parts.MEMORY, [("d", "alice"), ("d", "bob")]) == "d"
        assert parts.claim(conn, owners, parts.MEMORY, [("d", "alice"), ("e", "alice")]) is None
        assert parts.claim(conn, owners, parts.MEMORY, [("e", "alice"), ("d", "bob")]) == "d"
        assert parts.claim(conn, owners, parts.ENTITY, [("d", "bob")]) is None  # another kind, another space
