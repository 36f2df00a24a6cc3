"""PostgreSQL's in-process index of small users (`user_index`, `user_index_rows`): the same results as the
database's own search, and every write of any process seen by the next search (real PostgreSQL)."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from datetime import timedelta

import numpy as np
import psycopg
import pytest

from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest
from memoryscope_plugins.types import Memory, MemoryStatus, MemoryType, TimeRange
from tests.storage.test_postgres_search import QUERIES, START, corpus
from tests.support.servers import pg_partitions

pytest.importorskip("psycopg")

_counter = itertools.count()


@pytest.fixture(scope="module")
def dsn(postgres):
    return postgres.create_database("pgindex")


@pytest.fixture
def make_store(dsn):
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    opened = []

    def factory(prefix: str, **kwargs):
        kwargs.setdefault("partitions", pg_partitions())
        store = PostgresStore(dsn, embedding_model="m", table_prefix=prefix, **kwargs)
        opened.append(store)
        return store
    yield factory
    for store in opened:
        store.close()


def found(store, user: str, text: str | None = None, vector: np.ndarray | None = None,
          flt: MemoryFilter | None = None, limit: int = 20) -> dict[str, tuple]:
    """Each candidate's ranks and scores."""
    request = SearchRequest(user_id=user, text=text, vector=vector, filter=flt or MemoryFilter(), limit=limit)
    return {c.memory.id: (c.text_rank, c.text_score, c.vector_rank, c.vector_score) for c in store.search(request)}


def same(a: dict[str, tuple], b: dict[str, tuple]) -> bool:
    """The same rows and ranks; BM25 scores equal but for float32 against float8 arithmetic, and
    vector scores within 1e-3 (in process, as in the embedded store, the dot product with the
    float16-rounded vector; in SQL, pgvector's cosine, which normalises it again)."""
    def close(x, y, tolerance):
        return (x is None) == (y is None) and (x is None or abs(x - y) < tolerance)
    return a.keys() == b.keys() and all(a[k][0] == b[k][0] and a[k][2] == b[k][2] and close(a[k][1], b[k][1], 1e-4)
                                        and close(a[k][3], b[k][3], 1e-3) for k in a)


def ids(store, user: str, text: str, flt: MemoryFilter | None = None) -> set[str]:
    return set(found(store, user, text, flt=flt, limit=1000))


def test_the_index_finds_what_the_database_finds(make_store):
    """One table, two stores: searched in process and by the database, every query and filter gives
    the same rows, ranks and scores."""
    prefix = f"ix{next(_counter)}_"
    held, database = make_store(prefix), make_store(prefix, user_index_rows=0)
    memories, vectors = corpus(300, seed=11)
    memories = [dataclasses.replace(m, type=MemoryType.OBSERVATION if i % 4 == 0 else MemoryType.TURN,
                                    agent_id="b" if i % 3 == 0 else "a") for i, m in enumerate(memories)]
    held.put(memories, vectors)
    filters = [MemoryFilter(), MemoryFilter(types=(MemoryType.OBSERVATION,)), MemoryFilter(agent_id="b"),
               MemoryFilter(time_range=TimeRange(START + timedelta(minutes=50), START + timedelta(minutes=120)))]
    for flt in filters:
        for query in QUERIES:
            assert same(found(held, "u", query, flt=flt), found(database, "u", query, flt=flt)), (query, flt)
        for seed in range(3):
            query = vectors[seed * 11]
            assert same(found(held, "u", "apple", query, flt), found(database, "u", "apple", query, flt))
    assert held._indexes.get("u") is not None and database._indexes.get("u") is None


def test_a_user_above_the_bound_is_searched_by_the_database(make_store):
    prefix = f"ix{next(_counter)}_"
    held, database = make_store(prefix, user_index_rows=50), make_store(prefix, user_index_rows=0)
    memories, vectors = corpus(80, seed=12)
    held.put(memories[:40], vectors[:40])
    assert same(found(held, "u", "apple"), found(database, "u", "apple"))
    assert held._indexes.get("u") is not None
    held.put(memories[40:], vectors[40:])  # 80 > 50: no longer held
    assert same(found(held, "u", "apple river"), found(database, "u", "apple river"))
    assert held._indexes.get("u") is None


def test_every_write_of_another_process_is_seen_by_the_next_search(make_store):
    """Inserts are appended to the held index; an update in place, a deletion, a rename and a
    deleted user are seen too, each by the very next search."""
    prefix = f"ix{next(_counter)}_"
    reader, writer = make_store(prefix), make_store(prefix, user_index_rows=0)
    memories, vectors = corpus(40, seed=13)
    writer.put(memories, vectors)
    everything = {m.id for m in memories if "apple" in m.content}
    assert ids(reader, "u", "apple") == everything
    held = reader._indexes.get("u")

    new = Memory(id="u-new", user_id="u", agent_id="a", content="apple pie with my sister", type=MemoryType.TURN,
                 created_at=START + timedelta(days=2), updated_at=START + timedelta(days=2))
    writer.put([new], vectors[:1])
    assert ids(reader, "u", "apple") == everything | {"u-new"}
    assert reader._indexes.get("u").terms is not held.terms and len(reader._indexes.get("u")) == 41

    first = sorted(everything)[0]
    expired = dataclasses.replace(next(m for m in memories if m.id == first), status=MemoryStatus.EXPIRED)
    writer.put([expired], None)  # changed in place: the index is read again
    everything = everything | {"u-new"}
    assert ids(reader, "u", "apple") == everything - {first}  # a search sees active memories by default
    assert ids(reader, "u", "apple", MemoryFilter(statuses=(MemoryStatus.EXPIRED,))) == {first}

    second = sorted(everything)[1]
    writer.delete("u", [second])
    assert ids(reader, "u", "apple") == everything - {first, second}

    writer.rename_user("u", "v")
    assert ids(reader, "u", "apple") == set() and reader._indexes.get("u") is None
    assert ids(reader, "v", "apple") == everything - {first, second}
    writer.delete_user("v")
    assert ids(reader, "v", "apple") == set()


def test_a_deletion_and_an_insert_between_two_searches_are_both_seen(make_store):
    """The same count before and after: the index is not merely appended to."""
    prefix = f"ix{next(_counter)}_"
    reader, writer = make_store(prefix), make_store(prefix)
    memories, vectors = corpus(30, seed=14)
    writer.put(memories[:29], vectors[:29])
    before = ids(reader, "u", "apple river guitar")
    gone = sorted(before)[0]
    writer.delete("u", [gone])
    writer.put(memories[29:], vectors[29:])
    after = ids(reader, "u", "apple river guitar")
    assert gone not in after and after == ids(make_store(prefix, user_index_rows=0), "u", "apple river guitar")


def test_a_write_takes_its_place_in_the_order_only_once_the_one_before_committed(make_store):
    """The write order is the commit order. A transaction holds the write lock (as one that deletes
    or writes memories does until it commits); another writer that starts meanwhile takes its
    ``seq`` only after that commit, so a reader that saw the later seq has seen the earlier one."""
    prefix = f"ix{next(_counter)}_"
    first, second = make_store(prefix), make_store(prefix)
    memories, vectors = corpus(3, seed=17)
    first.put(memories[2:], vectors[2:])  # the vector space exists (its first write takes a lock of its own)
    with first._tx() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (prefix + "stats",))
        waiting = threading.Thread(target=lambda: second.put(memories[1:2], vectors[1:2]))
        waiting.start()
        waiting.join(0.5)  # the second writer is blocked now (and would have taken its seq already)
        assert waiting.is_alive()
        first._put_in(conn, memories[:1], vectors[:1])
    waiting.join()
    with psycopg.connect(first._conninfo) as conn:
        seqs = dict(conn.execute(f"SELECT id, seq FROM {prefix}memories").fetchall())
    assert seqs[memories[1].id] > seqs[memories[0].id]  # committed second, ordered second


def test_concurrent_writes_and_deletions_end_in_the_databases_result(make_store):
    """Writers insert and delete while a reader keeps searching: its index ends equal to the rows."""
    prefix = f"ix{next(_counter)}_"
    reader = make_store(prefix)
    writers = [make_store(prefix, user_index_rows=0) for _ in range(3)]
    memories, vectors = corpus(180, seed=15)
    done = threading.Event()
    errors: list[BaseException] = []

    def write(k: int) -> None:
        try:
            for i in range(k, 180, 3):
                writers[k].put([memories[i]], vectors[i:i + 1])
                if i % 7 == 0:
                    writers[k].delete("u", [memories[i - 3].id] if i >= 3 else [])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def read() -> None:
        while not done.is_set():
            found(reader, "u", "apple river guitar coffee")

    threads = [threading.Thread(target=write, args=(k,)) for k in range(3)]
    poller = threading.Thread(target=read)
    poller.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    poller.join()
    assert not errors
    query = "apple river guitar coffee"
    assert same(found(reader, "u", query, limit=1000), found(writers[0], "u", query, limit=1000))
    assert len(reader._indexes.get("u")) == 180 - len([i for i in range(3, 180) if i % 7 == 0])


def test_rows_written_before_the_write_order_existed_are_held(make_store, dsn):
    """A schema-3 table (rows without a write order) upgraded in place: its rows are read in full."""
    prefix = f"ix{next(_counter)}_"
    store = make_store(prefix, user_index_rows=0)
    memories, vectors = corpus(20, seed=16)
    store.put(memories, vectors)
    with psycopg.connect(dsn) as conn:
        conn.execute(f"ALTER TABLE {prefix}memories DISABLE TRIGGER {prefix}write_seq")
        conn.execute(f"UPDATE {prefix}memories SET seq = NULL")
        conn.execute(f"ALTER TABLE {prefix}memories ENABLE TRIGGER {prefix}write_seq")
    held = make_store(prefix)
    assert found(held, "u", "apple") and same(found(held, "u", "apple"), found(store, "u", "apple"))
    store.put(corpus(21, seed=16)[0][20:], vectors[:1])  # a new row after them
    assert len(found(held, "u", "apple", limit=100)) == len(found(store, "u", "apple", limit=100))
    assert same(found(held, "u", "apple", limit=100), found(store, "u", "apple", limit=100))
