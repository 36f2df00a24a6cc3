"""PostgreSQL's search against the embedded store's, its bounded full-text channel, the HNSW index kept
only for large users, `bulk_load`, and the upgrade of a version-1 database (real PostgreSQL)."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest

from memoryscope_plugins.indexing import full_text
from memoryscope_plugins.storage import postgres_search as pgs, postgres_store
from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest
from memoryscope_plugins.storage.sqlite_store import SQLiteStore
from memoryscope_plugins.storage.text_analysis import analyse
from memoryscope_plugins.types import Memory, MemoryType
from tests.support.servers import pg_partitions

pytest.importorskip("psycopg")

_counter = itertools.count()
START = datetime(2024, 1, 1, tzinfo=timezone.utc)
WORDS = ["apple", "river", "guitar", "painting", "Berlin", "coffee", "marathon", "garden", "violin", "sister",
         "camping", "pottery", "yoga", "novel", "chess", "hiking", "dog", "kitten", "bakery", "museum"]


@pytest.fixture(scope="module")
def dsn(postgres):
    return postgres.create_database("pgsearch")


@pytest.fixture
def make_store(dsn):
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    opened = []

    def factory(prefix: str | None = None, **kwargs):
        kwargs.setdefault("user_index_rows", 0)  # these tests are of the database's search
        kwargs.setdefault("partitions", pg_partitions())
        store = PostgresStore(dsn, embedding_model="m", table_prefix=prefix or f"ps{next(_counter)}_", **kwargs)
        opened.append(store)
        return store
    yield factory
    for store in opened:
        store.close()


def corpus(n: int, user: str = "u", seed: int = 1, dim: int = 16) -> tuple[list[Memory], np.ndarray]:
    """Memories of Zipf-like words (a few very common), with repeats, and random unit vectors."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    memories = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(3, 9)), p=weights / weights.sum())
        when = START + timedelta(minutes=i)
        memories.append(Memory(id=f"{user}-{i:05d}", user_id=user, agent_id="a", content=" ".join(words),
                               type=MemoryType.TURN, created_at=when, updated_at=when))
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return memories, vectors


def ranked(store, user: str, text: str | None = None, vector: np.ndarray | None = None, limit: int = 20):
    found = store.search(SearchRequest(user_id=user, text=text, vector=vector, filter=MemoryFilter(), limit=limit))
    if text is not None:
        hits = sorted((c for c in found if c.text_rank is not None), key=lambda c: c.text_rank)
        return [(c.memory.id, round(c.text_score, 4)) for c in hits]
    hits = sorted((c for c in found if c.vector_rank is not None), key=lambda c: c.vector_rank)
    return [(c.memory.id, round(c.vector_score, 4)) for c in hits]


QUERIES = ["apple river", "When did my sister go camping?", "guitar guitar violin", "coffee at the bakery",
           "the dog and the kitten", "Berlin museum novel chess", "apple"]


def test_full_text_ranks_exactly_as_the_embedded_store(make_store, tmp_path):
    """Same memories, same query: the same rows, ranks and BM25 scores (terms, tf, lengths, idf)."""
    memories, vectors = corpus(300)
    pg = make_store()
    pg.put(memories, vectors)
    lite = SQLiteStore(tmp_path / "m.db", embedding_model="m")
    try:
        lite.put(memories, vectors)
        for query in QUERIES:
            assert ranked(pg, "u", query) == ranked(lite, "u", query), query
        # the vector channel too (exact for a user this small); SQLite keeps float16 vectors
        for seed in range(3):
            query = vectors[seed * 7]
            assert [i for i, _ in ranked(pg, "u", vector=query)] == [i for i, _ in ranked(lite, "u", vector=query)]
    finally:
        lite.close()


def test_terms_are_stored_as_the_engine_analyses_them(make_store):
    store = make_store()
    memory = Memory(id="t1", user_id="u", agent_id="a", content="Running runs run; 跑步很开心 " + "x" * 3000,
                    type=MemoryType.TURN, created_at=START, updated_at=START)
    store.put([memory], None)
    with psycopg.connect(store._conninfo) as conn:
        terms, dl = conn.execute(f"SELECT terms::text, dl FROM {store.prefix}memories").fetchone()
    assert "'run':1,2,3" in terms and "'跑步':1" in terms and "xxx" not in terms  # too long for a lexeme
    assert dl == len(analyse(full_text(memory)))  # every term counts toward the length, as in the embedded store
    assert [i for i, _ in ranked(store, "u", "running")] == ["t1"]
    assert pgs.tsvector_text(["a", "b", "a"]) == "'a':1,2 'b':1"


def test_a_common_term_is_bounded_and_the_result_stays_sensible(make_store):
    """With the bound below the user's size, common terms bring in a bounded set of rows: the channel
    still returns `limit` rows that hold the query's terms, the best holding them all, deterministically."""
    memories, vectors = corpus(600)
    store = make_store(text_term_rows=100)
    store.put(memories, vectors)
    query = "apple river guitar museum"
    first = ranked(store, "u", query, limit=10)
    assert len(first) == 10
    assert first == ranked(store, "u", query, limit=10)
    got = store.get("u", [i for i, _ in first])
    assert all({"apple", "river", "guitar", "museum"} & set(m.content.split()) for m in got)
    assert "museum" in got[0].content.split()  # a rare term: every row holding it is scored
    exact = make_store()
    exact.put(memories, vectors)
    with psycopg.connect(store._conninfo) as conn:
        df = dict(conn.execute(f"SELECT w, count(*) FROM {store.prefix}memories, unnest(ARRAY['appl', 'museum']) w "
                               "WHERE terms @@ w::tsquery GROUP BY w").fetchall())
    assert df["appl"] > 100 >= df["museum"]  # one common term, one rare
    assert ranked(exact, "u", "museum") == ranked(store, "u", "museum")


def test_only_users_above_the_exact_size_are_indexed_and_search_reaches_every_row(make_store):
    store = make_store(exact_vector_rows=40)
    big, big_vectors = corpus(120, user="big", seed=2)
    small, small_vectors = corpus(30, user="small", seed=3)
    for start in range(0, 120, 25):  # the big user crosses the size between two writes
        store.put(big[start:start + 25], big_vectors[start:start + 25])
    store.put(small, small_vectors)
    with psycopg.connect(store._conninfo) as conn:
        marked = dict(conn.execute(f"SELECT user_id, count(*) FILTER (WHERE ann) FROM {store.prefix}memories "
                                   "GROUP BY user_id").fetchall())
    assert marked == {"big": 120, "small": 0}
    for user, rows, vectors in (("big", big, big_vectors), ("small", small, small_vectors)):
        for i in (0, 5, len(rows) - 1):
            assert ranked(store, user, vector=vectors[i], limit=5)[0][0] == rows[i].id


def test_bulk_load_gives_the_same_rows_vectors_and_results(make_store):
    memories, vectors = corpus(400, user="big", seed=4)
    small, small_vectors = corpus(50, user="small", seed=5)
    plain = make_store(exact_vector_rows=100)
    plain.put(memories, vectors)
    plain.put(small, small_vectors)
    bulk = make_store(exact_vector_rows=100)
    with bulk.bulk_load(maintenance_work_mem="64MB"):
        for start in range(0, 400, 100):
            bulk.put(memories[start:start + 100], vectors[start:start + 100])
        bulk.put(small, small_vectors)
    with psycopg.connect(bulk._conninfo) as conn:
        indexes = [r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname LIKE %s",
                                              (bulk.prefix + "mem_ann_%",)).fetchall()]
    assert len(indexes) == 1 and "hnsw" in indexes[0]
    for user, rows in (("big", memories), ("small", small)):
        ids = [m.id for m in rows]
        assert bulk.get(user, ids) == plain.get(user, ids)
        theirs, ours = plain.vectors_of(user, ids), bulk.vectors_of(user, ids)
        assert sorted(theirs) == sorted(ours) and all(np.array_equal(theirs[i], ours[i]) for i in ids)
        for query in QUERIES:
            assert ranked(bulk, user, query) == ranked(plain, user, query)
    for i in (3, 77, 250):
        assert ranked(bulk, "big", vector=vectors[i], limit=5)[0][0] == memories[i].id


def test_a_version_1_database_is_upgraded_in_place(make_store, dsn):
    memories, vectors = corpus(200)
    store = make_store(exact_vector_rows=100)
    store.put(memories, vectors)
    before = {q: ranked(store, "u", q) for q in QUERIES}
    prefix = store.prefix
    store.close()
    with psycopg.connect(dsn) as conn:  # back to what version 1 left: no terms, no marks, its own index
        conn.execute(f"UPDATE {prefix}memories SET terms = '', dl = 0, ann = false")
        conn.execute(f"UPDATE {prefix}meta SET value = '1' WHERE key = 'schema_version'")
        conn.execute(f"ALTER TABLE {prefix}memories ADD COLUMN tsv tsvector")
    reopened = make_store(prefix, exact_vector_rows=100)
    assert reopened.get_meta("schema_version") == str(postgres_store.SCHEMA_VERSION)
    assert {q: ranked(reopened, "u", q) for q in QUERIES} == before
    with psycopg.connect(dsn) as conn:
        assert conn.execute(f"SELECT count(*) FROM {prefix}memories WHERE ann").fetchone()[0] == 200
    assert ranked(reopened, "u", vector=vectors[9], limit=3)[0][0] == memories[9].id


def test_per_user_statistics_follow_every_write(make_store):
    """The triggers keep each user's count, total length and term frequencies equal to a recount
    through inserts, replacements, deletions, renames and user deletion."""
    store = make_store(exact_vector_rows=20)
    memories, vectors = corpus(60, user="a", seed=6)
    others, other_vectors = corpus(30, user="b", seed=7)
    store.put(memories, vectors)
    store.put(others, other_vectors)

    def kept_and_recounted():
        with psycopg.connect(store._conninfo) as conn:
            p = store.prefix
            sizes = set(conn.execute(f"SELECT user_id, n, dl_sum FROM {p}user_sizes WHERE n <> 0").fetchall())
            terms = set(conn.execute(f"SELECT user_id, term, df FROM {p}user_terms WHERE df <> 0").fetchall())
            sizes_now = set(conn.execute(f"SELECT user_id, count(*), sum(dl) FROM {p}memories "
                                         "GROUP BY user_id").fetchall())
            terms_now = set(conn.execute(f"SELECT m.user_id, t.lexeme, count(*) FROM {p}memories m, "
                                         "unnest(m.terms) t GROUP BY 1, 2").fetchall())
        return (sizes, terms), (sizes_now, terms_now)

    kept, recounted = kept_and_recounted()
    assert kept == recounted and len(kept[0]) == 2
    changed = [dataclasses.replace(m, content="violin violin chess") for m in memories[:10]]
    store.put(changed, None)
    store.delete("a", [m.id for m in memories[10:15]])
    store.rename_user("b", "c")
    kept, recounted = kept_and_recounted()
    assert kept == recounted
    store.delete_user("a")
    kept, recounted = kept_and_recounted()
    assert kept == recounted and {u for u, _, _ in kept[0]} == {"c"}
    assert ranked(store, "c", "apple")  # the renamed user's statistics serve their search
