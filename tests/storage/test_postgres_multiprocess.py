"""Several OS processes against one PostgreSQL database (embedded PostgreSQL 18 + pgvector).

- Concurrent recording and retrieval: every process writes its own memories (in batches, to users
  shared by all processes), rewrites a set of ids shared by all processes in shuffled orders, and
  searches while the others write. Afterwards no memory is lost or duplicated and every one is found.
- The per-user lease: processes race to consolidate the same users; a shared log (a table of
  intervals) shows that no two processes ever held the same user's lease at the same time.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import time

import numpy as np
import pytest

pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")

PROCESSES = 4
USERS = [f"user-{i}" for i in range(5)]
PER_PROCESS = 240
SHARED_IDS = [f"shared-{i:02d}" for i in range(20)]
DIM = 24


@pytest.fixture(scope="module")
def pg_dsn(postgres):
    return postgres.create_database("multiprocess")


def _vector(seed: int) -> np.ndarray:
    vec = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vec / np.linalg.norm(vec)


def _writer(dsn: str, worker: int, results, prefix: str = "mp_") -> None:
    from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    from memoryscope_plugins.types import Memory, Message

    store = PostgresStore(dsn, embedding_model="mp-model", table_prefix=prefix, pool_max_size=2)
    rng = random.Random(worker)
    searches = 0
    try:
        batch, vectors = [], []
        for i in range(PER_PROCESS):
            n = worker * PER_PROCESS + i
            user = USERS[n % len(USERS)]
            batch.append(Memory(id=f"w{worker}-{i}", user_id=user, agent_id=f"agent-{worker}",
                                content=f"worker {worker} note {i} about topic{n % 17}"))
            vectors.append(_vector(n))
            if len(batch) == 24:
                if rng.random() < 0.5:
                    store.append_messages(user, f"agent-{worker}", [Message(role="user", content=f"m{n}")],
                                          memories=batch, vectors=np.stack(vectors))
                else:
                    store.put(batch, np.stack(vectors))
                batch, vectors = [], []
                # everyone rewrites the same ids, in its own order
                shared = SHARED_IDS[:]
                rng.shuffle(shared)
                store.put([Memory(id=s, user_id="shared-user", agent_id="any", content=f"shared {s} by {worker}")
                           for s in shared], np.stack([_vector(10_000 + k) for k in range(len(shared))]))
                # and reads while the others write
                user_q = rng.choice(USERS)
                found = store.search(SearchRequest(user_id=user_q, text=f"topic{rng.randrange(17)}",
                                                   vector=_vector(rng.randrange(10_000)), limit=10))
                assert all(c.memory.user_id == user_q for c in found)
                store.count(user_q, MemoryFilter())
                searches += 1
        results.put(("ok", worker, searches))
    except BaseException as exc:  # report to the parent
        results.put(("error", worker, repr(exc)))
    finally:
        store.close()


@pytest.mark.parametrize("partitions", [None, 4])
def test_processes_record_and_retrieve_concurrently(pg_dsn, partitions):
    """In both table layouts (the partitioned one takes a lock per user, in user order)."""
    import psycopg

    from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest
    from memoryscope_plugins.storage.postgres_store import PostgresStore

    prefix = "mp_" if partitions is None else f"mp{partitions}_"
    PostgresStore(pg_dsn, embedding_model="mp-model", table_prefix=prefix, partitions=partitions).close()  # once
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(pg_dsn, w, results, prefix)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    reports = [results.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
    assert all(r[0] == "ok" for r in reports), reports

    store = PostgresStore(pg_dsn, embedding_model="mp-model", table_prefix=prefix)
    try:
        with psycopg.connect(pg_dsn) as conn:  # the statistics kept through it all equal a recount
            kept = conn.execute(f"SELECT user_id, n, dl_sum FROM {prefix}user_sizes WHERE n <> 0 ORDER BY 1").fetchall()
            assert kept == conn.execute(f"SELECT user_id, count(*), sum(dl) FROM {prefix}memories GROUP BY 1 "
                                        "ORDER BY 1").fetchall()
        expected = {f"w{w}-{i}" for w in range(PROCESSES) for i in range(PER_PROCESS)}
        seen: list[str] = []
        for user in USERS:
            for batch in store.iter_memories(user, batch_size=200):
                seen.extend(m.id for m in batch)
        assert len(seen) == len(expected) and set(seen) == expected  # none lost, none twice
        assert sum(store.count(u, MemoryFilter()) for u in USERS) == len(expected)
        shared = store.list("shared-user", MemoryFilter(), limit=100)
        assert sorted(m.id for m in shared) == SHARED_IDS
        for n in random.Random(1).sample(range(PROCESSES * PER_PROCESS), 40):
            worker, i = divmod(n, PER_PROCESS)
            user = USERS[n % len(USERS)]
            found = store.search(SearchRequest(user_id=user, text=None, vector=_vector(n), limit=1))
            assert [c.memory.id for c in found] == [f"w{worker}-{i}"]
        assert store.count_needing_vectors() == 0
    finally:
        store.close()


def _consolidator(dsn: str, worker: int, barrier, seconds: float, results) -> None:
    import psycopg

    from memoryscope_plugins.storage.postgres_store import PostgresStore

    store = PostgresStore(dsn, embedding_model="mp-model", table_prefix="lease_", pool_max_size=2)
    owner = f"worker-{worker}"
    held = 0
    try:
        with psycopg.connect(dsn, autocommit=True) as log:
            barrier.wait(120)  # everyone starts together
            deadline = time.time() + seconds
            while time.time() < deadline:
                for user in ("alice", "bob"):
                    if store.acquire_lease(user, owner, ttl_s=30):
                        start = time.time()
                        time.sleep(0.02)  # "consolidating"
                        end = time.time()
                        log.execute("INSERT INTO lease_log(user_id, owner, started, ended) VALUES (%s,%s,%s,%s)",
                                    (user, owner, start, end))
                        store.release_lease(user, owner)
                        held += 1
                    time.sleep(0.001)
        results.put(("ok", worker, held))
    except BaseException as exc:
        results.put(("error", worker, repr(exc)))
    finally:
        store.close()


def test_the_lease_lets_one_process_consolidate_a_user_at_a_time(pg_dsn):
    import psycopg

    from memoryscope_plugins.storage.postgres_store import PostgresStore

    PostgresStore(pg_dsn, embedding_model="mp-model", table_prefix="lease_").close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS lease_log (user_id text, owner text, started float8, ended float8)")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    barrier = ctx.Barrier(PROCESSES)
    procs = [ctx.Process(target=_consolidator, args=(pg_dsn, w, barrier, 4.0, results)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    reports = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert all(r[0] == "ok" for r in reports), reports
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT user_id, owner, started, ended FROM lease_log ORDER BY user_id, started").fetchall()
    assert len(rows) >= 10
    for user in ("alice", "bob"):
        spans = [r for r in rows if r[0] == user]
        for before, after in zip(spans, spans[1:]):
            assert after[2] >= before[3], f"{user}: {before[1]} and {after[1]} held the lease at the same time"
    assert len({r[1] for r in rows}) >= 2  # the lease moved between processes
