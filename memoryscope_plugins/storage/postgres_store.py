"""The PostgreSQL store: psycopg 3 with a thread-safe connection pool, pgvector and full-text search.

Layout (every table name starts with the configured prefix, default ``memoryscope_``):

- ``meta``: key/value facts: ``schema_version``, ``text_search_config``, and ``vector_dim:<model>``
  for every embedding model whose vectors were ever stored (its dimension, fixed at first use).
- ``memories``: one row per memory, with indexed filter columns (user, agent, type, status, session,
  message time, event range), the exact ISO text of every time (so offsets round-trip), a generated
  ``tsvector`` column over speaker + content + context with a GIN index, and an ``embedding vector``
  column with the name of the model that made it. Each embedding model gets its own partial HNSW
  cosine index over ``embedding::vector(dim) WHERE embedding_model = '<model>'``, so a new embedder
  (even one of another dimension) needs no new table, and vectors of another model are never
  compared: every vector query names the store's model.
- ``messages``: the durable message log (the consolidation queue).
- ``leases``: one row per user being consolidated; taken with an atomic upsert that only succeeds
  when the row is free, expired or already ours (the database clock decides expiry), so one
  user's consolidation runs in one process at a time across processes and hosts.

Search runs both channels in one SQL statement (CTEs): full text ranked by BM25 with the user's own
statistics (document frequencies from the GIN index, computed in the statement; as the embedded store ranks) and
vectors by cosine distance, each with the same filters and its own top-N, returned with per-channel
ranks and scores (the engine fuses them). The vector channel is exact when the filtered set is small
(at most ``exact_vector_rows``; decided inside the same statement) and otherwise uses the HNSW index
with ``hnsw.iterative_scan = relaxed_order``, so a filtered kNN still returns k rows.

Schema changes are versioned: ``_MIGRATIONS`` is a list of SQL steps per version, applied under
an advisory lock inside one transaction at start; a database written by a newer version raises
`SchemaVersionError`.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import re
import struct
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Literal, Sequence

import numpy as np

try:
    import psycopg
    from psycopg import sql
    from psycopg.adapt import Dumper
    from psycopg.pq import Format
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - the engine turns this into a ConfigError
    raise ImportError("the postgres backend needs: pip install 'memoryscope-plugins[postgres]'") from exc

from ..errors import SchemaVersionError, StoreError, StoreLockedError
from ..indexing import full_text
from ..log_hygiene import without_password
from ..types import Entity, EntityMention, Memory, ProfileValue
from . import base, postgres_ledger, records
from .base import Candidate, LedgerChanges, MemoryFilter, SearchRequest, StoredMessage, VectorRows
from .core import StoreBase, in_order
from .leases import Lease, require_held
from .messages import DONE, FAILED, PENDING
from .overview import StoreOverview, sql_overview
from .term_index import K1, B
from .timecodes import aware

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2

# Each entry: (version it brings the schema to, SQL steps). `{p}` is the table prefix, `{cfg}` the
# text search configuration (a quoted literal). Steps run in order in one transaction.
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
]

_MEMORY_COLUMNS = ", ".join(records.MEMORY_COLUMNS)
_M_COLUMNS = ", ".join("m." + c for c in records.MEMORY_COLUMNS)
_MESSAGE_COLUMNS = ", ".join(records.MESSAGE_COLUMNS)
# a memory row as `_put_in` writes it: the shared columns, then the comparable times and search text;
# the vector and its model follow, replaced on conflict only when the batch sets or clears them
_PUT_COLUMNS = ("rowid", *records.MEMORY_VALUE_COLUMNS, "created_ts", "event_start_ts", "event_end_ts", "search_text")
_PUT_MEMORY = (
    f"INSERT INTO {{memories}} AS m ({', '.join(_PUT_COLUMNS)}, embedding_model, embedding) "
    f"OVERRIDING SYSTEM VALUE VALUES ({', '.join(['%s'] * (len(_PUT_COLUMNS) + 2))}) "
    "ON CONFLICT (id) DO UPDATE SET "
    + "".join(f"{c}=excluded.{c}, " for c in _PUT_COLUMNS if c not in ("rowid", "id", "user_id"))
    + "embedding_model=CASE WHEN %s THEN excluded.embedding_model ELSE m.embedding_model END, "
    "embedding=CASE WHEN %s THEN excluded.embedding ELSE m.embedding END "
    "WHERE m.user_id = excluded.user_id RETURNING m.id")
_INSERT_MESSAGE = (f"INSERT INTO {{messages}}({', '.join(records.MESSAGE_WRITE_COLUMNS)}) "
                   f"VALUES ({', '.join(['%s'] * len(records.MESSAGE_WRITE_COLUMNS))})")

_PREFIX_OK = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


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


def _vector_dumper(oid: int) -> type[Dumper]:
    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: _PgVector) -> bytes:
            values = obj.values
            return struct.pack(">HH", values.shape[0], 0) + values.astype(">f4", copy=False).tobytes()

    VectorDumper.oid = oid
    return VectorDumper


class PostgresStore(StoreBase):
    """A `MemoryStore` on PostgreSQL with the pgvector extension.

    Args:
        conninfo: a libpq connection string or URL (``postgresql://user@host:5432/db``).
        embedding_model: the name of the embedder whose vectors this store compares.
        table_prefix: prefix of every table and index (letters, digits, underscore), so several
            stores can share a database.
        text_search_config: the PostgreSQL text search configuration of the full-text column
            (``english`` by default; ``simple`` for text in other languages). Changing it later
            rebuilds the column.
        pool_min_size / pool_max_size: connection pool bounds.
        lock_timeout_s: how long a statement waits for a row or table lock before
            `StoreLockedError`.
        exact_vector_rows: when the filtered rows of a vector query are at most this many, the
            vector channel is computed exactly; above, through the HNSW index.
        hnsw_m / hnsw_ef_construction / hnsw_ef_search: HNSW index parameters.
        connect_kwargs: extra keyword arguments for `psycopg.connect` (user, password, sslmode ...).
    """

    text_statistics: Literal["user", "index"] = "user"  # see MemoryStore

    # rows of a user over which the average memory length is computed (exact below, estimated above)
    _AVGDL_SAMPLE = 2000

    def __init__(self, conninfo: str, *, embedding_model: str | None = None, table_prefix: str = "memoryscope_",
                 text_search_config: str = "english", pool_min_size: int = 1, pool_max_size: int = 8,
                 lock_timeout_s: float = 10.0, connect_timeout_s: float = 10.0, exact_vector_rows: int = 5_000,
                 hnsw_m: int = 16, hnsw_ef_construction: int = 64, hnsw_ef_search: int = 100,
                 connect_kwargs: dict[str, Any] | None = None) -> None:
        prefix = table_prefix.lower()
        if prefix and not prefix.endswith("_"):
            prefix += "_"
        if not _PREFIX_OK.match(prefix):
            raise ValueError(f"table prefix {table_prefix!r} must be letters, digits and underscores")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", text_search_config):
            raise ValueError(f"invalid text search configuration name {text_search_config!r}")
        self.embedding_model = embedding_model
        self.prefix = prefix
        self.text_search_config = text_search_config
        self.exact_vector_rows = int(exact_vector_rows)
        self._lock_timeout_ms = max(1, int(lock_timeout_s * 1000))
        self._hnsw = (int(hnsw_m), int(hnsw_ef_construction), int(hnsw_ef_search))
        self._dims: dict[str, int] = {}
        self._dims_lock = threading.Lock()
        self._vector_oid: int | None = None
        self._defer_vector_index = False
        self._closed = False
        self._conninfo = conninfo
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
        except BaseException:
            self._pool.close()
            raise

    @classmethod
    def from_settings(cls, cfg: Any, *, embedding_model: str | None = None) -> "PostgresStore":
        """Build from `StoreSettings`: ``url`` is the DSN; ``username``/``password`` override it;
        ``index_prefix`` names the tables; ``ca_certs`` turns on verified TLS."""
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
                   text_search_config=cfg.text_search_config or "english",
                   lock_timeout_s=getattr(cfg, "busy_timeout_s", 10.0), connect_kwargs=kwargs)

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
    def _tx(self) -> Iterator[psycopg.Connection]:
        """One transaction on a pooled connection: committed on success, rolled back on error."""
        if self._closed:
            raise StoreError("the store is closed")
        try:
            with self._pool.connection() as conn:
                with conn.transaction():
                    yield conn
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
                if conn.execute("SELECT 1 FROM pg_ts_config WHERE cfgname=%s",
                                (self.text_search_config,)).fetchone() is None:
                    raise StoreError(f"PostgreSQL has no text search configuration {self.text_search_config!r}")
            cfg_literal = sql.Literal(self.text_search_config).as_string(conn)
            for target, steps in _MIGRATIONS:
                if target <= version:
                    continue
                for step in steps:
                    conn.execute(step.format(p=self.prefix, cfg=cfg_literal))
                conn.execute(self._q("INSERT INTO {meta}(key, value) VALUES('schema_version', %s) "
                                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value"), (str(target),))
                version = target
            stored_cfg = conn.execute(self._q("SELECT value FROM {meta} WHERE key='text_search_config'")).fetchone()
            if stored_cfg is None:
                conn.execute(self._q("INSERT INTO {meta}(key, value) VALUES('text_search_config', %s)"),
                             (self.text_search_config,))
            elif stored_cfg[0] != self.text_search_config:
                self._rebuild_tsv(conn, cfg_literal)
            for model, dim in self._spaces(conn):
                self._dims[model] = dim

    def _rebuild_tsv(self, conn: psycopg.Connection, cfg_literal: str) -> None:
        """The text search configuration changed: regenerate the tsvector column and its index."""
        if conn.execute("SELECT 1 FROM pg_ts_config WHERE cfgname=%s", (self.text_search_config,)).fetchone() is None:
            raise StoreError(f"PostgreSQL has no text search configuration {self.text_search_config!r}")
        log.info("rebuilding the full-text column of %smemories for configuration %s", self.prefix,
                 self.text_search_config)
        p = self.prefix
        conn.execute(f"ALTER TABLE {p}memories DROP COLUMN tsv")
        conn.execute(f"ALTER TABLE {p}memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector("
                     f"{cfg_literal}::regconfig, search_text)) STORED")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {p}mem_tsv ON {p}memories USING gin (tsv)")
        conn.execute(self._q("UPDATE {meta} SET value=%s WHERE key='text_search_config'"), (self.text_search_config,))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()

    # -- meta -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._tx() as conn:
            row = conn.execute(self._q("SELECT value FROM {meta} WHERE key=%s"), (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self._tx() as conn:
            conn.execute(self._q("INSERT INTO {meta}(key, value) VALUES(%s, %s) ON CONFLICT (key) "
                                 "DO UPDATE SET value = excluded.value"), (key, value))

    # -- vector spaces ------------------------------------------------------------------------
    def _index_name(self, model: str, dim: int) -> str:
        return f"{self.prefix}mem_vec_{hashlib.blake2b(model.encode(), digest_size=6).hexdigest()}_{dim}"

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
            "vector_cosine_ops) WITH (m = {m}, ef_construction = {efc}) WHERE embedding_model = {model}"
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
            with self._tx() as conn:
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
        params = []
        for rowid, (memory, vector) in zip(rowids, merged.values()):
            replace_vector = vector is not None or memory.id in cleared
            params.append((
                rowid, *records.memory_values(memory).values(), aware(memory.created_at), aware(memory.event_start),
                aware(memory.event_end), full_text(memory),
                None if vector is None else model, None if vector is None else _PgVector(vector),
                replace_vector, replace_vector,
            ))
        params.sort(key=lambda p: p[1])  # by id
        with conn.cursor() as cur:
            cur.executemany(self._q(_PUT_MEMORY), params, returning=True)
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

    def _commit(self, memories: Sequence[Memory], vectors: VectorRows | None,
                done_message_ids: Sequence[str], lease: Lease | None = None,
                ledger: LedgerChanges | None = None) -> None:
        if not memories and not done_message_ids and ledger is None:
            return
        with self._tx() as conn:
            self._put_in(conn, memories, vectors)
            if ledger is not None:
                self._ledger.apply(conn, ledger)
            if done_message_ids:
                self._lock_messages(conn, done_message_ids)
                conn.execute(self._q("UPDATE {messages} SET state=%s WHERE id = ANY(%s)"),
                             (DONE, sorted(set(done_message_ids))))
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
        with self._tx() as conn:
            model = self.embedding_model
            if model is not None:
                for dim in sorted({v.shape[0] for v in rows if v is not None}):
                    self._ensure_space(conn, model, dim)
            pairs = sorted(((i, v) for i, v in zip(ids, rows) if v is not None), key=lambda p: p[0])
            with conn.cursor() as cur:
                cur.executemany(self._q("UPDATE {memories} SET embedding=%s, embedding_model=%s WHERE id=%s"),
                                [(_PgVector(v), model, i) for i, v in pairs])

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        with self._tx() as conn:
            conn.execute(self._q("SELECT 1 FROM {memories} WHERE id = ANY(%s) ORDER BY id FOR UPDATE"),
                         (sorted(set(ids)),))
            cur = conn.execute(self._q("DELETE FROM {memories} WHERE user_id=%s AND id = ANY(%s)"),
                               (user_id, sorted(set(ids))))
            self._ledger.delete_mentions_of(conn, user_id, ids)
            return cur.rowcount

    def delete_user(self, user_id: str) -> int:
        with self._tx() as conn:
            deleted = conn.execute(self._q("DELETE FROM {memories} WHERE user_id=%s"), (user_id,)).rowcount
            conn.execute(self._q("DELETE FROM {messages} WHERE user_id=%s"), (user_id,))
            conn.execute(self._q("DELETE FROM {leases} WHERE user_id=%s"), (user_id,))
            self._ledger.delete_user(conn, user_id)
        return deleted

    def rename_user(self, old_user_id: str, new_user_id: str) -> int:
        with self._tx() as conn:
            conn.execute(self._q("SELECT 1 FROM {memories} WHERE user_id = ANY(%s) ORDER BY id FOR UPDATE"),
                         ([old_user_id, new_user_id],))
            taken = conn.execute(self._q("SELECT 1 FROM {memories} WHERE user_id=%s UNION ALL SELECT 1 FROM "
                                         "{messages} WHERE user_id=%s LIMIT 1"), (new_user_id, new_user_id)).fetchone()
            if taken is not None or self._ledger.has_user(conn, new_user_id):
                raise ValueError("the new user id already has memories, messages or ledger entries")
            moved = conn.execute(self._q("UPDATE {memories} SET user_id=%s WHERE user_id=%s"),
                                 (new_user_id, old_user_id)).rowcount
            conn.execute(self._q("UPDATE {messages} SET user_id=%s WHERE user_id=%s"), (new_user_id, old_user_id))
            self._ledger.rename_user(conn, old_user_id, new_user_id)
            conn.execute(self._q("DELETE FROM {leases} WHERE user_id=%s"), (old_user_id,))
        return moved

    # -- the entity ledger and the profile (postgres_ledger) -----------------------------------
    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> builtins.list[Entity]:
        with self._tx() as conn:
            return self._ledger.entities(conn, user_id, ids, kind)

    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> builtins.list[EntityMention]:
        with self._tx() as conn:
            return self._ledger.mentions(conn, user_id, entity_ids, memory_ids)

    def profile_values(self, user_id: str, *, key: str | None = None,
                       current_only: bool = False) -> builtins.list[ProfileValue]:
        with self._tx() as conn:
            return self._ledger.profile_values(conn, user_id, key, current_only)

    # -- reads ------------------------------------------------------------------------------
    def get(self, user_id: str, ids: Sequence[str]) -> list[Memory]:
        if not ids:
            return []
        with self._tx() as conn:
            rows = conn.execute(self._q(f"SELECT {_MEMORY_COLUMNS} FROM {{memories}} "
                                        "WHERE user_id=%s AND id = ANY(%s)"),
                                (user_id, list(ids))).fetchall()
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
        with self._tx() as conn:
            rows = conn.execute(self._q(
                f"SELECT {_M_COLUMNS} FROM {{memories}} m WHERE {where} "
                f"ORDER BY m.created_ts {order}, m.rowid {order} LIMIT %(limit)s OFFSET %(offset)s"), params).fetchall()
        return [records.memory_from_row(r) for r in rows]

    def count(self, user_id: str, flt: MemoryFilter) -> int:
        params: dict[str, Any] = {}
        where = self._where(user_id, flt, params)
        with self._tx() as conn:
            return int(_scalar(conn.execute(self._q(f"SELECT count(*) FROM {{memories}} m WHERE {where}"), params)))

    def users(self) -> builtins.list[str]:
        with self._tx() as conn:
            rows = conn.execute(self._q(
                "SELECT user_id FROM (SELECT DISTINCT user_id FROM {memories} UNION SELECT DISTINCT user_id "
                "FROM {messages}) u ORDER BY user_id COLLATE \"C\"")).fetchall()
        return [r[0] for r in rows]

    def _memory_page(self, user_id: str | None, *, needing_vectors: bool, after: int,
                     limit: int) -> builtins.list[tuple[int, Memory]]:
        clauses = ["rowid > %(after)s"]
        if user_id is not None:
            clauses.append("user_id = %(user_id)s")
        if needing_vectors:
            clauses.append(self._NEEDS)
        with self._tx() as conn:
            rows = conn.execute(self._q(
                f"SELECT rowid, {_MEMORY_COLUMNS} FROM {{memories}} WHERE {' AND '.join(clauses)} "
                "ORDER BY rowid LIMIT %(n)s"), {"after": after, "user_id": user_id, "n": limit,
                                               "model": self.embedding_model or ""}).fetchall()
        return [(row[0], records.memory_from_row(row[1:])) for row in rows]

    _NEEDS = "(embedding_model IS NULL OR embedding_model < %(model)s OR embedding_model > %(model)s)"

    def count_needing_vectors(self) -> int:
        with self._tx() as conn:
            return int(_scalar(conn.execute(self._q(f"SELECT count(*) FROM {{memories}} WHERE {self._NEEDS}"),
                                            {"model": self.embedding_model or ""})))

    # -- search -----------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> builtins.list[Candidate]:
        want_text = bool(request.text and request.text.strip())
        model = self.embedding_model
        query_vector = None
        dim = None
        if request.vector is not None and model is not None:
            query_vector = np.asarray(request.vector, dtype=np.float32).reshape(-1)
            dim = self._dim_of(None, model)
            if dim is not None and query_vector.shape[0] != dim:
                raise ValueError(f"query vector has {query_vector.shape[0]} dimensions; the store's vectors "
                                 f"have {dim}")
        if not want_text and (dim is None or query_vector is None):
            return []
        params: dict[str, Any] = {"limit": max(1, int(request.limit))}
        where = self._where(request.user_id, request.filter, params)
        ctes = [
            self._text_ctes(request.text or "", where, params) if want_text else
            "t AS (SELECT NULL::bigint AS rowid, NULL::real AS score, NULL::bigint AS rank WHERE FALSE)",
            self._vector_ctes(query_vector, dim, model, where, params)
            if dim is not None and query_vector is not None and model is not None else
            "v AS (SELECT NULL::bigint AS rowid, NULL::float8 AS dist, NULL::bigint AS rank WHERE FALSE)",
        ]
        statement = (
            "WITH " + ", ".join(ctes) + ", "
            "hits AS (SELECT COALESCE(t.rowid, v.rowid) AS rowid, t.rank AS text_rank, t.score AS text_score, "
            "v.rank AS vector_rank, v.dist AS dist FROM t FULL OUTER JOIN v ON t.rowid = v.rowid) "
            f"SELECT h.text_rank, h.text_score, h.vector_rank, h.dist, {_M_COLUMNS} FROM hits h "
            "JOIN {memories} m ON m.rowid = h.rowid "
            "ORDER BY h.text_rank NULLS LAST, h.vector_rank NULLS LAST")
        with self._tx() as conn:
            query = self._q(statement, model_lit=sql.Literal(model), cfg_lit=sql.Literal(self.text_search_config))
            rows = conn.execute(query, params).fetchall()
        return [Candidate(
            memory=records.memory_from_row(row[4:]),
            text_rank=None if row[0] is None else int(row[0]),
            text_score=None if row[1] is None else float(row[1]),
            vector_rank=None if row[2] is None else int(row[2]),
            vector_score=None if row[3] is None else 1.0 - float(row[3])) for row in rows]

    def _text_ctes(self, text: str, where: str, params: dict[str, Any]) -> str:
        """The text channel as CTEs `q` ... `t` (rowid, score, rank)."""
        params["text"] = text
        # BM25 as the embedded store computes it (term_index.py): the user's own statistics,
        # Lucene's idf, term_index's K1 and B (passed as parameters, so the two cannot drift), a
        # memory's length = its number of distinct lexemes.
        # The rows holding each query term come from the GIN index; they give the document
        # frequencies. The average length is exact up to `_AVGDL_SAMPLE` rows per user and
        # estimated from that many of the user's rows beyond. A term's frequency in a row comes
        # from ts_rank of that term alone with unit weights: PostgreSQL returns H(tf) / H(inf)
        # there (H: the sum of 1/k^2 up to tf), and 1 / (1.6449 (1 - rank)) - 0.5 recovers tf
        # within 0.05 for every tf.
        params.update(avgdl_sample=self._AVGDL_SAMPLE, k1=K1, k1_plus_1=K1 + 1.0, b=B, one_minus_b=1.0 - B)
        # the query's terms OR-ed, written inline with the configuration as a literal so the
        # planner folds it to a constant and chooses between the user's rows and the GIN index
        tsq = "replace(plainto_tsquery({cfg_lit}::regconfig, %(text)s)::text, ' & ', ' | ')::tsquery"
        return (
            "q AS (SELECT DISTINCT lexeme AS lex, quote_literal(lexeme)::tsquery AS tq "
            "FROM unnest(to_tsvector({cfg_lit}::regconfig, %(text)s))), "
            "stats AS MATERIALIZED (SELECT (SELECT count(*) FROM {memories} m WHERE m.user_id = %(user_id)s)"
            "::float8 AS n, (SELECT GREATEST(avg(length(x.tsv)), 1) FROM (SELECT m.tsv FROM {memories} m "
            "WHERE m.user_id = %(user_id)s LIMIT %(avgdl_sample)s) x)::float8 AS avgdl), "
            f"pairs AS MATERIALIZED (SELECT m.rowid, ({where}) AS visible, length(m.tsv)::float8 AS dl, q.lex, "
            "1.0 / (1.6449340668 - 1.6449340668 * ts_rank('{{1,1,1,1}}', m.tsv, q.tq, 0)) - 0.5 AS tf "
            f"FROM {{memories}} m JOIN q ON m.tsv @@ q.tq WHERE m.user_id = %(user_id)s AND m.tsv @@ {tsq}), "
            "idf AS (SELECT p.lex, ln(1 + (s.n - count(*) + 0.5) / (count(*) + 0.5)) AS w "
            "FROM pairs p CROSS JOIN stats s GROUP BY p.lex, s.n), "
            "t0 AS (SELECT p.rowid, sum(i.w * p.tf * %(k1_plus_1)s / (p.tf + %(k1)s * (%(one_minus_b)s + %(b)s * p.dl "
            "/ s.avgdl))) AS score "
            "FROM pairs p JOIN idf i ON i.lex = p.lex CROSS JOIN stats s WHERE p.visible "
            "GROUP BY p.rowid ORDER BY score DESC, p.rowid LIMIT %(limit)s), "
            "t AS (SELECT rowid, score, row_number() OVER (ORDER BY score DESC, rowid) AS rank FROM t0)")

    def _vector_ctes(self, query_vector: np.ndarray, dim: int, model: str, where: str,
                     params: dict[str, Any]) -> str:
        """The vector channel as CTEs `small` ... `v` (rowid, dist, rank): exact on a small filtered
        set, else through the model's HNSW index."""
        params["vec"] = _PgVector(query_vector)
        params["model"] = model
        params["exact_rows"] = self.exact_vector_rows
        cast = f"m.embedding::vector({int(dim)})"
        qv = f"%(vec)s::vector({int(dim)})"
        # the partial HNSW index is chosen only when its predicate appears as a literal
        model_lit = "m.embedding_model = {model_lit}"
        vwhere = f"{where} AND {model_lit}"
        return (
            f"small AS MATERIALIZED (SELECT count(*) <= %(exact_rows)s AS yes FROM (SELECT 1 FROM {{memories}} m "
            f"WHERE {vwhere} LIMIT %(exact_rows)s + 1) s), "
            f"v_exact AS (SELECT m.rowid, ({cast} <=> {qv}) AS dist FROM {{memories}} m WHERE {vwhere} "
            f"AND (SELECT yes FROM small) ORDER BY ({cast} <=> {qv}) + 0, m.rowid LIMIT %(limit)s), "
            f"v_ann AS MATERIALIZED (SELECT m.rowid, ({cast} <=> {qv}) AS dist FROM {{memories}} m WHERE {vwhere} "
            f"AND NOT (SELECT yes FROM small) ORDER BY {cast} <=> {qv} LIMIT %(limit)s), "
            "v AS (SELECT rowid, dist, row_number() OVER (ORDER BY dist, rowid) AS rank FROM "
            "(SELECT * FROM v_exact UNION ALL SELECT * FROM v_ann) u)")

    # -- the durable message log ------------------------------------------------------------------
    def _log(self, rows: Sequence[tuple[Any, ...]], memories: Sequence[Memory], vectors: VectorRows | None,
             ledger: LedgerChanges | None = None) -> None:
        with self._tx() as conn:
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(self._q(_INSERT_MESSAGE), rows)
            self._put_in(conn, memories, vectors)
            if ledger is not None:
                self._ledger.apply(conn, ledger)

    def _lock_messages(self, conn: psycopg.Connection, ids: Sequence[str]) -> None:
        """Lock message rows in id order before changing them (no lock-order deadlocks)."""
        conn.execute(self._q("SELECT 1 FROM {messages} WHERE id = ANY(%s) ORDER BY id FOR UPDATE"),
                     (sorted(set(ids)),))

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
        with self._tx() as conn:
            rows = conn.execute(self._q(f"SELECT {_MESSAGE_COLUMNS} FROM {{messages}} WHERE {' AND '.join(clauses)} "
                                        f"ORDER BY seq {order} LIMIT %(n)s"), params).fetchall()
        return [records.message_from_row(r) for r in rows]

    def _set_message_state(self, ids: Sequence[str], state: str) -> None:
        if not ids:
            return
        with self._tx() as conn:
            self._lock_messages(conn, ids)
            conn.execute(self._q("UPDATE {messages} SET state=%s, attempts = attempts + (CASE WHEN %s = %s "
                                 "THEN 1 ELSE 0 END) WHERE id = ANY(%s)"), (state, state, FAILED, sorted(set(ids))))

    def _message_page(self, user_id: str, *, after_seq: int, limit: int) -> builtins.list[StoredMessage]:
        with self._tx() as conn:
            rows = conn.execute(self._q(f"SELECT {_MESSAGE_COLUMNS} FROM {{messages}} "
                                        "WHERE user_id = %s AND seq > %s ORDER BY seq LIMIT %s"),
                                (user_id, after_seq, limit)).fetchall()
        return [records.message_from_row(r) for r in rows]

    def vectors_of(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        with self._tx() as conn:
            rows = conn.execute(self._q("SELECT id, embedding::real[] FROM {memories} "
                                        "WHERE user_id = %s AND id = ANY(%s) AND embedding IS NOT NULL"),
                                (user_id, list(ids))).fetchall()
        return {memory_id: np.asarray(values, dtype=np.float32) for memory_id, values in rows}

    def users_with_pending(self) -> builtins.list[str]:
        with self._tx() as conn:
            return [r[0] for r in
                    conn.execute(self._q("SELECT DISTINCT user_id FROM {messages} WHERE state=%s"), (PENDING,))]

    def overview(self) -> StoreOverview:
        """Counts of messages per state, users and memories per type (`storage.overview`)."""
        with self._tx() as conn:
            return sql_overview(lambda query: conn.execute(query).fetchall(), self._q)

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

