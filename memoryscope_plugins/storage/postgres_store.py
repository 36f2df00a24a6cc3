"""The PostgreSQL store: psycopg 3 with a thread-safe connection pool, pgvector and full-text search.

Layout (every table name starts with the configured prefix, default ``memoryscope_``):

- ``meta``: key/value facts: ``schema_version`` and ``vector_dim:<model>`` for every embedding
  model whose vectors were ever stored (its dimension, fixed at first use).
- ``memories``: one row per memory, with indexed filter columns (user, agent, type, status, session,
  message time, event range), the exact ISO text of every time (so offsets round-trip), the
  engine's analysed terms of speaker + content + context as a ``tsvector`` (``terms``, GIN index;
  built by `text_analysis.analyse`, as the embedded store keeps them) with their number (``dl``),
  and an ``embedding vector`` column with the name of the model that made it. Each embedding model
  gets its own partial HNSW cosine index over ``embedding::vector(dim) WHERE embedding_model =
  '<model>' AND ann``, so a new embedder (even one of another dimension) needs no new table, and
  vectors of another model are never compared: every vector query names the store's model. ``ann``
  is set on the rows of users with more than ``exact_vector_rows`` memories: a smaller user is
  always searched exactly, so writing their memories never pays for an HNSW insert.
- ``messages``: the durable message log (the consolidation queue).
- ``leases``: one row per user being consolidated; taken with an atomic upsert that only succeeds
  when the row is free, expired or already ours (the database clock decides expiry), so one
  user's consolidation runs in one process at a time across processes and hosts.

With ``partitions`` (chosen when the tables are created, recorded in ``meta``) every per-user table
is hash-partitioned by user, each statement of one user names that user so it reads one partition,
and the ids' owners are kept in ``owners``: see `postgres_partitions`.

Search reads the user's statistics and runs both channels in one SQL statement (CTEs; planned as
for a user with no common query term, and run again with the statistics when they call for another
plan): full text ranked by BM25 as the embedded store ranks it, bounded per query term, and vectors
by cosine distance, each with the same filters and its own top-N, returned with per-channel ranks
and scores (the engine fuses them). The vector channel is exact when the filtered set is small (at
most ``exact_vector_rows``) or the user has no indexed rows, and otherwise walks the HNSW index
with ``hnsw.iterative_scan = relaxed_order`` (so a filtered kNN still returns k rows) together with
an exact scan of the user's rows not yet indexed.

Schema changes are versioned: ``_MIGRATIONS`` is a list of SQL steps per version, applied under
an advisory lock inside one transaction at start; a database written by a newer version raises
`SchemaVersionError`.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import logging
import re
import struct
import threading
from collections import Counter
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Literal, Sequence, TypeVar

import numpy as np

try:
    import psycopg
    from psycopg import sql
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - the engine turns this into a ConfigError
    raise ImportError("the postgres backend needs: pip install 'memoryscope-plugins[postgres]'") from exc

from .. import metrics
from ..errors import ConfigError, MessagesGoneError, SchemaVersionError, StoreError, StoreLockedError
from ..indexing import full_text
from ..log_hygiene import without_password
from ..types import Entity, EntityMention, Memory, ProfileValue
from . import (
    base,
    postgres_ledger,
    postgres_partitions as parts,
    postgres_replicas as replicas,
    postgres_search as pgs,
    read_consistency,
    records,
    tool_counters,
    user_index,
)
from .base import Candidate, LedgerChanges, MemoryFilter, SearchRequest, StoredMessage, VectorRows
from .core import StoreBase, in_order
from .leases import Lease, require_held
from .messages import DONE, FAILED, FORGOTTEN_METADATA, PENDING
from .overview import StoreOverview, sql_overview
from .text_analysis import analyse
from .timecodes import aware

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6

# Each entry: (version it brings the schema to, SQL steps). `{p}` is the table prefix, `{cfg}` the
# text search configuration of version 1's column (a quoted literal). Steps run in order in one
# transaction; a step from 2 on may be followed by a Python step in `_upgrade`.
_MIGRATIONS: list[tuple[int, list[str]]] = [
    (1, [
        """CREATE TABLE IF NOT EXISTS {p}memories (
            rowid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            user_id text NOT NULL,
            agent_id text NOT NULL,
            type text NOT NULL,
            status text NOT NULL,
            content text NOT NULL,
            context text,
            speaker text,
            role text,
            session_id text,
            previous_id text,
            search_text text NOT NULL DEFAULT '',
            created_at text NOT NULL,
            created_ts timestamptz NOT NULL,
            updated_at text NOT NULL,
            event_start text,
            event_start_ts timestamptz,
            event_end text,
            event_end_ts timestamptz,
            superseded_by text,
            source_ids text NOT NULL DEFAULT '[]',
            metadata text NOT NULL DEFAULT '{{}}',
            embedding_model text,
            embedding vector,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector({cfg}::regconfig, search_text)) STORED
        )""",
        "CREATE INDEX IF NOT EXISTS {p}mem_user_time ON {p}memories (user_id, created_ts, rowid)",
        "CREATE INDEX IF NOT EXISTS {p}mem_user_event ON {p}memories (user_id, event_start_ts, event_end_ts) "
        "WHERE event_start_ts IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS {p}mem_user_agent ON {p}memories (user_id, agent_id)",
        "CREATE INDEX IF NOT EXISTS {p}mem_user_session ON {p}memories (user_id, session_id) "
        "WHERE session_id IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS {p}mem_user_type_status ON {p}memories (user_id, type, status)",
        "CREATE INDEX IF NOT EXISTS {p}mem_model ON {p}memories (embedding_model)",
        "CREATE INDEX IF NOT EXISTS {p}mem_tsv ON {p}memories USING gin (tsv)",
        """CREATE TABLE IF NOT EXISTS {p}messages (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            user_id text NOT NULL,
            agent_id text NOT NULL,
            session_id text,
            role text NOT NULL,
            name text,
            content text NOT NULL,
            timestamp text NOT NULL,
            metadata text NOT NULL DEFAULT '{{}}',
            state text NOT NULL DEFAULT 'pending',
            attempts integer NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX IF NOT EXISTS {p}msg_user_state ON {p}messages (user_id, state, seq)",
        "CREATE INDEX IF NOT EXISTS {p}msg_pending ON {p}messages (user_id) WHERE state = 'pending'",
        """CREATE TABLE IF NOT EXISTS {p}leases (
            user_id text PRIMARY KEY,
            owner text NOT NULL,
            expires_at timestamptz NOT NULL
        )""",
    ]),
    (2, postgres_ledger.MIGRATION),  # the entity ledger and the profile
    # 3: full text by the engine's analyser (the embedded store's terms and BM25 inputs) instead of
    # PostgreSQL's parser; HNSW only over the rows of users large enough to need it (`ann`)
    (3, [
        "ALTER TABLE {p}memories ADD COLUMN IF NOT EXISTS terms tsvector NOT NULL DEFAULT ''",
        "ALTER TABLE {p}memories ADD COLUMN IF NOT EXISTS dl integer NOT NULL DEFAULT 0",
        "ALTER TABLE {p}memories ADD COLUMN IF NOT EXISTS ann boolean NOT NULL DEFAULT false",
        "DROP INDEX IF EXISTS {p}mem_tsv",
        "ALTER TABLE {p}memories DROP COLUMN IF EXISTS tsv",
        "CREATE INDEX IF NOT EXISTS {p}mem_terms ON {p}memories USING gin (terms)",
        "CREATE INDEX IF NOT EXISTS {p}mem_user_dl ON {p}memories (user_id, dl)",
        "CREATE INDEX IF NOT EXISTS {p}mem_user_ann ON {p}memories (user_id, ann)",
        "DELETE FROM {p}meta WHERE key = 'text_search_config'",
        # vectors inline in the row (pgvector's default storage moves them out to the TOAST table
        # once a row passes 2 kB: one more lookup per row compared, 8x slower exact scans)
        "ALTER TABLE {p}memories ALTER COLUMN embedding SET STORAGE MAIN",
        "ALTER TABLE {p}memories SET (toast_tuple_target = 8160)",
        *pgs.STATS_DDL,
    ]),
    # 4: a write order for the in-process index of small users (`user_index`): every inserted or
    # updated row takes the next ``seq`` under the statistics lock, held to commit, so a higher seq
    # is always committed after a lower one and "rows with seq above N" are exactly the new ones
    (4, [
        "ALTER TABLE {p}memories ADD COLUMN IF NOT EXISTS seq bigint",
        "CREATE SEQUENCE IF NOT EXISTS {p}memories_seq",
        "CREATE INDEX IF NOT EXISTS {p}mem_user_seq ON {p}memories (user_id, seq)",
        "CREATE OR REPLACE FUNCTION {p}write_seq() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "PERFORM pg_advisory_xact_lock(hashtext('{p}stats')); "
        "NEW.seq := nextval('{p}memories_seq'); RETURN NEW; END $$",
        "DROP TRIGGER IF EXISTS {p}write_seq ON {p}memories",
        "CREATE TRIGGER {p}write_seq BEFORE INSERT OR UPDATE ON {p}memories "
        "FOR EACH ROW EXECUTE FUNCTION {p}write_seq()",
    ]),
    (5, tool_counters.POSTGRES_DDL),  # the tool statistics' counters
    (6, tool_counters.POSTGRES_TEAM_INDEX),  # a team's tool counters read by a range of user ids
]

_MEMORY_COLUMNS = ", ".join(records.MEMORY_COLUMNS)
_M_COLUMNS = ", ".join("m." + c for c in records.MEMORY_COLUMNS)
_MESSAGE_COLUMNS = ", ".join(records.MESSAGE_COLUMNS)
# a memory row as `_put_in` writes it: the shared columns, then the comparable times and search text;
# the vector and its model follow, replaced on conflict only when the batch sets or clears them
_PUT_COLUMNS = ("rowid", *records.MEMORY_VALUE_COLUMNS, "created_ts", "event_start_ts", "event_end_ts", "search_text",
                "terms", "dl")
_PUT_MEMORY = (
    f"INSERT INTO {{memories}} AS m ({', '.join(_PUT_COLUMNS)}, ann, embedding_model, embedding) "
    f"OVERRIDING SYSTEM VALUE VALUES ({', '.join(['%s'] * (len(_PUT_COLUMNS) - 2))}, %s::tsvector, %s, %s, %s, %s) "
    "ON CONFLICT ({key}) DO UPDATE SET "
    + "".join(f"{c}=excluded.{c}, " for c in _PUT_COLUMNS if c not in ("rowid", "id", "user_id"))
    + "ann = m.ann OR excluded.ann, "
    "embedding_model=CASE WHEN %s THEN excluded.embedding_model ELSE m.embedding_model END, "
    "embedding=CASE WHEN %s THEN excluded.embedding ELSE m.embedding END "
    "WHERE m.user_id = excluded.user_id RETURNING m.id")
_INSERT_MESSAGE = (f"INSERT INTO {{messages}}({', '.join(records.MESSAGE_WRITE_COLUMNS)}) "
                   f"VALUES ({', '.join(['%s'] * len(records.MESSAGE_WRITE_COLUMNS))})")

_PREFIX_OK = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
_T = TypeVar("_T")


def _users_of(memories: Sequence[Memory], ledger: LedgerChanges | None) -> builtins.list[str]:
    """The users whose records a write of `memories` and `ledger` changes."""
    users = {m.user_id for m in memories}
    if ledger is not None:
        users.add(ledger.user_id)
    return sorted(users)


def _scalar(cursor: psycopg.Cursor[Any]) -> Any:
    """The first value of a query that always returns a row (a count, to_regclass, a type's oid)."""
    row = cursor.fetchone()
    if row is None:
        raise StoreError("PostgreSQL returned no row for a query that always returns one")
    return row[0]


class _PgVector:
    """A float32 vector sent to PostgreSQL in pgvector's binary format (no text round-trip)."""

    __slots__ = ("values",)

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    @classmethod
    def stored(cls, values: np.ndarray) -> "_PgVector":
        """A memory's vector as it is kept: rounded to half precision, as the embedded store keeps it,
        so both stores compare the same numbers (a query vector is sent as it is)."""
        return cls(np.asarray(values, dtype=np.float16).astype(np.float32))


def _vector_dumper(oid: int) -> type[Dumper]:
    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: _PgVector) -> bytes:
            values = obj.values
            return struct.pack(">HH", values.shape[0], 0) + values.astype(">f4", copy=False).tobytes()

    VectorDumper.oid = oid
    return VectorDumper


class _VectorLoader(Loader):
    """pgvector's binary format (dimension, unused, big-endian float32s) as a float32 array."""

    format = Format.BINARY

    def load(self, data: Any) -> np.ndarray:
        return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)


class PostgresStore(StoreBase):
    """A `MemoryStore` on PostgreSQL with the pgvector extension.

    Args:
        conninfo: a libpq connection string or URL (``postgresql://user@host:5432/db``).
        embedding_model: the name of the embedder whose vectors this store compares.
        table_prefix: prefix of every table and index (letters, digits, underscore), so several
            stores can share a database.
        pool_min_size / pool_max_size: connection pool bounds.
        lock_timeout_s: how long a statement waits for a row or table lock before
            `StoreLockedError`.
        exact_vector_rows: when the filtered rows of a vector query are at most this many, the
            vector channel is computed exactly; above, through the HNSW index. Only the rows of
            users with more memories than this are put in the index.
        text_term_rows: the full-text bound: a query term is counted in up to this many of the
            user's rows; a term in more is common (see `postgres_search`). Users with at most
            this many memories are ranked exactly as the embedded store ranks them.
        record_cache_rows: memories kept parsed in this process for searches (by row version, so a
            change made by any process is seen); 0 turns the cache off.
        user_index_rows: users with at most this many memories are searched in this process, as the
            embedded store searches (`user_index`: their vectors and terms read once, then only the
            rows written since; one statement per search checks what changed, in any process);
            larger users, or 0, are searched by the database.
        vector_cache_rows: at most this many memories are held in those in-process indexes (least
            recently used users dropped first).
        hnsw_m / hnsw_ef_construction / hnsw_ef_search: HNSW index parameters.
        partitions: the layout of the tables (`postgres_partitions`): N > 0 splits every per-user
            table into N partitions by a hash of the user id, 0 keeps one table each; applied when
            the tables are created. None (the default) follows the layout the tables have (a new
            store: unpartitioned); a number that differs from it raises `ConfigError` (`migrate`
            copies a store into the other layout).
        connect_kwargs: extra keyword arguments for `psycopg.connect` (user, password, sslmode ...).
        read_urls: connection strings of hot standbys of `conninfo` (same database, same
            `connect_kwargs`): the reads made inside `read_consistency.reads_from("replica")` go to
            them (`postgres_replicas`: round robin, health-checked, read your writes).
        max_replica_lag_s: a standby further behind than this is skipped.
        replica_check_interval_s: how often each standby's health and lag are checked.
    """

    text_statistics: Literal["user", "index"] = "user"  # see MemoryStore

    def __init__(self, conninfo: str, *, embedding_model: str | None = None, table_prefix: str = "memoryscope_",
                 pool_min_size: int = 1, pool_max_size: int = 8,
                 lock_timeout_s: float = 10.0, connect_timeout_s: float = 10.0, exact_vector_rows: int = 5_000,
                 text_term_rows: int = 1_000, record_cache_rows: int = 20_000, user_index_rows: int = 200_000,
                 vector_cache_rows: int = 250_000, hnsw_m: int = 16,
                 hnsw_ef_construction: int = 64, hnsw_ef_search: int = 100, partitions: int | None = None,
                 connect_kwargs: dict[str, Any] | None = None, read_urls: Sequence[str] = (),
                 max_replica_lag_s: float = 5.0, replica_check_interval_s: float = 1.0) -> None:
        prefix = table_prefix.lower()
        if prefix and not prefix.endswith("_"):
            prefix += "_"
        if not _PREFIX_OK.match(prefix):
            raise ValueError(f"table prefix {table_prefix!r} must be letters, digits and underscores")
        self._asked_partitions = None if partitions is None else parts.check_partitions(partitions)
        self.partitions = 0  # the layout found or made by `_init_schema`
        self.embedding_model = embedding_model
        self.prefix = prefix
        self.exact_vector_rows = int(exact_vector_rows)
        self.text_term_rows = max(1, int(text_term_rows))
        self._cache = pgs.RecordCache(record_cache_rows)
        self.user_index_rows = max(0, int(user_index_rows))
        self._indexes = user_index.IndexCache(vector_cache_rows)
        self._lock_timeout_ms = max(1, int(lock_timeout_s * 1000))
        self._hnsw = (int(hnsw_m), int(hnsw_ef_construction), int(hnsw_ef_search))
        self._dims: dict[str, int] = {}
        self._dims_lock = threading.Lock()
        self._vector_oid: int | None = None
        self._defer_vector_index = False
        self._closed = False
        self._conninfo = conninfo
        self._replicas: replicas.ReplicaRouter | None = None
        self._on_standby = threading.local()  # .value: this thread's read runs on a standby
        self._ledger = postgres_ledger.PostgresLedger(prefix)
        kwargs = dict(connect_kwargs or {})
        kwargs.setdefault("connect_timeout", max(1, int(connect_timeout_s)))
        kwargs["autocommit"] = False
        try:
            self._ensure_extension(conninfo, kwargs)
            self._pool = ConnectionPool(conninfo, min_size=pool_min_size, max_size=pool_max_size, kwargs=kwargs,
                                        configure=self._configure, open=False, timeout=connect_timeout_s,
                                        name=f"memoryscope-{prefix}")
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout as exc:
            raise StoreError(f"cannot connect to PostgreSQL ({without_password(conninfo)}): {exc}") from exc
        except psycopg.Error as exc:
            raise self._translate(exc) from exc
        try:
            self._init_schema()
            if read_urls:
                self._replicas = replicas.ReplicaRouter(
                    read_urls, connect_kwargs=kwargs, configure=self._configure, max_lag_s=max_replica_lag_s,
                    pool_max_size=pool_max_size, connect_timeout_s=connect_timeout_s,
                    check_interval_s=replica_check_interval_s, name=f"memoryscope-{prefix}")
                with self._pool.connection() as conn:  # no read before a standby has the schema seen here
                    self._note_write(conn, None)
        except BaseException:
            self._pool.close()
            raise

    @classmethod
    def from_settings(cls, cfg: Any, *, embedding_model: str | None = None) -> "PostgresStore":
        """Build from `StoreSettings`: ``url`` is the DSN; ``username``/``password`` override it;
        ``index_prefix`` names the tables; ``ca_certs`` turns on verified TLS; ``partitions`` the layout;
        ``read_urls`` and
        ``max_replica_lag_s``: the read standbys (the same user, password and TLS settings apply to
        them). (``text_search_config`` is no longer read: full text uses the engine's analyser since
        schema version 2.)"""
        if not cfg.url:
            raise StoreError("store.url must be a PostgreSQL connection string for the postgres backend")
        kwargs: dict[str, Any] = {}
        if cfg.username:
            kwargs["user"] = cfg.username
        if cfg.password is not None:
            kwargs["password"] = cfg.password.get_secret_value()
        if cfg.ca_certs:
            kwargs["sslrootcert"] = cfg.ca_certs
            kwargs["sslmode"] = "verify-full" if cfg.verify_certs else "require"
        prefix = re.sub(r"[^a-z0-9_]", "_", (cfg.index_prefix or "memoryscope").lower())
        return cls(cfg.url, embedding_model=embedding_model, table_prefix=prefix,
                   lock_timeout_s=getattr(cfg, "busy_timeout_s", 10.0), partitions=getattr(cfg, "partitions", None),
                   vector_cache_rows=getattr(cfg, "vector_cache_rows", 250_000), connect_kwargs=kwargs,
                   read_urls=list(getattr(cfg, "read_urls", None) or ()),
                   max_replica_lag_s=getattr(cfg, "max_replica_lag_s", 5.0))

    # -- connections ---------------------------------------------------------------------------
    @staticmethod
    def _ensure_extension(conninfo: str, kwargs: dict[str, Any]) -> None:
        with psycopg.connect(conninfo, **{**kwargs, "autocommit": True}) as conn:
            if conn.execute("SELECT 1 FROM pg_extension WHERE extname='vector'").fetchone() is None:
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except psycopg.errors.UniqueViolation:  # created by a concurrent process
                    pass
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise StoreError("the pgvector extension is not installed in this database and this "
                                     "user may not create it: run CREATE EXTENSION vector as an admin") from exc

    def _configure(self, conn: psycopg.Connection) -> None:
        if self._vector_oid is None:
            self._vector_oid = int(_scalar(conn.execute("SELECT 'vector'::regtype::oid")))
        conn.adapters.register_dumper(_PgVector, _vector_dumper(self._vector_oid))
        conn.adapters.register_loader(self._vector_oid, _VectorLoader)  # binary results only
        conn.execute(f"SET lock_timeout = {self._lock_timeout_ms}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute(f"SET hnsw.ef_search = {self._hnsw[2]}")
        conn.execute("SET hnsw.max_scan_tuples = 50000")
        # searches are short and many: no parallel workers (their start-up alone costs more than
        # a per-user scan, and the plan's unused branch would start them too)
        conn.execute("SET max_parallel_workers_per_gather = 0")
        # plan every search with its actual values (user, query terms): a generic plan cannot
        # tell a one-user scan from a scan of a term's whole posting list
        conn.execute("SET plan_cache_mode = force_custom_plan")
        conn.commit()

    def _translate(self, exc: BaseException) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        if isinstance(exc, (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected,
                            psycopg.errors.SerializationFailure)):
            return StoreLockedError(f"PostgreSQL store {self.prefix}*: {exc}".strip())
        if isinstance(exc, PoolTimeout):
            return StoreError(f"no PostgreSQL connection available ({without_password(self._conninfo)}): {exc}")
        if isinstance(exc, psycopg.OperationalError):
            return StoreError(f"PostgreSQL unreachable or failing ({without_password(self._conninfo)}): {exc}")
        if isinstance(exc, psycopg.DataError) and "NUL" in str(exc):
            return StoreError("PostgreSQL text cannot hold NUL (\\x00) characters")
        # the primary message only: DETAIL and CONTEXT lines can quote the values (memory text)
        diag = getattr(exc, "diag", None)
        primary = getattr(diag, "message_primary", None) or type(exc).__name__
        return StoreError(f"PostgreSQL store error: {primary}")

    @contextmanager
    def _tx(self, users: Sequence[str] = (), *, any_user: bool = False) -> Iterator[psycopg.Connection]:
        """One transaction on a pooled connection: committed on success, rolled back on error. With
        read standbys, a transaction that writes the records of `users` (or of users not known:
        `any_user`) tells the router where the WAL stood after its commit (read your writes)."""
        if self._closed:
            raise StoreError("the store is closed")
        try:
            with self._pool.connection() as conn:
                with conn.transaction():
                    yield conn
                if self._replicas is not None and (users or any_user):
                    self._note_write(conn, None if any_user else users)
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._translate(exc) from exc

    def _note_write(self, conn: psycopg.Connection, users: Sequence[str] | None) -> None:
        """Tell the router where the primary's WAL ends after a committed write of `users` (None:
        not known). Never fails the write, which is committed: when the position cannot be read
        (the primary went away meanwhile), a read of those users right after may miss the write on
        a standby (a warning in the log, without user ids)."""
        assert self._replicas is not None
        try:
            conn.autocommit = True  # no transaction around one function call
            try:
                position = int(_scalar(conn.execute(replicas.INSERT_POSITION)))
            finally:
                conn.autocommit = False
        except (psycopg.Error, StoreError) as exc:
            log.warning("could not read the WAL position after a committed write (%s): a read right after it "
                        "may not see it on a standby", type(exc).__name__)
            return
        self._replicas.wrote(users, position)

    def _routed(self, user_id: str | None, read: Callable[[psycopg.Connection], _T]) -> _T:
        """`read` on a standby inside a `read_consistency.reads_from("replica")` block, when one is
        healthy and has replayed this process's last write of `user_id`; otherwise, or when the
        standby fails meanwhile (unreachable, or the read cancelled by a recovery conflict), on the
        primary (`postgres_replicas`)."""
        router = self._replicas
        if router is None or read_consistency.current() != "replica" or self._closed:
            with self._reading() as conn:
                return read(conn)
        standby = router.pick()
        why = "no_standby"
        if standby is not None:
            try:
                with router.connection(standby) as conn:
                    if router.caught_up(standby, conn, user_id):
                        self._on_standby.value = True
                        try:
                            found = read(conn)
                        finally:
                            self._on_standby.value = False
                        metrics.recorder().routed_read("standby", "")
                        return found
                why = "not_replayed"
            except replicas.BehindIndex:
                why = "behind_index"
            except (psycopg.OperationalError, PoolTimeout) as exc:
                router.failed(standby, exc)
                why = "standby_failed"
            except psycopg.errors.SerializationFailure:  # cancelled by replay: the primary answers
                why = "recovery_conflict"
            except psycopg.Error as exc:  # e.g. a table not there yet: the primary answers, or says what is wrong
                log.warning("a read on read standby %d failed (%s); the primary answers it", standby.number,
                            type(exc).__name__)
                why = "standby_error"
        metrics.recorder().routed_read("primary", why)
        with self._reading() as conn:
            return read(conn)

    @contextmanager
    def _reading(self) -> Iterator[psycopg.Connection]:
        """A pooled connection for reads outside a transaction: each statement is its own (as in a
        READ COMMITTED transaction, where every statement takes its own snapshot anyway), without
        the BEGIN and COMMIT round trips."""
        if self._closed:
            raise StoreError("the store is closed")
        try:
            with self._pool.connection() as conn:
                conn.autocommit = True
                try:
                    yield conn
                finally:
                    conn.autocommit = False
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._translate(exc) from exc

    def _t(self, name: str) -> sql.Identifier:
        return sql.Identifier(self.prefix + name)

    def _q(self, template: str, **extra: Any) -> sql.Composed:
        """SQL with {memories}, {messages}, {leases}, {meta} table names filled in."""
        return sql.SQL(template).format(memories=self._t("memories"), messages=self._t("messages"),
                                        leases=self._t("leases"), meta=self._t("meta"), **extra)

    def _init_schema(self) -> None:
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix + "schema",))
            conn.execute(self._q("CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)"))
            row = conn.execute(self._q("SELECT value FROM {meta} WHERE key='schema_version'")).fetchone()
            version = 0 if row is None else int(row[0])
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"the PostgreSQL tables {self.prefix}* have schema version {version}; this library knows "
                    f"up to {SCHEMA_VERSION}. Upgrade memoryscope-plugins.")
            if version == 0:
                exists = _scalar(conn.execute("SELECT to_regclass(%s)", (self.prefix + "memories",)))
                if exists is not None:
                    raise SchemaVersionError(f"a table {self.prefix}memories exists but has no schema version; "
                                             "use another table prefix")
            if self._layout(conn, version):
                version = parts.DDL_VERSION  # the later versions' steps follow, as on any store
            self._ledger.partitioned = self.partitions > 0
            # version 1's generated column, dropped by version 2, needs a configuration that always exists
            cfg_literal = sql.Literal("simple").as_string(conn)
            upgraded_from = version
            for target, steps in _MIGRATIONS:
                if target <= version:
                    continue
                for step in steps:
                    conn.execute(step.format(p=self.prefix, cfg=cfg_literal))
                conn.execute(self._q("INSERT INTO {meta}(key, value) VALUES('schema_version', %s) "
                                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value"), (str(target),))
                version = target
            if 1 <= upgraded_from < 2:
                self._upgrade_to_2(conn)
            for model, dim in self._spaces(conn):
                self._dims[model] = dim
                # missing only when a bulk load was interrupted before it rebuilt the index (looked up
                # first: CREATE INDEX IF NOT EXISTS would lock the table against writers even so)
                if _scalar(conn.execute("SELECT to_regclass(%s)", (self._index_name(model, dim),))) is None:
                    self._create_vector_index(conn, model, dim)

    def _layout(self, conn: psycopg.Connection, version: int) -> bool:
        """Set `partitions` from the stored layout, or for a new store (`version` 0) from the one
        asked for, creating the partitioned tables at `parts.DDL_VERSION` (True when it did)."""
        if version == 0:
            self.partitions = self._asked_partitions or 0
            if not self.partitions:
                return False
            for step in parts.ddl(self.partitions):
                conn.execute(step.format(p=self.prefix))
            conn.execute(self._q("INSERT INTO {meta}(key, value) VALUES('schema_version', %s), (%s, %s)"),
                         (str(parts.DDL_VERSION), parts.LAYOUT_KEY, str(self.partitions)))
            return True
        row = conn.execute(self._q("SELECT value FROM {meta} WHERE key = %s"), (parts.LAYOUT_KEY,)).fetchone()
        self.partitions = 0 if row is None else int(row[0])
        asked = self._asked_partitions
        if asked is not None and asked != self.partitions:
            def shape(n: int) -> str:
                return f"{n} partitions" if n else "no partitions"
            raise ConfigError(f"the PostgreSQL tables {self.prefix}* have {shape(self.partitions)}, but "
                              f"store.partitions asks for {shape(asked)}: a store keeps the layout it was "
                              "created with; leave store.partitions unset to follow it, or copy the store "
                              "into a new table prefix with `memoryscope-plugins migrate --partitions N`")
        return False

    def _upgrade_to_2(self, conn: psycopg.Connection) -> None:
        """Version 1 -> 2 in Python: every row's analysed terms, the `ann` mark of large users' rows,
        and the HNSW indexes rebuilt over those rows only."""
        log.info("upgrading %smemories to schema 2: analysing the stored text of every memory", self.prefix)
        spaces = self._spaces(conn)
        for model, dim in spaces:  # first: every rewritten row would otherwise be inserted into the old graph
            digest = hashlib.blake2b(model.encode(), digest_size=6).hexdigest()
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {name}").format(
                name=sql.Identifier(f"{self.prefix}mem_vec_{digest}_{dim}")))
        large = [r[0] for r in conn.execute(self._q(
            "SELECT user_id FROM {memories} GROUP BY user_id HAVING count(*) > %s"), (self.exact_vector_rows,))]
        after = 0
        while True:  # one rewrite of every row: its terms, length and mark
            rows = conn.execute(self._q("SELECT rowid, search_text FROM {memories} WHERE rowid > %s "
                                        "ORDER BY rowid LIMIT 5000"), (after,)).fetchall()
            if not rows:
                break
            analysed = [analyse(text) for _, text in rows]
            conn.execute(self._q(
                "UPDATE {memories} m SET terms = u.terms::tsvector, dl = u.dl, ann = m.user_id = ANY(%s) "
                "FROM unnest(%s::bigint[], %s::text[], %s::int[]) AS u(rowid, terms, dl) WHERE m.rowid = u.rowid"),
                (large, [r[0] for r in rows], [pgs.tsvector_text(t) for t in analysed], [len(t) for t in analysed]))
            after = rows[-1][0]
        for model, dim in spaces:
            self._create_vector_index(conn, model, dim)

    def standby_states(self) -> builtins.list[tuple[str, str, float | None]]:
        """Each read standby's (DSN without password, state, last measured lag in seconds); the state
        is ``ok`` (read from), ``down``, ``lagging``, ``not_standby`` or ``unknown``."""
        return [] if self._replicas is None else self._replicas.states()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._replicas is not None:
                self._replicas.close()
            self._pool.close()

    # -- meta -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._reading() as conn:
            row = conn.execute(self._q("SELECT value FROM {meta} WHERE key=%s"), (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self._tx() as conn:
            conn.execute(self._q("INSERT INTO {meta}(key, value) VALUES(%s, %s) ON CONFLICT (key) "
                                 "DO UPDATE SET value = excluded.value"), (key, value))

    # -- vector spaces ------------------------------------------------------------------------
    def _index_name(self, model: str, dim: int) -> str:
        return f"{self.prefix}mem_ann_{hashlib.blake2b(model.encode(), digest_size=6).hexdigest()}_{dim}"

    def _dim_of(self, conn: psycopg.Connection | None, model: str) -> int | None:
        with self._dims_lock:
            if model in self._dims:
                return self._dims[model]
        if conn is None:
            with self._tx() as c:
                row = c.execute(self._q("SELECT value FROM {meta} WHERE key=%s"), ("vector_dim:" + model,)).fetchone()
        else:
            row = conn.execute(self._q("SELECT value FROM {meta} WHERE key=%s"), ("vector_dim:" + model,)).fetchone()
        if row is None:
            return None
        with self._dims_lock:
            self._dims[model] = int(row[0])
        return int(row[0])

    def _ensure_space(self, conn: psycopg.Connection, model: str, dim: int) -> None:
        """Record the model's dimension (fixed at first use) and create its HNSW index."""
        known = self._dim_of(conn, model)
        if known is None:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix + "space:" + model,))
            row = conn.execute(self._q("SELECT value FROM {meta} WHERE key=%s"), ("vector_dim:" + model,)).fetchone()
            if row is None:
                if not self._defer_vector_index:
                    self._create_vector_index(conn, model, dim)
                conn.execute(self._q("INSERT INTO {meta}(key, value) VALUES(%s, %s)"),
                             ("vector_dim:" + model, str(dim)))
                known = dim
            else:
                known = int(row[0])
            # cached only after commit would be stricter; a rolled-back first write just re-checks
        if known != dim:
            raise ValueError(f"vectors of {model!r} have {known} dimensions in this store, not {dim}")

    def _create_vector_index(self, conn: psycopg.Connection, model: str, dim: int) -> None:
        m, efc, _ = self._hnsw
        conn.execute(sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON {memories} USING hnsw ((embedding::vector({dim})) "
            "vector_cosine_ops) WITH (m = {m}, ef_construction = {efc}) WHERE embedding_model = {model} AND ann"
        ).format(name=sql.Identifier(self._index_name(model, dim)), memories=self._t("memories"),
                 dim=sql.Literal(dim), m=sql.Literal(m), efc=sql.Literal(efc), model=sql.Literal(model)))

    def _spaces(self, conn: psycopg.Connection) -> list[tuple[str, int]]:
        rows = conn.execute(self._q("SELECT key, value FROM {meta} WHERE key LIKE 'vector_dim:%%'")).fetchall()
        return [(key.split(":", 1)[1], int(value)) for key, value in rows]

    @contextmanager
    def bulk_load(self, *, maintenance_work_mem: str = "2GB", parallel_workers: int = 2) -> Iterator["PostgresStore"]:
        """Load many memories fast: the HNSW indexes are dropped for the duration and rebuilt
        (in bulk, with parallel workers) at the end, which is far cheaper than growing the graph one
        insert at a time. Searches still work meanwhile (exact vector scans, slower on large users).

        Example::

            with store.bulk_load():
                for batch, vectors in batches:
                    store.put(batch, vectors)
        """
        if not re.match(r"^\d+\s*(kB|MB|GB)$", maintenance_work_mem):
            raise ValueError("maintenance_work_mem is like '2GB'")
        with self._tx() as conn:
            for model, dim in self._spaces(conn):
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {name}").format(
                    name=sql.Identifier(self._index_name(model, dim))))
        self._defer_vector_index = True
        try:
            yield self
        finally:
            self._defer_vector_index = False
            with self._tx(any_user=True) as conn:
                conn.execute(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'")
                conn.execute(f"SET LOCAL max_parallel_maintenance_workers = {int(parallel_workers)}")
                for model, dim in self._spaces(conn):
                    self._create_vector_index(conn, model, dim)

    # -- writes -----------------------------------------------------------------------------
    def _put_in(self, conn: psycopg.Connection, memories: Sequence[Memory], vectors: Any) -> None:
        if not memories:
            return
        merged, cleared = base.merge_batch(memories, vectors)
        model = self.embedding_model
        dims = {v.shape[0] for _, v in merged.values() if v is not None}
        if model is not None:
            for dim in sorted(dims):
                self._ensure_space(conn, model, dim)
        # Rows are written in id order (every batch takes its row locks in the same order, so
        # concurrent batches cannot deadlock); the insertion order (`rowid`, which orders ties in
        # `list` and `iter_memories`) is the batch order, from ids reserved up front.
        rowids = [r[0] for r in conn.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'rowid')) FROM generate_series(1, %s)",
            (self.prefix + "memories", len(merged))).fetchall()]
        indexed = self._indexed_users(conn, [m for m, _ in merged.values()])
        params = []
        for rowid, (memory, vector) in zip(rowids, merged.values()):
            replace_vector = vector is not None or memory.id in cleared
            text = full_text(memory)
            terms = analyse(text)
            params.append((
                rowid, *records.memory_values(memory).values(), aware(memory.created_at), aware(memory.event_start),
                aware(memory.event_end), text, pgs.tsvector_text(terms), len(terms), memory.user_id in indexed,
                None if vector is None else model, None if vector is None else _PgVector.stored(vector),
                replace_vector, replace_vector,
            ))
        params.sort(key=lambda p: p[1])  # by id
        if self.partitions:
            self._claim(conn, parts.MEMORY, [(p[1], p[2]) for p in params], "memory")
        key = "user_id, id" if self.partitions else "id"
        with conn.cursor() as cur:
            cur.executemany(self._q(_PUT_MEMORY, key=sql.SQL(key)), params, returning=True)
            written = 0
            while True:
                if cur.fetchone() is not None:
                    written += 1
                if not cur.nextset():
                    break
        if written != len(params):
            owned = conn.execute(self._q("SELECT id FROM {memories} WHERE id = ANY(%s) AND user_id <> ALL(%s)"),
                                 ([p[1] for p in params], list({p[2] for p in params}))).fetchall()
            raise ValueError(f"memory id {owned[0][0] if owned else '?'!r} belongs to another user")
        for user_id in sorted(indexed):
            # the user's older rows join the index a bounded number per write (the rest are
            # searched exactly meanwhile); rows another transaction holds are left for later
            conn.execute(self._q(
                "UPDATE {memories} SET ann = true WHERE user_id = %s AND rowid IN (SELECT rowid FROM {memories} "
                "WHERE user_id = %s AND NOT ann ORDER BY rowid LIMIT %s FOR UPDATE SKIP LOCKED)"),
                (user_id, user_id, max(2 * len(params), 500)))

    def _lock_writers(self, conn: psycopg.Connection, memories: Sequence[Memory], ledger: LedgerChanges | None,
                      users: builtins.list[str]) -> None:
        """In the partitioned layout, the write locks of every user a transaction writes (`users`, the
        users of `memories` and of `ledger`), taken first and in user order."""
        if self.partitions:
            users = [*users, *(m.user_id for m in memories), *([ledger.user_id] if ledger is not None else [])]
            parts.lock_users(conn, self.prefix, users)

    def _claim(self, conn: psycopg.Connection, kind: str, pairs: Sequence[tuple[str, str]], what: str) -> None:
        """The partitioned layout's writes of (id, user) pairs of `kind`: their owners recorded;
        `ValueError` for an id of another user."""
        taken = parts.claim(conn, self._t("owners"), kind, pairs)
        if taken is not None:
            raise ValueError(f"{what} id {taken!r} belongs to another user")

    def _indexed_users(self, conn: psycopg.Connection, memories: Sequence[Memory]) -> set[str]:
        """The users of `memories` whose rows go into the HNSW index: those with more than
        `exact_vector_rows` memories once these are written (smaller users are searched exactly)."""
        if self.embedding_model is None:
            return set()
        adding = Counter(m.user_id for m in memories)
        if len(adding) == 1:  # nearly every batch: a statement on that user's rows (partition) only
            [(user_id, n)] = adding.items()
            counted = self._q("SELECT count(*) FROM (SELECT 1 FROM {memories} m WHERE m.user_id = %s LIMIT %s) x")
            return {user_id} if int(_scalar(conn.execute(counted, (user_id, self.exact_vector_rows + 1)))) + n \
                > self.exact_vector_rows else set()
        counts: dict[str, int] = dict(conn.execute(self._q(
            "SELECT u, (SELECT count(*) FROM (SELECT 1 FROM {memories} m WHERE m.user_id = u LIMIT %s) x) "
            "FROM unnest(%s::text[]) u"), (self.exact_vector_rows + 1, sorted(adding))).fetchall())
        return {u for u, n in adding.items() if int(counts.get(u, 0)) + n > self.exact_vector_rows}

    def _commit(self, memories: Sequence[Memory], vectors: VectorRows | None,
                done_message_ids: Sequence[str], lease: Lease | None = None,
                ledger: LedgerChanges | None = None) -> None:
        if not memories and not done_message_ids and ledger is None:
            return
        with self._tx(_users_of(memories, ledger)) as conn:
            done = self._messages_by_user(conn, done_message_ids)
            self._lock_writers(conn, memories, ledger, [u for u, _ in done if u is not None])
            self._put_in(conn, memories, vectors)
            if ledger is not None:
                self._ledger.apply(conn, ledger)
            marked = 0
            for user_id, group in done:
                self._lock_messages(conn, group, user_id)
                marked += conn.execute(self._q(f"UPDATE {{messages}} SET state=%s WHERE id = ANY(%s) AND state=%s"
                                               f"{self._of(user_id)}"), (DONE, group, PENDING, *self._user(user_id))
                                       ).rowcount
            if marked != len(set(done_message_ids)):  # raised inside the transaction: nothing is kept
                raise MessagesGoneError("a message of this commit is no longer pending")
            if lease is not None:
                # last, so locks are taken in delete_user's order (memories, messages, lease); the
                # row stays locked until this commits, so no takeover lands in between
                row = conn.execute(self._q("SELECT owner, expires_at > clock_timestamp() FROM {leases} "
                                           "WHERE user_id=%s FOR UPDATE"), (lease.user_id,)).fetchone()
                require_held(lease, row[0] if row else None, bool(row and row[1]))

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the vectors of existing memories (used when the embedding model changes)."""
        rows = base.vector_rows_for(ids, vectors)
        if not rows:
            return
        with self._tx(any_user=True) as conn:
            model = self.embedding_model
            if model is not None:
                for dim in sorted({v.shape[0] for v in rows if v is not None}):
                    self._ensure_space(conn, model, dim)
            pairs = sorted(((i, v) for i, v in zip(ids, rows) if v is not None), key=lambda p: p[0])
            if not self.partitions:
                with conn.cursor() as cur:
                    cur.executemany(self._q("UPDATE {memories} SET embedding=%s, embedding_model=%s WHERE id=%s"),
                                    [(_PgVector.stored(v), model, i) for i, v in pairs])
                return
            # the partitioned layout: each row found in its user's partition
            owner = {i: u for u, group in parts.owners_of(conn, self._t("owners"), parts.MEMORY,
                                                           [i for i, _ in pairs]).items() for i in group}
            parts.lock_users(conn, self.prefix, owner.values())
            with conn.cursor() as cur:
                cur.executemany(self._q("UPDATE {memories} SET embedding=%s, embedding_model=%s "
                                        "WHERE user_id=%s AND id=%s"),
                                [(_PgVector.stored(v), model, owner[i], i) for i, v in pairs if i in owner])

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        ids = base.id_list(ids)
        if not ids:
            return 0
        with self._tx([user_id]) as conn:
            if self.partitions:
                parts.lock_users(conn, self.prefix, [user_id])
            conn.execute(self._q("SELECT 1 FROM {memories} WHERE user_id=%s AND id = ANY(%s) "
                                 "ORDER BY id FOR UPDATE"), (user_id, sorted(set(ids))))
            cur = conn.execute(self._q("DELETE FROM {memories} WHERE user_id=%s AND id = ANY(%s) RETURNING id"),
                               (user_id, sorted(set(ids))))
            deleted = [r[0] for r in cur.fetchall()]
            if deleted:  # a turn's message, logged under the turn's id: forgotten with it (`StoreBase.delete`)
                conn.execute(self._q("UPDATE {messages} SET content='', name=NULL, metadata=%s, state=%s "
                                     "WHERE user_id=%s AND id = ANY(%s) AND role <> 'tool'"),
                             (FORGOTTEN_METADATA, DONE, user_id, deleted))
            self._ledger.delete_mentions_of(conn, user_id, ids)
            if self.partitions:
                parts.release(conn, self._t("owners"), parts.MEMORY, user_id, deleted)
            return len(deleted)

    def delete_user(self, user_id: str) -> int:
        with self._tx([user_id]) as conn:
            if self.partitions:
                parts.lock_users(conn, self.prefix, [user_id])
            deleted = conn.execute(self._q("DELETE FROM {memories} WHERE user_id=%s"), (user_id,)).rowcount
            conn.execute(self._q("DELETE FROM {messages} WHERE user_id=%s"), (user_id,))
            conn.execute(self._q("DELETE FROM {t} WHERE user_id=%s", t=self._t("tool_counters")), (user_id,))
            conn.execute(self._q("DELETE FROM {leases} WHERE user_id=%s"), (user_id,))
            self._ledger.delete_user(conn, user_id)
            if self.partitions:
                conn.execute(self._q("DELETE FROM {owners} WHERE user_id=%s", owners=self._t("owners")), (user_id,))
        return deleted

    def rename_user(self, old_user_id: str, new_user_id: str) -> int:
        with self._tx([old_user_id, new_user_id]) as conn:
            if self.partitions:
                parts.lock_users(conn, self.prefix, [old_user_id, new_user_id])
            conn.execute(self._q("SELECT 1 FROM {memories} WHERE user_id = ANY(%s) ORDER BY id FOR UPDATE"),
                         ([old_user_id, new_user_id],))
            taken = conn.execute(self._q("SELECT 1 FROM {memories} WHERE user_id=%s UNION ALL SELECT 1 FROM "
                                         "{messages} WHERE user_id=%s LIMIT 1"), (new_user_id, new_user_id)).fetchone()
            if taken is not None or self._ledger.has_user(conn, new_user_id):
                raise ValueError("the new user id already has memories, messages or ledger entries")
            moved = conn.execute(self._q("UPDATE {memories} SET user_id=%s WHERE user_id=%s"),
                                 (new_user_id, old_user_id)).rowcount
            conn.execute(self._q("UPDATE {messages} SET user_id=%s WHERE user_id=%s"), (new_user_id, old_user_id))
            conn.execute(self._q("UPDATE {t} SET user_id=%s WHERE user_id=%s", t=self._t("tool_counters")),
                         (new_user_id, old_user_id))
            self._ledger.rename_user(conn, old_user_id, new_user_id)
            conn.execute(self._q("DELETE FROM {leases} WHERE user_id=%s"), (old_user_id,))
            if self.partitions:
                conn.execute(self._q("UPDATE {owners} SET user_id=%s WHERE user_id=%s", owners=self._t("owners")),
                             (new_user_id, old_user_id))
        return moved

    # -- the entity ledger and the profile (postgres_ledger) -----------------------------------
    def _edit_ledger(self, user_id: str, edit: base.LedgerEdit) -> LedgerChanges | None:
        with self._tx([user_id]) as conn:
            if self.partitions:
                parts.lock_users(conn, self.prefix, [user_id])
            return self._ledger.edit(conn, user_id, edit)

    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> builtins.list[Entity]:
        return self._routed(user_id, lambda conn: self._ledger.entities(conn, user_id, ids, kind))

    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> builtins.list[EntityMention]:
        return self._routed(user_id, lambda conn: self._ledger.mentions(conn, user_id, entity_ids, memory_ids))

    def profile_values(self, user_id: str, *, key: str | None = None,
                       current_only: bool = False) -> builtins.list[ProfileValue]:
        return self._routed(user_id, lambda conn: self._ledger.profile_values(conn, user_id, key, current_only))

    # -- reads ------------------------------------------------------------------------------
    def get(self, user_id: str, ids: Sequence[str]) -> list[Memory]:
        ids = base.id_list(ids)
        if not ids:
            return []
        rows = self._routed(user_id, lambda conn: conn.execute(self._q(
            f"SELECT {_MEMORY_COLUMNS} FROM {{memories}} WHERE user_id=%s AND id = ANY(%s)"),
            (user_id, list(ids))).fetchall())
        return in_order(ids, {r[0]: records.memory_from_row(r) for r in rows})

    @staticmethod
    def _where(user_id: str, flt: MemoryFilter, params: dict[str, Any]) -> str:
        clauses = ["m.user_id = %(user_id)s"]
        params["user_id"] = user_id
        if flt.agent_id is not None:
            clauses.append("m.agent_id = %(agent_id)s")
            params["agent_id"] = flt.agent_id
        if flt.types:
            clauses.append("m.type = ANY(%(types)s)")
            params["types"] = [t.value for t in flt.types]
        if flt.statuses:
            clauses.append("m.status = ANY(%(statuses)s)")
            params["statuses"] = [s.value for s in flt.statuses]
        if flt.session_id is not None:
            clauses.append("m.session_id = %(session_id)s")
            params["session_id"] = flt.session_id
        if flt.time_range is not None:
            lo, hi = aware(flt.time_range.start), aware(flt.time_range.end)
            by_message, by_event = [], ["m.event_start_ts IS NOT NULL"]
            if lo is not None:
                params["lo"] = lo
                by_message.append("m.created_ts >= %(lo)s")
                by_event.append("COALESCE(m.event_end_ts, m.event_start_ts) >= %(lo)s")
            if hi is not None:
                params["hi"] = hi
                by_message.append("m.created_ts < %(hi)s")
                by_event.append("m.event_start_ts < %(hi)s")
            clauses.append(f"(({' AND '.join(by_message) or 'TRUE'}) OR ({' AND '.join(by_event)}))")
        return " AND ".join(clauses)

    def list(self, user_id: str, flt: MemoryFilter, *, limit: int = 100, offset: int = 0,
             newest_first: bool = True) -> builtins.list[Memory]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        where = self._where(user_id, flt, params)
        order = "DESC" if newest_first else "ASC"
        rows = self._routed(user_id, lambda conn: conn.execute(self._q(
            f"SELECT {_M_COLUMNS} FROM {{memories}} m WHERE {where} "
            f"ORDER BY m.created_ts {order}, m.rowid {order} LIMIT %(limit)s OFFSET %(offset)s"), params).fetchall())
        return [records.memory_from_row(r) for r in rows]

    def count(self, user_id: str, flt: MemoryFilter) -> int:
        params: dict[str, Any] = {}
        where = self._where(user_id, flt, params)
        return self._routed(user_id, lambda conn: int(_scalar(conn.execute(
            self._q(f"SELECT count(*) FROM {{memories}} m WHERE {where}"), params))))

    def users(self) -> builtins.list[str]:
        with self._reading() as conn:
            rows = conn.execute(self._q(
                "SELECT user_id FROM (SELECT DISTINCT user_id FROM {memories} UNION SELECT DISTINCT user_id "
                "FROM {messages}) u ORDER BY user_id COLLATE \"C\"")).fetchall()
        return [r[0] for r in rows]

    def stored_users(self) -> builtins.list[str]:
        tables = ("memories", "messages", *postgres_ledger.TABLES, "tool_counters")
        union = " UNION ".join(f"SELECT user_id FROM {{{table}}}" for table in tables)
        with self._reading() as conn:
            rows = conn.execute(sql.SQL(f'SELECT user_id FROM ({union}) u ORDER BY user_id COLLATE "C"').format(
                **{table: self._t(table) for table in tables})).fetchall()
        return [r[0] for r in rows]

    def _memory_page(self, user_id: str | None, *, needing_vectors: bool, after: int,
                     limit: int) -> builtins.list[tuple[int, Memory]]:
        clauses = ["rowid > %(after)s"]
        if user_id is not None:
            clauses.append("user_id = %(user_id)s")
        if needing_vectors:
            clauses.append(self._NEEDS)
        with self._reading() as conn:
            rows = conn.execute(self._q(
                f"SELECT rowid, {_MEMORY_COLUMNS} FROM {{memories}} WHERE {' AND '.join(clauses)} "
                "ORDER BY rowid LIMIT %(n)s"), {"after": after, "user_id": user_id, "n": limit,
                                               "model": self.embedding_model or ""}).fetchall()
        return [(row[0], records.memory_from_row(row[1:])) for row in rows]

    _NEEDS = "(embedding_model IS NULL OR embedding_model < %(model)s OR embedding_model > %(model)s)"

    def count_needing_vectors(self) -> int:
        with self._reading() as conn:
            return int(_scalar(conn.execute(self._q(f"SELECT count(*) FROM {{memories}} WHERE {self._NEEDS}"),
                                            {"model": self.embedding_model or ""})))

    # -- search -----------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> builtins.list[Candidate]:
        terms = pgs.indexable(list(dict.fromkeys(analyse(request.text)))) if request.text else []
        model = self.embedding_model
        query_vector = None
        dim = None
        if request.vector is not None and model is not None:
            query_vector = np.asarray(request.vector, dtype=np.float32).reshape(-1)
            dim = self._dim_of(None, model)
            if dim is not None and query_vector.shape[0] != dim:
                raise ValueError(f"query vector has {query_vector.shape[0]} dimensions; the store's vectors "
                                 f"have {dim}")
        if not terms and (dim is None or query_vector is None):
            return []
        return self._routed(request.user_id, lambda conn: self._search_on(conn, request, terms, query_vector, dim))

    def _search_on(self, conn: psycopg.Connection, request: SearchRequest, terms: builtins.list[str],
                   query_vector: np.ndarray | None, dim: int | None) -> builtins.list[Candidate]:
        """`search` on one connection (the primary's or a standby's): the user's in-process index
        when they are small enough, else the database's search."""
        if self.user_index_rows:
            # the index's change detection (count and seq) and the rows it reads share this
            # connection, so an index read from a standby is exact as of that standby
            held = self._search_held(conn, request, query_vector if dim is not None else None)
            if held is not None:
                return held
        params: dict[str, Any] = {"limit": max(1, int(request.limit))}
        where = self._where(request.user_id, request.filter, params)
        if dim is not None and query_vector is not None:
            params.update(vec=_PgVector(query_vector), exact_rows=self.exact_vector_rows)
        else:
            dim = None
        hits, stats = self._search_presumed(conn, terms, where, dict(params), dim)
        if stats is not None:  # a common term or the HNSW walk: planned again, with the statistics
            hits = self._search_planned(conn, stats, request.filter, where, params, dim)
        found = self._records(conn, request.user_id, [(int(r[4]), int(r[5])) for r in hits])
        return [Candidate(
            memory=found[row[4]],
            text_rank=None if row[0] is None else int(row[0]),
            text_score=None if row[1] is None else float(row[1]),
            vector_rank=None if row[2] is None else int(row[2]),
            vector_score=None if row[3] is None else 1.0 - float(row[3])) for row in hits if row[4] in found]

    # -- the in-process index of small users ------------------------------------------------------
    # the index's rows (`user_index.IndexRow`): times as epoch seconds, the terms with their counts
    _INDEX_ROW = (
        "SELECT m.rowid, m.embedding, m.type, m.status, extract(epoch FROM m.created_ts)::float8, "
        "extract(epoch FROM m.event_start_ts)::float8, extract(epoch FROM m.event_end_ts)::float8, m.agent_id, "
        "m.session_id, COALESCE(m.seq, 0), m.embedding_model, (SELECT COALESCE(string_agg(repeat(t.lexeme || ' ', "
        "COALESCE(array_length(t.positions, 1), 1)), ''), '') FROM unnest(m.terms) t) FROM {memories} m ")

    def _search_held(self, conn: psycopg.Connection, request: SearchRequest,
                     query_vector: np.ndarray | None) -> builtins.list[Candidate] | None:
        """The search over the user's in-process index (`user_index`), brought up to date first; None
        when the user has more than `user_index_rows` memories (the database searches)."""
        user_id = request.user_id
        head = conn.execute(self._q(
            "SELECT s.n, CASE WHEN s.n <= %(bound)s THEN (SELECT COALESCE(max(m.seq), 0) FROM {memories} m "
            "WHERE m.user_id = %(u)s) END FROM {user_sizes} s WHERE s.user_id = %(u)s",
            user_sizes=self._t("user_sizes")), {"u": user_id, "bound": self.user_index_rows}).fetchone()
        n, max_seq = (0, 0) if head is None else (int(head[0]), int(head[1] or 0))
        if getattr(self._on_standby, "value", False) and n <= self.user_index_rows:
            # a standby behind the index this process holds (built from the primary, or a standby
            # further on) would have it rebuilt from older rows: the primary answers this search
            cached = self._indexes.get(user_id)
            if cached is not None and max_seq < cached.max_seq:
                raise replicas.BehindIndex()
        if n == 0 or n > self.user_index_rows:
            self._indexes.drop(user_id)
            return [] if n == 0 else None
        index = self._current_index(conn, user_id, n, max_seq)
        vector_request = request if query_vector is not None else dataclasses.replace(request, vector=None)
        found = user_index.search(index, vector_request, analyse(request.text or ""))
        if not found:
            return []
        rows = self._held_records(conn, user_id, list(found), index)
        # a row deleted since the index was read is left out
        return [Candidate(rows[rowid], *fields) for rowid, fields in found.items() if rowid in rows]

    def _current_index(self, conn: psycopg.Connection, user_id: str, n: int, max_seq: int) -> user_index.UserIndex:
        """The user's index as of `n` memories and newest write `max_seq`: the cached one, the cached
        one with the rows written since (replaced or appended, when nothing was deleted), or read anew."""
        cached = self._indexes.get(user_id)
        if cached is not None and cached.rev == n and cached.max_seq == max_seq:
            return cached
        index = None
        if cached is not None and max_seq > cached.max_seq:
            changed = conn.execute(self._q(self._INDEX_ROW + "WHERE m.user_id = %s AND m.seq > %s ORDER BY m.seq"),
                                   (user_id, cached.max_seq), binary=True).fetchall()
            added = sum(1 for row in changed if int(row[0]) not in cached.position)
            if len(cached) + added == n:  # else rows were deleted meanwhile
                index = user_index.refreshed(cached, changed, self.embedding_model, n)
        if index is None:
            rows = conn.execute(self._q(self._INDEX_ROW + "WHERE m.user_id = %s ORDER BY m.rowid"), (user_id,),
                                binary=True).fetchall()
            index = user_index.build(rows, self.embedding_model, rev=len(rows), epoch=0)
        self._indexes.put(user_id, index)
        return index

    def _held_records(self, conn: psycopg.Connection, user_id: str, rowids: builtins.list[int],
                      index: user_index.UserIndex) -> dict[int, Memory]:
        """Records by rowid, kept with the index once read (callers must not mutate them)."""
        known = index.records
        found = {r: known[r] for r in rowids if r in known}
        missing = [r for r in rowids if r not in known]
        if missing:
            for row in conn.execute(self._q(f"SELECT rowid, {_MEMORY_COLUMNS} FROM {{memories}} "
                                            "WHERE rowid = ANY(%s) AND user_id = %s"), (missing, user_id)):
                found[int(row[0])] = known[int(row[0])] = records.memory_from_row(row[1:])
        return found

    # both channels' hits by rowid, with per-channel ranks and scores, and the row's version
    _HITS = ("hits AS (SELECT COALESCE(t.rowid, v.rowid) AS rowid, t.rank AS text_rank, t.score AS text_score, "
             "v.rank AS vector_rank, v.dist AS dist FROM t FULL OUTER JOIN v ON t.rowid = v.rowid) ")
    _HIT_COLUMNS = "h.text_rank, h.text_score, h.vector_rank, h.dist, m.rowid, m.xmin::text::bigint"

    def _search_presumed(self, conn: psycopg.Connection, terms: builtins.list[str], where: str,
                         params: dict[str, Any], dim: int | None
                         ) -> tuple[builtins.list[tuple[Any, ...]], pgs.UserStatistics | None]:
        """The search in one statement, with the user's statistics read in it (`pgs.STATISTICS_CTES`)
        and planned as for a user with no common query term and an exact vector channel (every
        user up to `text_term_rows` memories): its hits, and None; or, when the statistics call for
        another plan (the statement then scored nothing), no hits and the statistics."""
        params.update(terms=terms, bound=self.text_term_rows, exact_rows=self.exact_vector_rows,
                      min_avgdl=pgs.MIN_AVGDL)
        text = pgs.presumed_text_ctes(terms, where, params) if terms else pgs.EMPTY_TEXT
        vector = pgs.EMPTY_VECTOR if dim is None else pgs.vector_ctes(dim, where, through_index=False, gate=pgs.GATE)
        statement = (
            f"WITH {pgs.STATISTICS_CTES}, {text}, {vector}, {self._HITS}"
            f"SELECT 1 AS part, {self._HIT_COLUMNS}, NULL::bigint, NULL::bigint, NULL::boolean, NULL::text[], "
            "NULL::boolean FROM hits h JOIN {memories} m ON {same_user}m.rowid = h.rowid "
            "UNION ALL SELECT 0, NULL, NULL, NULL, NULL, NULL, NULL, st.n, st.dl_sum, st.indexed, st.found, st.ok "
            "FROM st ORDER BY 1, 2 NULLS LAST, 4 NULLS LAST")
        # never server-side prepared: each search is planned with its values anyway, and the
        # statement's text changes with the query's terms (preparing only adds a step)
        rows = conn.execute(self._q(statement, model_lit=sql.Literal(self.embedding_model),
                                    user_terms=self._t("user_terms"), user_sizes=self._t("user_sizes"),
                                    same_user=self._same_user()),
                            params, prepare=False).fetchall()
        if not rows or rows[0][0] != 0:
            raise StoreError("PostgreSQL returned no statistics row for a search")
        if rows[0][11]:
            return [row[1:7] for row in rows[1:]], None
        return [], pgs.read_statistics(rows[0][7:11], terms, self.text_term_rows)

    def _search_planned(self, conn: psycopg.Connection, stats: pgs.UserStatistics, flt: MemoryFilter, where: str,
                        params: dict[str, Any], dim: int | None) -> builtins.list[tuple[Any, ...]]:
        """The search planned with the user's statistics (`pgs.text_ctes`: common terms bounded; the
        vector channel through the HNSW index when `_through_index` says so)."""
        text = pgs.text_ctes(stats, params=params, where=where, common_rows=self.text_term_rows) \
            if any(stats.df.values()) else pgs.EMPTY_TEXT
        vector = pgs.EMPTY_VECTOR
        if dim is not None:
            vector = pgs.vector_ctes(dim, where, through_index=self._through_index(conn, stats, flt, where, params))
        if text is pgs.EMPTY_TEXT and vector is pgs.EMPTY_VECTOR:
            return []
        statement = (f"WITH {text}, {vector}, {self._HITS}SELECT {self._HIT_COLUMNS} FROM hits h "
                     "JOIN {memories} m ON {same_user}m.rowid = h.rowid "
                     "ORDER BY h.text_rank NULLS LAST, h.vector_rank NULLS LAST")
        return conn.execute(self._q(statement, model_lit=sql.Literal(self.embedding_model),
                                    same_user=self._same_user()), params, prepare=False).fetchall()

    def _same_user(self) -> sql.SQL:
        return sql.SQL(pgs.SAME_USER if self.partitions else "")

    def _records(self, conn: psycopg.Connection, user_id: str,
                 versions: builtins.list[tuple[int, int]]) -> dict[int, Memory]:
        """The memories of these (rowid, row version) pairs: from the record cache, the rest read
        (a row changed or deleted since the search is returned as it is now, or left out)."""
        found: dict[int, Memory] = {}
        missing = []
        for rowid, version in versions:
            held = self._cache.get(rowid, version)
            if held is None:
                missing.append(rowid)
            else:
                found[rowid] = held
        if missing:
            rows = conn.execute(self._q(f"SELECT rowid, xmin::text::bigint, {_MEMORY_COLUMNS} FROM {{memories}} "
                                        "WHERE rowid = ANY(%s) AND user_id = %s"), (missing, user_id)).fetchall()
            for row in rows:
                memory = records.memory_from_row(row[2:])
                self._cache.put(int(row[0]), int(row[1]), memory)
                found[int(row[0])] = memory
        return found

    def _through_index(self, conn: psycopg.Connection, stats: pgs.UserStatistics, flt: MemoryFilter, where: str,
                       params: dict[str, Any]) -> bool:
        """Whether the vector channel walks the HNSW index: some of the user's rows are indexed and
        the filter leaves more than `exact_vector_rows` of their rows (counted only when the filter
        narrows more than by status)."""
        if not stats.indexed or stats.n <= self.exact_vector_rows:
            return False
        if flt.agent_id is None and not flt.types and flt.session_id is None and flt.time_range is None:
            return True
        row = conn.execute(self._q(f"SELECT count(*) FROM (SELECT 1 FROM {{memories}} m WHERE {where} "
                                   "LIMIT %(exact_rows)s + 1) x"), params).fetchone()
        return row is not None and int(row[0]) > self.exact_vector_rows

    # -- the durable message log ------------------------------------------------------------------
    def _log(self, rows: Sequence[tuple[Any, ...]], memories: Sequence[Memory], vectors: VectorRows | None,
             ledger: LedgerChanges | None = None) -> None:
        with self._tx(_users_of(memories, ledger)) as conn:
            self._lock_writers(conn, memories, ledger, [r[1] for r in rows])
            if self.partitions:
                self._claim(conn, parts.MESSAGE, [(r[0], r[1]) for r in rows], "message")
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(self._q(_INSERT_MESSAGE), rows)
                    counts = [i.row() for i in tool_counters.increments(rows)]
                    if counts:
                        cur.executemany(self._q(tool_counters.POSTGRES_UPSERT,
                                                tool_counters=self._t("tool_counters")), counts)
            self._put_in(conn, memories, vectors)
            if ledger is not None:
                self._ledger.apply(conn, ledger)

    def tool_counters(self, agent_id: str, *, tool: str | None = None, user_id: str | None = None,
                      team: str | None = None) -> builtins.list[tool_counters.Counter]:
        where, values = tool_counters.read_clauses(agent_id, tool, user_id, "%s", team, postgres=True)
        with self._reading() as conn:
            rows = conn.execute(self._q(f"SELECT tool, kind, key, sum(n), min(first_us), max(last_us) FROM {{t}} "
                                        f"WHERE {where} GROUP BY tool, kind, key", t=self._t("tool_counters")),
                                values).fetchall()
        return tool_counters.summed(rows)

    def _lock_messages(self, conn: psycopg.Connection, ids: Sequence[str], user_id: str | None) -> None:
        """Lock message rows in id order before changing them (no lock-order deadlocks)."""
        conn.execute(self._q(f"SELECT 1 FROM {{messages}} WHERE id = ANY(%s){self._of(user_id)} "
                             "ORDER BY id FOR UPDATE"), (sorted(set(ids)), *self._user(user_id)))

    def _messages_by_user(self, conn: psycopg.Connection,
                          ids: Sequence[str]) -> builtins.list[tuple[str | None, builtins.list[str]]]:
        """Message ids (sorted) by user: in the partitioned layout, the users `owners` records
        (ids of no message left out); otherwise all of them, with no user (None)."""
        if not ids:
            return []
        if not self.partitions:
            return [(None, sorted(set(ids)))]
        found = parts.owners_of(conn, self._t("owners"), parts.MESSAGE, ids)
        missing = set(ids).difference(*found.values())
        if missing:  # logged without their owner (by a release before the layout): found in every partition
            for user_id, more in conn.execute(self._q("SELECT user_id, array_agg(id) FROM {messages} "
                                                      "WHERE id = ANY(%s) GROUP BY user_id"), (sorted(missing),)):
                found[user_id] = sorted({*found.get(user_id, []), *more})
        return sorted(found.items())

    @staticmethod
    def _of(user_id: str | None) -> str:
        """The condition on the user of a statement that names rows by id, when the user is known
        (the partitioned layout: the statement then reads one partition); see `_user`."""
        return "" if user_id is None else " AND user_id = %s"

    @staticmethod
    def _user(user_id: str | None) -> tuple[str, ...]:
        return () if user_id is None else (user_id,)

    def _read_messages(self, user_id: str, *, agent_id: str | None = None, state: str | None = None,
                       before_seq: int | None = None, limit: int,
                       newest_first: bool) -> builtins.list[StoredMessage]:
        params = {"user_id": user_id, "agent_id": agent_id, "state": state, "before": before_seq, "n": limit}
        clauses = ["user_id = %(user_id)s"]
        for clause, value in (("agent_id = %(agent_id)s", agent_id), ("state = %(state)s", state),
                              ("seq < %(before)s", before_seq)):
            if value is not None:
                clauses.append(clause)
        order = "DESC" if newest_first else "ASC"
        with self._reading() as conn:
            rows = conn.execute(self._q(f"SELECT {_MESSAGE_COLUMNS} FROM {{messages}} WHERE {' AND '.join(clauses)} "
                                        f"ORDER BY seq {order} LIMIT %(n)s"), params).fetchall()
        return [records.message_from_row(r) for r in rows]

    def logged_message_ids(self, user_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        with self._reading() as conn:  # the primary's: a standby may not have the newest yet
            rows = conn.execute(self._q("SELECT id FROM {messages} WHERE user_id = %s AND id = ANY(%s)"),
                                (user_id, list(dict.fromkeys(ids)))).fetchall()
        return {r[0] for r in rows}

    def _set_message_state(self, ids: Sequence[str], state: str) -> None:
        if not ids:
            return
        with self._tx() as conn:
            for user_id, group in self._messages_by_user(conn, ids):
                self._lock_messages(conn, group, user_id)
                # a forgotten message (its turn deleted) stays done: counting an attempt never revives it
                conn.execute(self._q("UPDATE {messages} SET state=%s, attempts = attempts + (CASE WHEN %s = %s "
                                     "THEN 1 ELSE 0 END) WHERE id = ANY(%s) AND NOT (content = '' AND metadata = %s)"
                                     f"{self._of(user_id)}"),
                             (state, state, FAILED, group, FORGOTTEN_METADATA, *self._user(user_id)))

    def _message_page(self, user_id: str, *, after_seq: int, limit: int) -> builtins.list[StoredMessage]:
        with self._reading() as conn:
            rows = conn.execute(self._q(f"SELECT {_MESSAGE_COLUMNS} FROM {{messages}} "
                                        "WHERE user_id = %s AND seq > %s ORDER BY seq LIMIT %s"),
                                (user_id, after_seq, limit)).fetchall()
        return [records.message_from_row(r) for r in rows]

    def vectors_of(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        rows = self._routed(user_id, lambda conn: conn.execute(self._q(
            "SELECT id, embedding::real[] FROM {memories} WHERE user_id = %s AND id = ANY(%s) "
            "AND embedding IS NOT NULL"), (user_id, list(ids))).fetchall())
        return {memory_id: np.asarray(values, dtype=np.float32) for memory_id, values in rows}

    def users_with_pending(self) -> builtins.list[str]:
        with self._reading() as conn:
            return [r[0] for r in
                    conn.execute(self._q("SELECT DISTINCT user_id FROM {messages} WHERE state=%s"), (PENDING,))]

    def overview(self) -> StoreOverview:
        """Counts of messages per state, users and memories per type (`storage.overview`)."""
        return self._routed(None, lambda conn: sql_overview(lambda query: conn.execute(query).fetchall(), self._q))

    # -- leases -----------------------------------------------------------------------------
    def acquire_lease(self, user_id: str, owner: str, ttl_s: float) -> bool:
        """Take (or renew) the user's lease; the database's clock decides expiry."""
        with self._tx() as conn:
            row = conn.execute(self._q(
                "INSERT INTO {leases} AS l (user_id, owner, expires_at) "
                "VALUES (%s, %s, clock_timestamp() + make_interval(secs => %s)) ON CONFLICT (user_id) DO UPDATE "
                "SET owner = excluded.owner, expires_at = excluded.expires_at "
                "WHERE l.owner = excluded.owner OR l.expires_at <= clock_timestamp() RETURNING l.owner"),
                (user_id, owner, float(ttl_s))).fetchone()
        return row is not None

    def renew_lease(self, user_id: str, owner: str, ttl_s: float) -> bool:
        with self._tx() as conn:
            row = conn.execute(self._q(
                "UPDATE {leases} SET expires_at = clock_timestamp() + make_interval(secs => %s) "
                "WHERE user_id=%s AND owner=%s AND expires_at > clock_timestamp() RETURNING 1"),
                (float(ttl_s), user_id, owner)).fetchone()
        return row is not None

    def release_lease(self, user_id: str, owner: str) -> None:
        with self._tx() as conn:
            conn.execute(self._q("DELETE FROM {leases} WHERE user_id=%s AND owner=%s"), (user_id, owner))

