"""The embedded store: one SQLite file, nothing to start.

- Crash safety: every write is one transaction in WAL mode, so a killed process leaves either the
  whole write or none of it; readers never block the writer and see committed data only.
- Search: a user's memories are loaded once into a bounded in-process cache (`user_index.UserIndex`): a
  float32 matrix of their vectors, an in-memory BM25 index of their analysed terms
  (`term_index`), and the columns filters need. The cache refreshes incrementally from a per-user
  revision counter, so other processes' writes are seen, and a query costs one matrix-vector
  product and a pass over the postings of its terms, whatever the size of the file.
- On disk, each memory row also keeps its vector (float16 blob) and its analysed terms, so a
  user's index loads with one indexed read and nothing is re-analysed.
"""

from __future__ import annotations

import builtins
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import numpy as np

from ..errors import MessagesGoneError, SchemaVersionError, StoreCorruptError, StoreError, StoreLockedError
from ..indexing import full_text
from ..types import Entity, EntityMention, Memory, ProfileValue
from . import base, records, sqlite_ledger, tool_counters, user_index
from .base import Candidate, LedgerChanges, LedgerEdit, MemoryFilter, SearchRequest, StoredMessage, VectorRows
from .core import BoundReader, StoreBase, in_order
from .leases import Lease, require_held
from .messages import DONE, FAILED, FORGOTTEN_METADATA, PENDING
from .overview import StoreOverview, sql_overview
from .text_analysis import analyse
from .timecodes import epoch_seconds
from .user_index import UserIndex

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    user_id TEXT PRIMARY KEY,
    rev INTEGER NOT NULL DEFAULT 0,      -- bumped by every write to the user's memories
    epoch INTEGER NOT NULL DEFAULT 0     -- bumped by deletions: caches reload in full
);
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    content TEXT NOT NULL,
    context TEXT,
    speaker TEXT,
    role TEXT,
    session_id TEXT,
    previous_id TEXT,
    created_at TEXT NOT NULL,
    created_ts REAL NOT NULL,
    updated_at TEXT NOT NULL,
    event_start TEXT,
    event_start_ts REAL,
    event_end TEXT,
    event_end_ts REAL,
    superseded_by TEXT,
    source_ids TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}',
    embedding_model TEXT,
    vector BLOB,
    seq INTEGER NOT NULL,                -- store-wide change counter, for incremental cache refresh
    terms TEXT NOT NULL DEFAULT ''       -- the analysed full-text terms (text_analysis.analyse)
);
CREATE INDEX IF NOT EXISTS memories_user_time ON memories(user_id, created_ts);
CREATE INDEX IF NOT EXISTS memories_user_seq ON memories(user_id, seq);
CREATE INDEX IF NOT EXISTS memories_model ON memories(embedding_model);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    session_id TEXT,
    role TEXT NOT NULL,
    name TEXT,
    content TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_user_state ON messages(user_id, state, seq);
CREATE INDEX IF NOT EXISTS messages_state ON messages(state, user_id);
CREATE TABLE IF NOT EXISTS leases (user_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_ts REAL NOT NULL);
""" + sqlite_ledger.DDL + ";\n" + tool_counters.SQLITE_DDL

_MEMORY_COLUMNS = ", ".join(records.MEMORY_COLUMNS)
_MESSAGE_COLUMNS = ", ".join(records.MESSAGE_COLUMNS)
# a memory row as `_put_in` writes it: the shared columns, then the comparable times, vector and terms
_WRITE_COLUMNS = (*records.MEMORY_VALUE_COLUMNS, "created_ts", "event_start_ts",
                  "event_end_ts", "embedding_model", "vector", "seq", "terms")
_INSERT_MEMORY = (f"INSERT INTO memories({', '.join(_WRITE_COLUMNS)}) "
                  f"VALUES({','.join('?' * len(_WRITE_COLUMNS))})")
_UPDATE_MEMORY = f"UPDATE memories SET {', '.join(c + '=?' for c in _WRITE_COLUMNS)} WHERE rowid=?"
_INSERT_MESSAGE = (f"INSERT INTO messages({', '.join(records.MESSAGE_WRITE_COLUMNS)}) "
                   f"VALUES({','.join('?' * len(records.MESSAGE_WRITE_COLUMNS))})")


class SQLiteStore(StoreBase):
    """The embedded `MemoryStore`: one local SQLite file (created on first use).

    Args:
        path: the database file; its folder is created if missing.
        embedding_model: the name of the embedder whose vectors this store keeps; vectors of any
            other model are never compared with it.
        busy_timeout_s: how long a writer waits for another process's write before
            `StoreLockedError`.
        vector_cache_rows: at most this many memories are kept in the in-memory search index
            (vectors and BM25 postings; least recently used users are dropped first, the user
            being searched is always kept).
        synchronous: SQLite's durability level; "NORMAL" survives a killed process, "FULL" also
            a power cut.
    """

    text_statistics: Literal["user", "index"] = "user"  # see MemoryStore

    def __init__(self, path: str | os.PathLike[str], *, embedding_model: str | None = None,
                 busy_timeout_s: float = 10.0, vector_cache_rows: int = 250_000,
                 synchronous: str = "NORMAL", quick_check_max_mb: float = 256.0) -> None:
        self.path = Path(path)
        self._quick_check_max_bytes = quick_check_max_mb * 1024 * 1024
        self.embedding_model = embedding_model
        self._busy_timeout_s = busy_timeout_s
        self._synchronous = synchronous if synchronous in ("NORMAL", "FULL") else "NORMAL"
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._conn_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._cache = user_index.IndexCache(vector_cache_rows)
        self._widths: dict[str | None, int] = {}  # embedding model -> the width of its stored vectors
        self._closed = False
        if str(self.path) != ":memory:":
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except (OSError, ValueError) as exc:
                raise StoreError(f"cannot create the folder of the store {self.path}: "
                                 f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
            self._check_file()
            self._create_private()
        self._init_schema()
        if str(self.path) != ":memory:":
            self._check_pages()

    @classmethod
    def from_settings(cls, cfg: Any, *, embedding_model: str | None = None) -> "SQLiteStore":
        """Build from `StoreSettings`: the file `cfg.sqlite_path()` and its tuning options."""
        return cls(cfg.sqlite_path(), embedding_model=embedding_model, busy_timeout_s=cfg.busy_timeout_s,
                   vector_cache_rows=cfg.vector_cache_rows, synchronous=cfg.synchronous,
                   quick_check_max_mb=cfg.quick_check_max_mb)

    # -- self-check on open ----------------------------------------------------------------------
    _SQLITE_HEADER = b"SQLite format 3\x00"
    _WHAT_TO_DO = ("Restore the file from a backup, or move it aside to start an empty store; "
                   "`sqlite3 <file> .recover` may save what is readable.")

    def _create_private(self) -> None:
        """Create a new store file with mode 0600 whatever the umask, before SQLite creates it with the
        umask's mode; SQLite gives its -wal and -shm files the database file's mode. An existing file
        keeps its mode. A symbolic link to a file not there yet is followed: its final target is
        created 0600 (the link is kept), as SQLite, which follows links, would create it there."""
        target = Path(os.path.realpath(self.path))
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        except OSError as exc:
            via = f" (a symbolic link to {target})" if self.path.is_symlink() else ""
            raise StoreError(f"cannot create the store {self.path}{via}: "
                             f"{exc.strerror or type(exc).__name__}") from None
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)

    def _check_file(self) -> None:
        """Refuse a file that exists but is not an SQLite database (empty, truncated header, other
        content), before SQLite would silently treat an empty file as a new store."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot open the store {self.path}: "
                             f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
        if self.path.is_dir():
            raise StoreError(f"the store path {self.path} is a folder; name the database file inside it")
        waited = 0.0
        while size == 0 and waited < 2.0:  # another process may be creating it right now
            time.sleep(0.05)
            waited += 0.05
            size = self.path.stat().st_size
        if size == 0:
            raise StoreCorruptError(f"the store file {self.path} is not a readable memoryscope store: it is empty "
                                    f"(0 bytes). If it was a store, it was truncated. {self._WHAT_TO_DO}")
        with open(self.path, "rb") as handle:
            header = handle.read(100)
        if not header.startswith(self._SQLITE_HEADER):
            raise StoreCorruptError(f"the store file {self.path} is not a readable memoryscope store (not an SQLite "
                                    f"database: bad header). {self._WHAT_TO_DO}")
        self._check_ours()

    # the tables every store file has had since the first release (schema 1), with meta's schema_version
    _MARKER_TABLES = frozenset({"meta", "memories", "messages"})

    def _check_ours(self) -> None:
        """Refuse another application's SQLite database before anything is written to it: opening a
        store switches the file to WAL and creates tables. The file is read on a read-only connection;
        one without tables (a new, empty database) may become a store, one with tables must be a
        memoryscope store (the tables of every schema version and a `schema_version` in `meta`)."""
        uri = Path(os.path.abspath(self.path)).as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=self._busy_timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                return
            marked = False
            if self._MARKER_TABLES <= tables:
                try:
                    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                    marked = row is not None and str(row[0]).isdigit()
                except sqlite3.OperationalError as exc:  # a `meta` of other columns: not ours
                    if "no such column" not in str(exc):
                        raise
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        finally:
            conn.close()
        if not marked:
            raise StoreError(f"the file {self.path} is an SQLite database of another application ({len(tables)} "
                             "table(s), no memoryscope schema), not a memoryscope store; it was left untouched. "
                             "Name a new file (or an empty database) for the store.")

    def _check_pages(self) -> None:
        """SQLite's quick_check (every page's structure; no index cross-check), when the file is
        small enough to read in about a second. A damaged file is refused: reads would silently
        skip rows and writes would land on broken pages."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        if size > self._quick_check_max_bytes:
            return
        try:
            with self._read() as conn:
                rows = conn.execute("PRAGMA quick_check(5)").fetchall()
        except StoreError as exc:
            if isinstance(exc, StoreLockedError):
                return
            raise StoreCorruptError(f"the store file {self.path} is damaged. {self._WHAT_TO_DO}") from None
        if rows and rows[0][0] != "ok":
            self.close()
            raise StoreCorruptError(f"the store file {self.path} is damaged ({len(rows)} problem(s) found by "
                                    f"SQLite's quick_check). {self._WHAT_TO_DO}")

    # -- connections ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError("the store is closed")
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(str(self.path), timeout=self._busy_timeout_s,
                                   isolation_level=None, check_same_thread=False)
            # 8 KiB pages pack a memory row (~1.1 KB with its float16 vector) 7 to a page, where 4 KiB
            # pages fit only 3 and leave a quarter empty; a no-op on an existing file
            conn.execute("PRAGMA page_size=8192")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA cache_size=-65536")
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc) from exc
        self._local.conn = conn
        with self._conn_lock:
            self._connections.append(conn)
        return conn

    def _translate(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StoreLockedError(
                f"the store {self.path} stayed locked by another writer for more than "
                f"{self._busy_timeout_s:g} s")
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return StoreCorruptError(f"the store file {self.path} is not a readable memoryscope store "
                                     f"(corrupted or not SQLite): {text}. {self._WHAT_TO_DO}")
        return StoreError(f"store error on {self.path}: {text}")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            yield conn
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; BEGIN IMMEDIATE takes the write lock up front (no upgrade deadlock)."""
        conn = self._connect()
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc
            try:
                yield conn
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._translate(exc) from exc
                raise
            else:
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    conn.execute("ROLLBACK")
                    raise self._translate(exc) from exc

    def _schema_is_current(self) -> bool:
        """True when the file already has this version's schema: opening then needs no write
        transaction, so a store opens (and reads) while another process holds the write lock."""
        try:
            with self._read() as conn:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                wanted = {"meta", "users", "memories", "messages", "leases", "tool_counters", *sqlite_ledger.TABLES}
                if not wanted <= tables:
                    return False
                if conn.execute("SELECT 1 FROM sqlite_master WHERE type='index' AND name=?",
                                (tool_counters.SQLITE_INDEX,)).fetchone() is None:
                    return False
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except StoreLockedError:
            return False
        if row is None:
            return False
        if int(row[0]) > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self.path} has schema version {row[0]}; this library knows up to {SCHEMA_VERSION}. "
                "Upgrade memoryscope-plugins.")
        return int(row[0]) == SCHEMA_VERSION

    def _init_schema(self) -> None:
        if self._schema_is_current():
            return
        with self._write() as conn:
            for statement in _SCHEMA.split(";\n"):  # executescript would commit the transaction
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta(key, value) VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
                conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('seq', '0')")
            elif int(row[0]) > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.path} has schema version {row[0]}; this library knows up to {SCHEMA_VERSION}. "
                    "Upgrade memoryscope-plugins.")
            elif int(row[0]) < SCHEMA_VERSION:
                self._migrate(conn, int(row[0]))

    @staticmethod
    def _migrate(conn: sqlite3.Connection, version: int) -> None:
        """Bring a file written by an older version up to `SCHEMA_VERSION`, inside the caller's
        write transaction (a crash midway leaves the old version intact)."""
        if version < 2:
            # v1 kept the analysed terms in an FTS5 table that search no longer uses: move them
            # into the memory row and drop the table and its index
            log.info("upgrading the store schema from version %d to 2", version)
            conn.execute("ALTER TABLE memories ADD COLUMN terms TEXT NOT NULL DEFAULT ''")
            conn.execute("UPDATE memories SET terms = COALESCE((SELECT f.terms FROM memories_fts f "
                         "WHERE f.rowid = memories.rowid), '')")
            conn.execute("DROP TABLE memories_fts")
        # v3 added the entity ledger and the profile: their tables are made by `_SCHEMA` above
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        """Close every connection this store opened (from any thread)."""
        self._closed = True
        with self._conn_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
        self._cache.clear()

    # -- meta -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) "
                         "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                         (key, value))

    # -- writes -----------------------------------------------------------------------------
    @staticmethod
    def _next_seq(conn: sqlite3.Connection, count: int) -> int:
        """Reserve `count` change numbers; returns the first. Runs inside the write transaction."""
        row = conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key='seq' RETURNING value",
                           (count,)).fetchone()
        return int(row[0]) - count + 1

    def _put_in(self, conn: sqlite3.Connection, memories: Sequence[Memory], vectors: VectorRows | None) -> None:
        if not memories:
            return
        rows = self._checked_vectors(conn, base.vector_rows(vectors, len(memories)))
        first_seq = self._next_seq(conn, len(memories))
        touched: set[str] = set()
        for i, memory in enumerate(memories):
            blob = None
            model = None
            clear_vector = False
            row = rows[i]
            if row is not None:
                if np.size(row) == 0:  # an empty row clears a stale vector (re-embedded later)
                    clear_vector = True
                else:
                    blob = np.asarray(row, dtype=np.float16).tobytes()
                    model = self.embedding_model
            old = conn.execute("SELECT rowid, user_id FROM memories WHERE id=?", (memory.id,)).fetchone()
            if old is not None and old[1] != memory.user_id:
                raise ValueError(f"memory id {memory.id!r} belongs to another user")
            if old is not None and blob is None and not clear_vector:  # only fields change: keep the vector
                kept = conn.execute("SELECT vector, embedding_model FROM memories WHERE rowid=?", (old[0],)).fetchone()
                blob, model = kept
            values = (
                *records.memory_values(memory).values(), epoch_seconds(memory.created_at),
                epoch_seconds(memory.event_start), epoch_seconds(memory.event_end),
                model, blob, first_seq + i, " ".join(analyse(full_text(memory))),
            )
            if old is None:
                conn.execute(_INSERT_MEMORY, values)
            else:
                conn.execute(_UPDATE_MEMORY, values + (old[0],))
            touched.add(memory.user_id)
        self._bump(conn, touched, deletion=False)

    def _checked_vectors(self, conn: sqlite3.Connection, rows: builtins.list[np.ndarray | None]
                         ) -> builtins.list[np.ndarray | None]:
        """`rows` (checked by `base.vector_rows`: finite, within float16) when each has the width of
        the vectors this store holds of its embedding model (one of another width would make that
        user's vector search fail); `ValueError` otherwise, before anything is written."""
        widths = {row.size for row in rows if row is not None and row.size}
        if not widths:
            return rows
        width = self._widths.get(self.embedding_model)
        if width is None:  # read once per model (a model's vectors never change width)
            stored = conn.execute("SELECT length(vector) FROM memories WHERE embedding_model IS ? AND vector IS NOT "
                                  "NULL LIMIT 1", (self.embedding_model,)).fetchone()
            width = stored[0] // 2 if stored is not None else None  # float16: two bytes a dimension
            if width is not None:  # only a width the file holds (this write may yet roll back)
                self._widths[self.embedding_model] = width
        expected = {width} if width is not None else set()
        if len(widths | expected) > 1:
            raise ValueError(f"vectors of {self.embedding_model!r} have {sorted(expected or widths)[0]} dimensions; "
                             f"got {sorted(widths - expected)}")
        return rows

    @staticmethod
    def _bump(conn: sqlite3.Connection, users: set[str], *, deletion: bool) -> None:
        for user_id in users:
            conn.execute(
                "INSERT INTO users(user_id, rev, epoch) VALUES(?, 1, ?) ON CONFLICT(user_id) DO UPDATE SET "
                "rev = rev + 1, epoch = epoch + ?", (user_id, int(deletion), int(deletion)))

    def _commit(self, memories: Sequence[Memory], vectors: VectorRows | None,
                done_message_ids: Sequence[str], lease: Lease | None = None,
                ledger: LedgerChanges | None = None) -> None:
        with self._write() as conn:  # BEGIN IMMEDIATE: no other writer can take the lease meanwhile
            if lease is not None:
                row = conn.execute("SELECT owner, expires_ts FROM leases WHERE user_id=?", (lease.user_id,)).fetchone()
                require_held(lease, row[0] if row else None, row is not None and row[1] > time.time())
            self._put_in(conn, memories, vectors)
            if ledger is not None:
                sqlite_ledger.apply(conn, ledger)
            done = sum(conn.execute("UPDATE messages SET state=? WHERE id=? AND state=?", (DONE, i, PENDING)).rowcount
                       for i in set(done_message_ids))
            if done != len(set(done_message_ids)):  # raised inside the transaction: nothing is kept
                raise MessagesGoneError("a message of this commit is no longer pending")

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the vectors of existing memories (used when the embedding model changes); a None
        row leaves its memory as it is, an empty one clears its vector."""
        with self._write() as conn:
            rows = self._checked_vectors(conn, base.vector_rows_for(base.id_list(ids), vectors))
            first_seq = self._next_seq(conn, len(ids))
            users: set[str] = set()
            for i, (memory_id, vector) in enumerate(zip(ids, rows)):
                if vector is None:
                    continue
                blob, model = (None, None) if vector.size == 0 else (vector.astype(np.float16).tobytes(),
                                                                      self.embedding_model)
                row = conn.execute(
                    "UPDATE memories SET vector=?, embedding_model=?, seq=? WHERE id=? RETURNING user_id",
                    (blob, model, first_seq + i, memory_id)).fetchone()
                if row is not None:
                    users.add(row[0])
            self._bump(conn, users, deletion=False)

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        ids = base.id_list(ids)
        if not ids:
            return 0
        with self._write() as conn:
            deleted = 0
            for memory_id in ids:
                row = conn.execute("DELETE FROM memories WHERE id=? AND user_id=? RETURNING rowid",
                                   (memory_id, user_id)).fetchone()
                if row is not None:
                    deleted += 1
                    # a turn's message, logged under the turn's id: forgotten with it (`StoreBase.delete`)
                    conn.execute("UPDATE messages SET content='', name=NULL, metadata=?, state=? "
                                 "WHERE id=? AND user_id=? AND role <> 'tool'",
                                 (FORGOTTEN_METADATA, DONE, memory_id, user_id))
            sqlite_ledger.delete_mentions_of(conn, user_id, list(ids))
            if deleted:
                self._bump(conn, {user_id}, deletion=True)
        return deleted

    def delete_user(self, user_id: str) -> int:
        with self._write() as conn:
            removed = conn.execute("DELETE FROM memories WHERE user_id=?", (user_id,)).rowcount
            conn.execute("DELETE FROM messages WHERE user_id=?", (user_id,))
            conn.execute("DELETE FROM tool_counters WHERE user_id=?", (user_id,))
            conn.execute("DELETE FROM leases WHERE user_id=?", (user_id,))
            sqlite_ledger.delete_user(conn, user_id)
            self._bump(conn, {user_id}, deletion=True)
        self._cache.drop(user_id)
        return removed

    def rename_user(self, old_user_id: str, new_user_id: str) -> int:
        with self._write() as conn:
            taken = conn.execute("SELECT 1 FROM memories WHERE user_id=? UNION ALL SELECT 1 FROM messages "
                                 "WHERE user_id=? LIMIT 1", (new_user_id, new_user_id)).fetchone()
            if taken is not None or sqlite_ledger.has_user(conn, new_user_id):
                raise ValueError("the new user id already has memories, messages or ledger entries")
            moved = conn.execute("UPDATE memories SET user_id=? WHERE user_id=?",
                                 (new_user_id, old_user_id)).rowcount
            conn.execute("UPDATE messages SET user_id=? WHERE user_id=?", (new_user_id, old_user_id))
            conn.execute("UPDATE tool_counters SET user_id=? WHERE user_id=?", (new_user_id, old_user_id))
            sqlite_ledger.rename_user(conn, old_user_id, new_user_id)
            conn.execute("DELETE FROM leases WHERE user_id=?", (old_user_id,))
            self._bump(conn, {old_user_id, new_user_id}, deletion=True)
        self._cache.drop(old_user_id, new_user_id)
        return moved

    # -- the entity ledger and the profile (sqlite_ledger) -------------------------------------
    def _edit_ledger(self, user_id: str, edit: LedgerEdit) -> LedgerChanges | None:
        with self._write() as conn:  # BEGIN IMMEDIATE: the reads and the write under one write lock
            changes = edit(BoundReader(sqlite_ledger, conn))
            if changes is not None:
                sqlite_ledger.apply(conn, changes)
        return changes

    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> builtins.list[Entity]:
        with self._read() as conn:
            return sqlite_ledger.entities(conn, user_id, ids, kind)

    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> builtins.list[EntityMention]:
        with self._read() as conn:
            return sqlite_ledger.mentions(conn, user_id, entity_ids, memory_ids)

    def profile_values(self, user_id: str, *, key: str | None = None,
                       current_only: bool = False) -> builtins.list[ProfileValue]:
        with self._read() as conn:
            return sqlite_ledger.profile_values(conn, user_id, key, current_only)

    # -- reads ------------------------------------------------------------------------------
    def get(self, user_id: str, ids: Sequence[str]) -> list[Memory]:
        ids = base.id_list(ids)
        if not ids:
            return []
        found: dict[str, Memory] = {}
        with self._read() as conn:
            for chunk_start in range(0, len(ids), 500):
                chunk = list(ids[chunk_start:chunk_start + 500])
                marks = ",".join("?" * len(chunk))
                for row in conn.execute(
                        f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE user_id=? AND id IN ({marks})",
                        [user_id, *chunk]):
                    found[row[0]] = records.memory_from_row(row)
        return in_order(ids, found)

    @staticmethod
    def _where(user_id: str, flt: MemoryFilter) -> tuple[str, list[Any]]:
        clauses = ["m.user_id = ?"]
        params: list[Any] = [user_id]
        if flt.agent_id is not None:
            clauses.append("m.agent_id = ?")
            params.append(flt.agent_id)
        if flt.types:
            clauses.append(f"m.type IN ({','.join('?' * len(flt.types))})")
            params.extend(t.value for t in flt.types)
        if flt.statuses:
            clauses.append(f"m.status IN ({','.join('?' * len(flt.statuses))})")
            params.extend(s.value for s in flt.statuses)
        if flt.session_id is not None:
            clauses.append("m.session_id = ?")
            params.append(flt.session_id)
        if flt.time_range is not None:
            lo, hi = epoch_seconds(flt.time_range.start), epoch_seconds(flt.time_range.end)
            lo = -1e18 if lo is None else lo
            hi = 1e18 if hi is None else hi
            clauses.append(
                "((m.created_ts >= ? AND m.created_ts < ?) OR (m.event_start_ts IS NOT NULL AND "
                "m.event_start_ts < ? AND COALESCE(m.event_end_ts, m.event_start_ts) >= ?))")
            params.extend([lo, hi, hi, lo])
        return " AND ".join(clauses), params

    def list(self, user_id: str, flt: MemoryFilter, *, limit: int = 100, offset: int = 0,
             newest_first: bool = True) -> builtins.list[Memory]:
        where, params = self._where(user_id, flt)
        order = "DESC" if newest_first else "ASC"
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_MEMORY_COLUMNS.replace('id,', 'm.id,', 1)} FROM memories m WHERE {where} "
                f"ORDER BY m.created_ts {order}, m.rowid {order} LIMIT ? OFFSET ?",
                [*params, limit, offset]).fetchall()
        return [records.memory_from_row(r) for r in rows]

    def count(self, user_id: str, flt: MemoryFilter) -> int:
        where, params = self._where(user_id, flt)
        with self._read() as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM memories m WHERE {where}", params).fetchone()[0])

    def users(self) -> builtins.list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT DISTINCT user_id FROM memories UNION SELECT DISTINCT user_id FROM messages ORDER BY 1")]

    def stored_users(self) -> builtins.list[str]:
        tables = ("memories", "messages", *sqlite_ledger.TABLES, "tool_counters")
        with self._read() as conn:
            return [r[0] for r in conn.execute(
                " UNION ".join(f"SELECT user_id FROM {table}" for table in tables) + " ORDER BY 1")]

    def _memory_page(self, user_id: str | None, *, needing_vectors: bool, after: int,
                     limit: int) -> builtins.list[tuple[int, Memory]]:
        clauses: builtins.list[str] = ["rowid > ?"]
        params: builtins.list[Any] = [after]
        if user_id is not None:
            clauses.append("user_id=?")
            params.append(user_id)
        if needing_vectors:
            clauses.append(f"({self._NEEDS})")
            params += [self.embedding_model or ""] * 2
        with self._read() as conn:
            rows = conn.execute(f"SELECT rowid, {_MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(clauses)} "
                                "ORDER BY rowid LIMIT ?", [*params, limit]).fetchall()
        return [(row[0], records.memory_from_row(row[1:])) for row in rows]

    # ranges, not "!=", so the model index answers it without reading the whole table
    _NEEDS = "embedding_model IS NULL OR embedding_model < ? OR embedding_model > ?"

    def count_needing_vectors(self) -> int:
        with self._read() as conn:
            model = self.embedding_model or ""
            return int(conn.execute(f"SELECT COUNT(*) FROM memories WHERE {self._NEEDS}", (model, model)).fetchone()[0])

    # -- search -----------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> builtins.list[Candidate]:
        index = self._user_index(request.user_id)
        if index is None:
            return []
        found = user_index.search(index, request, analyse(request.text or ""))
        if not found:
            return []
        rows = self._rows_by_rowid(request.user_id, list(found), index)
        # a row deleted between the two reads is left out
        return [Candidate(rows[rowid], *fields) for rowid, fields in found.items() if rowid in rows]

    def _rows_by_rowid(self, user_id: str, rowids: builtins.list[int],
                       index: UserIndex | None = None) -> dict[int, Memory]:
        """Records by rowid, from the user's cache where they were read before (callers must not
        mutate them: the engine copies what it returns)."""
        result: dict[int, Memory] = {}
        if index is not None:
            known = index.records
            unread = []
            for rowid in rowids:
                memory = known.get(rowid)
                if memory is None:
                    unread.append(rowid)
                else:
                    result[rowid] = memory
            if not unread:
                return result
            rowids = unread
        with self._read() as conn:
            for start in range(0, len(rowids), 500):
                chunk = rowids[start:start + 500]
                marks = ",".join("?" * len(chunk))
                # "+user_id": look rows up by rowid, then check the owner (not a scan of the user's index)
                for row in conn.execute(f"SELECT rowid, {_MEMORY_COLUMNS} FROM memories WHERE rowid IN ({marks}) "
                                        "AND +user_id = ?", [*chunk, user_id]):
                    result[row[0]] = records.memory_from_row(row[1:])
        if index is not None:
            index.remember({r: result[r] for r in rowids if r in result})
        return result

    def _user_index(self, user_id: str) -> UserIndex | None:
        with self._read() as conn:
            head = conn.execute("SELECT rev, epoch FROM users WHERE user_id=?", (user_id,)).fetchone()
        if head is None:
            return None
        rev, epoch = head
        cached = self._cache.get(user_id)
        if cached is not None and cached.rev == rev:
            return cached
        fresh = None
        if cached is not None and cached.epoch == epoch:
            fresh = self._refresh(cached, user_id, rev)
        if fresh is None:
            fresh = self._load_full(user_id, rev, epoch)
        self._cache.put(user_id, fresh)
        return fresh

    # the row keeps its analysed terms, so the index is built without re-analysing text
    _INDEX_ROW = ("SELECT m.rowid, m.vector, m.type, m.status, m.created_ts, m.event_start_ts, m.event_end_ts, "
                  "m.agent_id, m.session_id, m.seq, m.embedding_model, m.terms FROM memories m ")

    def _load_full(self, user_id: str, rev: int, epoch: int) -> UserIndex:
        with self._read() as conn:
            rows = conn.execute(self._INDEX_ROW + "WHERE m.user_id=? ORDER BY m.rowid", (user_id,)).fetchall()
        return user_index.build(rows, self.embedding_model, rev, epoch)

    def _refresh(self, cached: UserIndex, user_id: str, rev: int) -> UserIndex | None:
        """Apply the rows written since the cache was built (no deletions happened in between): rows
        changed in place are replaced, new ones appended (None: the caller rebuilds the index)."""
        with self._read() as conn:
            changed = conn.execute(self._INDEX_ROW + "WHERE m.user_id=? AND m.seq > ? ORDER BY m.rowid",
                                   (user_id, cached.max_seq)).fetchall()
        return user_index.refreshed(cached, changed, self.embedding_model, rev)

    # -- the durable message log ------------------------------------------------------------------
    def _log(self, rows: Sequence[tuple[Any, ...]], memories: Sequence[Memory], vectors: VectorRows | None,
             ledger: LedgerChanges | None = None) -> None:
        with self._write() as conn:
            for row in rows:
                conn.execute(_INSERT_MESSAGE, row)
            conn.executemany(tool_counters.SQLITE_UPSERT, [i.row() for i in tool_counters.increments(rows)])
            self._put_in(conn, memories, vectors)
            if ledger is not None:
                sqlite_ledger.apply(conn, ledger)

    def tool_counters(self, agent_id: str, *, tool: str | None = None, user_id: str | None = None,
                      team: str | None = None) -> builtins.list[tool_counters.Counter]:
        where, values = tool_counters.read_clauses(agent_id, tool, user_id, "?", team)
        with self._read() as conn:
            rows = conn.execute(f"SELECT tool, kind, key, sum(n), min(first_us), max(last_us) FROM tool_counters "
                                f"WHERE {where} GROUP BY tool, kind, key", values).fetchall()
        return tool_counters.summed(rows)

    def _read_messages(self, user_id: str, *, agent_id: str | None = None, state: str | None = None,
                       before_seq: int | None = None, limit: int,
                       newest_first: bool) -> builtins.list[StoredMessage]:
        clauses: builtins.list[str] = ["user_id=?"]
        params: builtins.list[str | int] = [user_id]
        for clause, value in (("agent_id=?", agent_id), ("state=?", state), ("seq < ?", before_seq)):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        with self._read() as conn:
            order = "DESC" if newest_first else "ASC"
            rows = conn.execute(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE {' AND '.join(clauses)} "
                                f"ORDER BY seq {order} LIMIT ?", [*params, limit]).fetchall()
        return [records.message_from_row(r) for r in rows]

    def logged_message_ids(self, user_id: str, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with self._read() as conn:
            for start in range(0, len(ids), 500):
                chunk = list(ids[start:start + 500])
                marks = ",".join("?" * len(chunk))
                found.update(r[0] for r in conn.execute(
                    f"SELECT id FROM messages WHERE id IN ({marks}) AND user_id = ?", [*chunk, user_id]))
        return found

    def _set_message_state(self, ids: Sequence[str], state: str) -> None:
        with self._write() as conn:
            # a forgotten message (its turn deleted) stays done: counting a step's attempt never revives it
            conn.executemany("UPDATE messages SET state=?, attempts=attempts + (? = ?) WHERE id=? "
                             "AND NOT (content = '' AND metadata = ?)",
                             ((state, state, FAILED, i, FORGOTTEN_METADATA) for i in ids))

    def _message_page(self, user_id: str, *, after_seq: int, limit: int) -> builtins.list[StoredMessage]:
        with self._read() as conn:
            rows = conn.execute(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE user_id=? AND seq > ? "
                                "ORDER BY seq LIMIT ?", (user_id, after_seq, limit)).fetchall()
        return [records.message_from_row(r) for r in rows]

    def vectors_of(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        index = self._user_index(user_id) if self._cache.get(user_id) is not None else None
        if index is not None and index.matrix.shape[1]:
            # the records a search just returned are in the user's (current) index: their vectors are
            # read there (the matrix holds the stored float16 values, as the query below reads them)
            out, ids = index.vectors_of(ids)
            if not ids:
                return out
        with self._read() as conn:
            for start in range(0, len(ids), 500):  # below SQLite's bound on parameters
                chunk = list(ids[start:start + 500])
                marks = ",".join("?" * len(chunk))
                for memory_id, blob in conn.execute(
                        f"SELECT id, vector FROM memories WHERE user_id=? AND id IN ({marks}) AND vector IS NOT NULL",
                        [user_id, *chunk]):
                    out[memory_id] = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
        return out

    def users_with_pending(self) -> builtins.list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT user_id FROM messages WHERE state=?", (PENDING,))]

    def overview(self) -> StoreOverview:
        """Counts of messages per state, users and memories per type (`storage.overview`)."""
        with self._read() as conn:
            return sql_overview(lambda query: conn.execute(query).fetchall(),
                                lambda template: template.format(memories="memories", messages="messages"))

    # -- leases -----------------------------------------------------------------------------
    def acquire_lease(self, user_id: str, owner: str, ttl_s: float) -> bool:
        now = time.time()
        with self._write() as conn:
            row = conn.execute("SELECT owner, expires_ts FROM leases WHERE user_id=?", (user_id,)).fetchone()
            if row is not None and row[0] != owner and row[1] > now:
                return False
            conn.execute("INSERT INTO leases(user_id, owner, expires_ts) VALUES(?,?,?) ON CONFLICT(user_id) "
                         "DO UPDATE SET owner=excluded.owner, expires_ts=excluded.expires_ts",
                         (user_id, owner, now + ttl_s))
        return True

    def renew_lease(self, user_id: str, owner: str, ttl_s: float) -> bool:
        now = time.time()
        with self._write() as conn:
            return conn.execute("UPDATE leases SET expires_ts=? WHERE user_id=? AND owner=? AND expires_ts > ?",
                                (now + ttl_s, user_id, owner, now)).rowcount == 1

    def release_lease(self, user_id: str, owner: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM leases WHERE user_id=? AND owner=?", (user_id, owner))
