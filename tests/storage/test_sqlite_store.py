"""What only the embedded store must prove: crash safety, locks, corruption, schema versions and
changing the embedding model (re-embedding, never mixing vector spaces)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.errors import SchemaVersionError, StoreError, StoreLockedError
from memoryscope_plugins.storage.base import SearchRequest
from memoryscope_plugins.storage.sqlite_store import SCHEMA_VERSION, SQLiteStore
from memoryscope_plugins.types import Memory
from memoryscope_plugins.vectors import vector_space


def test_corrupted_file_gives_a_clear_error(tmp_path, local_embedder):
    path = tmp_path / "broken.db"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a readable memoryscope store"):
        MemoryScope(path=path, embedder=local_embedder)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
    with pytest.raises(SchemaVersionError, match="999"):
        SQLiteStore(path)


def test_locked_store_times_out_with_a_clear_error(tmp_path, local_embedder):
    path = tmp_path / "locked.db"
    settings = Settings(store={"path": path, "busy_timeout_s": 0.3})
    with MemoryScope(settings, embedder=local_embedder) as memory:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreLockedError, match="locked"):
                memory.record("anna", [("user", "written while another process holds the lock")])
            # readers are not blocked by a writer
            assert memory.list("anna") == []
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        memory.record("anna", [("user", "written once the lock is gone")])
        assert memory.count("anna") == 1


_WRITER = textwrap.dedent("""
    import sys
    from memoryscope_plugins import MemoryScope
    memory = MemoryScope(path=sys.argv[1])
    i = 0
    while True:
        if i == 1:
            print("ready", flush=True)  # at least one whole write is in
        memory.record("anna", [("user", f"message number {i} " + "padding " * 50),
                               ("assistant", f"reply number {i}")])
        i += 1
""")


@pytest.mark.slow
def test_killed_writer_leaves_no_half_written_memory(tmp_path):
    path = tmp_path / "crash.db"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(1.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        memories = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
        messages = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        indexed = conn.execute("SELECT COUNT(*) FROM memories WHERE terms != ''").fetchone()[0]
        with_vectors = conn.execute("SELECT COUNT(*) FROM memories WHERE vector IS NOT NULL").fetchone()[0]
    assert memories > 0
    # every record() call is one transaction: messages, memories, index rows and vectors agree,
    # and they come in whole pairs
    assert memories == messages == indexed == with_vectors
    assert memories % 2 == 0
    with MemoryScope(path=path) as memory:  # and the store opens and works afterwards
        assert memory.count("anna") == memories
        memory.record("anna", [("user", "after the crash")])


def test_switching_embedding_model_reembeds_and_never_mixes(tmp_path, local_embedder):
    from memoryscope_plugins.models.openai_compat import OpenAIEmbedder
    from tests.support.fakes.fake_model_server import FakeModelServer

    path = tmp_path / "switch.db"
    with MemoryScope(path=path, embedder=local_embedder) as memory:
        memory.record("anna", [("user", "I keep bees in my garden."), ("user", "My car is a red Fiat.")])
        assert memory.store.count_needing_vectors() == 0
    with FakeModelServer(embedding_dim=16) as server:
        remote = OpenAIEmbedder("fake-embed", base_url=server.url + "/v1", api_key="sk-test")
        with MemoryScope(path=path, embedder=remote) as memory:
            # opening with another model re-embedded both memories into the new space
            assert memory.store.count_needing_vectors() == 0
            result = memory.retrieve("anna", "bees garden")
            assert result.memories[0].scores.get("bm25")  # found by full text (the fake's vectors are noise)
            assert "I keep bees in my garden." in [m.memory.content for m in result.memories]
            assert {m.memory.embedding_model for m in result.memories} == {vector_space(remote)}
            embedded = [r.json for r in server.requests_to("/v1/embeddings")]
            assert sum(len(body["input"]) for body in embedded) >= 3  # two memories + the query
    # and back: the local model's vectors are rebuilt, 384-dimensional again
    with MemoryScope(path=path, embedder=local_embedder) as memory:
        assert memory.store.count_needing_vectors() == 0
        assert memory.retrieve("anna", "bees").memories[0].memory.content == "I keep bees in my garden."


def test_vector_cache_sees_other_connections_writes(tmp_path, local_embedder):
    path = tmp_path / "shared.db"
    with MemoryScope(path=path, embedder=local_embedder) as reader, \
            MemoryScope(path=path, embedder=local_embedder) as writer:
        writer.record("anna", [("user", "The first fact is about violins.")])
        assert reader.retrieve("anna", "violins").memories[0].memory.content.endswith("violins.")
        writer.record("anna", [("user", "The second fact is about tulips.")])
        assert reader.retrieve("anna", "tulips").memories[0].memory.content.endswith("tulips.")
        memory_id = reader.retrieve("anna", "tulips").memories[0].memory.id
        writer.delete("anna", memory_id)
        assert all(m.memory.id != memory_id for m in reader.retrieve("anna", "tulips").memories)


def test_store_file_is_created_in_a_new_folder(tmp_path, local_embedder):
    path = tmp_path / "deep" / "er" / "memory.db"
    with MemoryScope(path=path, embedder=local_embedder) as memory:
        memory.record("anna", [("user", "hello")])
    assert path.exists()
    assert os.path.getsize(path) > 0


def test_default_location_is_memoryscope_home(tmp_path, local_embedder, monkeypatch):
    monkeypatch.setenv("MEMORYSCOPE_HOME", str(tmp_path / "home"))
    with MemoryScope(embedder=local_embedder) as memory:
        memory.record("anna", [("user", "hello")])
    assert (Path(tmp_path) / "home" / "memory.db").exists()


def test_memories_without_vectors_are_found_by_full_text(tmp_path):
    store = SQLiteStore(tmp_path / "m.db", embedding_model="model-a")
    when = datetime(2024, 1, 1, tzinfo=timezone.utc)
    store.put([Memory(id="a", user_id="u", agent_id="x", content="sailing on the lake", created_at=when,
                      updated_at=when)])
    found = store.search(SearchRequest(user_id="u", text="lake sailing", vector=np.ones(4, dtype=np.float32) / 2))
    assert [c.memory.id for c in found] == ["a"] and found[0].vector_rank is None
    # the user's first vector arrives after the cache was built: it widens, nothing is lost
    store.put([Memory(id="b", user_id="u", agent_id="x", content="baking bread", created_at=when,
                      updated_at=when)], np.ones((1, 4), dtype=np.float32) / 2)
    found = {c.memory.id: c for c in store.search(
        SearchRequest(user_id="u", text="lake", vector=np.ones(4, dtype=np.float32) / 2))}
    assert found["a"].text_rank == 1 and found["a"].vector_rank is None
    assert found["b"].vector_rank == 1 and found["b"].text_rank is None
    store.close()


def test_incremental_cache_ranks_as_a_fresh_load(tmp_path):
    """Rows added after a user's index was cached rank exactly as a cold load of the file does."""
    when = datetime(2024, 1, 1, tzinfo=timezone.utc)
    rng = np.random.default_rng(3)
    words = ["garden", "violin", "coffee", "trip", "paris", "dog", "cake", "exam"]

    def batch(start: int, n: int) -> tuple[list[Memory], np.ndarray]:
        rows = [Memory(id=f"m{i}", user_id="u", agent_id="x", created_at=when, updated_at=when,
                       content=" ".join(rng.choice(words, size=4))) for i in range(start, start + n)]
        vectors = rng.standard_normal((n, 8)).astype(np.float32)
        return rows, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    warm = SQLiteStore(tmp_path / "m.db", embedding_model="model-a")
    warm.put(*batch(0, 40))
    query = SearchRequest(user_id="u", text="violin trip paris", vector=batch(900, 1)[1][0], limit=15)
    warm.search(query)  # caches the user
    for start in (40, 45, 60):
        warm.put(*batch(start, 5))
        warm.search(query)
    cold = SQLiteStore(tmp_path / "m.db", embedding_model="model-a")

    def ranks(store):
        return [(c.memory.id, c.text_rank, c.vector_rank, round(c.text_score or 0, 5))
                for c in sorted(store.search(query), key=lambda c: c.memory.id)]

    assert ranks(warm) == ranks(cold)
    warm.close()
    cold.close()


# The schema of version 1 (the first release), as such a file holds it.
_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE users (user_id TEXT PRIMARY KEY, rev INTEGER NOT NULL DEFAULT 0, epoch INTEGER NOT NULL DEFAULT 0);
CREATE TABLE memories (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    type TEXT NOT NULL, status TEXT NOT NULL, content TEXT NOT NULL, context TEXT, speaker TEXT, role TEXT,
    session_id TEXT, previous_id TEXT, created_at TEXT NOT NULL, created_ts REAL NOT NULL,
    updated_at TEXT NOT NULL, event_start TEXT, event_start_ts REAL, event_end TEXT, event_end_ts REAL,
    superseded_by TEXT, source_ids TEXT NOT NULL DEFAULT '[]', metadata TEXT NOT NULL DEFAULT '{}',
    embedding_model TEXT, vector BLOB, seq INTEGER NOT NULL);
CREATE INDEX memories_user_time ON memories(user_id, created_ts);
CREATE INDEX memories_user_seq ON memories(user_id, seq);
CREATE INDEX memories_model ON memories(embedding_model);
CREATE VIRTUAL TABLE memories_fts USING fts5(terms, owner, tokenize = "unicode61 remove_diacritics 0", detail = "full");
CREATE TABLE messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL, session_id TEXT, role TEXT NOT NULL, name TEXT, content TEXT NOT NULL,
    timestamp TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0);
CREATE TABLE leases (user_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_ts REAL NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1'), ('seq', '2'), ('embedding_model', 'model-a');
INSERT INTO users VALUES ('u', 2, 0);
INSERT INTO memories(rowid, id, user_id, agent_id, type, status, content, created_at, created_ts, updated_at, seq)
VALUES (1, 'a', 'u', 'x', 'turn', 'active', 'We went sailing on the lake', '2024-01-01T00:00:00+00:00', 1704067200,
        '2024-01-01T00:00:00+00:00', 1),
       (2, 'b', 'u', 'x', 'turn', 'active', 'Baking bread on Sunday', '2024-01-01T00:00:00+00:00', 1704067200,
        '2024-01-01T00:00:00+00:00', 2);
INSERT INTO memories_fts(rowid, terms, owner) VALUES (1, 'went sail lake', 'u1'), (2, 'bake bread sunday', 'u1');
"""


def test_a_version_1_file_is_upgraded_in_place(tmp_path):
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_SCHEMA_V1)
    store = SQLiteStore(path, embedding_model="model-a")
    found = store.search(SearchRequest(user_id="u", text="sailing", vector=None))
    assert [c.memory.id for c in found] == ["a"]
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    store.put([Memory(id="c", user_id="u", agent_id="x", content="sailing again",
                      created_at=datetime(2024, 2, 1, tzinfo=timezone.utc),
                      updated_at=datetime(2024, 2, 1, tzinfo=timezone.utc))])
    assert {c.memory.id for c in store.search(SearchRequest(user_id="u", text="sail", vector=None))} == {"a", "c"}
    store.close()
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "memories_fts" not in tables
        assert conn.execute("SELECT terms FROM memories WHERE id='b'").fetchone()[0] == "bake bread sunday"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    SQLiteStore(path).close()  # and opens again as version 2


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("schema", [
    "CREATE TABLE invoices(id INTEGER PRIMARY KEY, amount REAL); INSERT INTO invoices(amount) VALUES (9.5)",
    "CREATE TABLE memories(x TEXT)",  # a table name of ours: the schema write would fail half way
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); CREATE TABLE memories(x); CREATE TABLE messages(x); "
    "INSERT INTO meta VALUES ('owner', 'someone else')",  # our tables, but no schema_version
    "CREATE TABLE meta(name TEXT); CREATE TABLE memories(x); CREATE TABLE messages(x)",  # a meta of other columns
], ids=["other-tables", "a-table-of-ours", "meta-without-schema-version", "meta-of-other-columns"])
def test_another_applications_database_is_refused_and_left_untouched(tmp_path, schema):
    folder = tmp_path / "app"
    folder.mkdir()
    path = folder / "app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(schema)
    conn.close()
    before = _files(folder)
    with pytest.raises(StoreError, match="SQLite database of another application.*left untouched"):
        SQLiteStore(path)
    assert _files(folder) == before  # not switched to WAL, no table added, no side file
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_an_sqlite_database_without_tables_becomes_a_store(tmp_path):
    path = tmp_path / "empty.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE scratch(x)")
        conn.execute("DROP TABLE scratch")
    conn.close()
    assert path.stat().st_size > 0
    with SQLiteStore(path, embedding_model="model-a") as store:
        store.put([Memory(id="a", user_id="u", agent_id="x", content="hello",
                          created_at=datetime(2024, 1, 1, tzinfo=timezone.utc),
                          updated_at=datetime(2024, 1, 1, tzinfo=timezone.utc))])
    with SQLiteStore(path, embedding_model="model-a") as store:  # and opens again as a store
        assert [m.id for m in store.get("u", ["a"])] == ["a"]


def test_a_symbolic_link_to_a_new_file_creates_it_private_through_the_link(tmp_path):
    import stat
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "memory.db"
    link, hop = tmp_path / "memory.db", tmp_path / "hop.db"
    hop.symlink_to(target)
    link.symlink_to(hop)  # a chain of links, dangling at its end
    old_umask = os.umask(0o022)
    try:
        store = SQLiteStore(link, embedding_model="model-a")
        store.put([Memory(id="a", user_id="u", agent_id="x", content="private",
                          created_at=datetime(2024, 1, 1, tzinfo=timezone.utc),
                          updated_at=datetime(2024, 1, 1, tzinfo=timezone.utc))])
        # the file and SQLite's side files, beside the link's target, are all private
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in elsewhere.iterdir()}
        assert modes == {"memory.db": 0o600, "memory.db-wal": 0o600, "memory.db-shm": 0o600}
        store.close()
        assert link.is_symlink() and hop.is_symlink() and sorted(os.listdir(tmp_path)) == ["elsewhere", "hop.db",
                                                                                         "memory.db"]
        with SQLiteStore(link, embedding_model="model-a") as again:
            assert [m.content for m in again.get("u", ["a"])] == ["private"]
        missing = tmp_path / "nowhere.db"
        missing.symlink_to(tmp_path / "no-such-folder" / "memory.db")
        with pytest.raises(StoreError, match="symbolic link"):
            SQLiteStore(missing)
        assert not (tmp_path / "no-such-folder").exists()
    finally:
        os.umask(old_umask)
