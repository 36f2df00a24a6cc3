"""The partitioned layout of the PostgreSQL store (``store.partitions: N``): every per-user table
split into N partitions by a hash of ``user_id``, so each statement about one user reads and writes
one partition (PostgreSQL prunes the others at plan time).

Chosen when the tables are created, and recorded in the store's meta (`LAYOUT_KEY`); an existing
store keeps its layout (`migrate` copies a store into the other layout). What changes against the
unpartitioned layout (`postgres_store._MIGRATIONS`), because PostgreSQL requires every primary key
and unique constraint of a partitioned table to include the partition key:

- keys: ``memories`` (rowid, user_id) and unique (user_id, id); ``messages`` (seq, user_id) and
  unique (user_id, id); ``entities`` and ``profile`` (user_id, id); ``mentions`` (user_id, entity_id,
  memory_id). Every upsert names those keys (`conflict_key`) and every statement that finds rows
  by id also names their user.
- ids stay unique across users, as in the unpartitioned layout: ``owners`` (not partitioned) maps
  each memory, message, entity and profile id to its user (`claim`), under its primary key, so two
  writers of one id for two users cannot both succeed; the calls that name rows by id alone
  (`set_vectors`, `mark_messages`, a consolidation's done messages) find their users there.
- the statistics triggers and the write order ``seq`` take a per-user advisory lock (held to
  commit) instead of one lock for the whole store: writers of different users no longer wait for
  each other, and a user's rows still get their ``seq`` in commit order. Every write transaction
  takes the locks of all the users it writes first, in user order (`lock_users`), so no two
  writers wait on each other's locks.
- a message logged without its ``owners`` row (by a release before this layout) is still found by
  id, reading every partition for it (`PostgresStore._messages_by_user`).

The schema is created at version `DDL_VERSION` in one go (`ddl`); the store then runs the
migrations of later versions on it as on any store (their tables are not per-user partitions:
the tool counters of version 5 are one table, keyed by user).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import psycopg
from psycopg import sql

from ..settings import MAX_PARTITIONS

DDL_VERSION = 4  # the schema version `ddl` creates
LAYOUT_KEY = "partitions"  # meta key: the number of hash partitions (absent: unpartitioned)
# owners' kinds: a memory, a logged message, an entity, a profile value
MEMORY, MESSAGE, ENTITY, PROFILE = "m", "g", "e", "p"

# per-user tables: (name, columns and constraints)
_TABLES: list[tuple[str, str]] = [
    ("memories", """rowid bigint GENERATED ALWAYS AS IDENTITY,
        id text NOT NULL,
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
        terms tsvector NOT NULL DEFAULT '',
        dl integer NOT NULL DEFAULT 0,
        ann boolean NOT NULL DEFAULT false,
        seq bigint,
        PRIMARY KEY (rowid, user_id),
        UNIQUE (user_id, id)"""),
    ("messages", """seq bigint GENERATED ALWAYS AS IDENTITY,
        id text NOT NULL,
        user_id text NOT NULL,
        agent_id text NOT NULL,
        session_id text,
        role text NOT NULL,
        name text,
        content text NOT NULL,
        timestamp text NOT NULL,
        metadata text NOT NULL DEFAULT '{{}}',
        state text NOT NULL DEFAULT 'pending',
        attempts integer NOT NULL DEFAULT 0,
        PRIMARY KEY (seq, user_id),
        UNIQUE (user_id, id)"""),
    ("leases", "user_id text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL"),
    ("entities", """id text NOT NULL,
        user_id text NOT NULL,
        name text NOT NULL,
        kind text NOT NULL,
        aliases text NOT NULL DEFAULT '[]',
        created_at text NOT NULL,
        updated_at text NOT NULL,
        metadata text NOT NULL DEFAULT '{{}}',
        PRIMARY KEY (user_id, id)"""),
    ("mentions", """entity_id text NOT NULL,
        memory_id text NOT NULL,
        user_id text NOT NULL,
        said_at text NOT NULL,
        event_at text,
        counted boolean NOT NULL,
        said_ts timestamptz NOT NULL,
        event_ts timestamptz,
        PRIMARY KEY (user_id, entity_id, memory_id)"""),
    ("profile", """id text NOT NULL,
        user_id text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        valid_from text,
        valid_to text,
        source_ids text NOT NULL DEFAULT '[]',
        set_by text NOT NULL,
        superseded_by text,
        created_at text NOT NULL,
        updated_at text NOT NULL,
        PRIMARY KEY (user_id, id)"""),
    ("user_sizes", "user_id text PRIMARY KEY, n bigint NOT NULL, dl_sum bigint NOT NULL"),
    ("user_terms", "user_id text NOT NULL, term text NOT NULL, df bigint NOT NULL, PRIMARY KEY (user_id, term)"),
]
TABLES = tuple(name for name, _ in _TABLES)

_INDEXES = [
    "CREATE INDEX {p}mem_user_time ON {p}memories (user_id, created_ts, rowid)",
    "CREATE INDEX {p}mem_user_event ON {p}memories (user_id, event_start_ts, event_end_ts) "
    "WHERE event_start_ts IS NOT NULL",
    "CREATE INDEX {p}mem_user_agent ON {p}memories (user_id, agent_id)",
    "CREATE INDEX {p}mem_user_session ON {p}memories (user_id, session_id) WHERE session_id IS NOT NULL",
    "CREATE INDEX {p}mem_user_type_status ON {p}memories (user_id, type, status)",
    "CREATE INDEX {p}mem_model ON {p}memories (embedding_model)",
    "CREATE INDEX {p}mem_terms ON {p}memories USING gin (terms)",
    "CREATE INDEX {p}mem_user_dl ON {p}memories (user_id, dl)",
    "CREATE INDEX {p}mem_user_ann ON {p}memories (user_id, ann)",
    "CREATE INDEX {p}mem_user_seq ON {p}memories (user_id, seq)",
    "CREATE INDEX {p}msg_user_state ON {p}messages (user_id, state, seq)",
    "CREATE INDEX {p}msg_pending ON {p}messages (user_id) WHERE state = 'pending'",
    "CREATE INDEX {p}ent_user ON {p}entities (user_id, kind)",
    "CREATE INDEX {p}men_memory ON {p}mentions (user_id, memory_id)",
    "CREATE INDEX {p}prof_user_key ON {p}profile (user_id, key)",
    # vectors inline in the row (see the unpartitioned layout's schema version 3)
    "ALTER TABLE {p}memories ALTER COLUMN embedding SET STORAGE MAIN",
    "CREATE TABLE {p}owners (kind text NOT NULL, id text NOT NULL, user_id text NOT NULL, PRIMARY KEY (kind, id))",
    "CREATE INDEX {p}owners_user ON {p}owners (user_id)",
]

# the statistics (see `postgres_search.STATS_DDL`), each trigger locking the users of its rows
_DELTAS = {
    "ins": ("SELECT user_id, 1 AS sign, dl, terms FROM new_rows", "INSERT", "NEW TABLE AS new_rows"),
    "del": ("SELECT user_id, -1 AS sign, dl, terms FROM old_rows", "DELETE", "OLD TABLE AS old_rows"),
    "upd": ("SELECT user_id, -1 AS sign, dl, terms FROM old_rows UNION ALL "
            "SELECT user_id, 1 AS sign, dl, terms FROM new_rows", "UPDATE",
            "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
}


def _user_lock(user: str) -> str:
    return f"pg_advisory_xact_lock(hashtext('{{p}}user:' || {user}))"


def _statistics_ddl() -> list[str]:
    steps = [
        "CREATE SEQUENCE {p}memories_seq",
        "CREATE OR REPLACE FUNCTION {p}write_seq() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"PERFORM {_user_lock('NEW.user_id')}; "
        "NEW.seq := nextval('{p}memories_seq'); RETURN NEW; END $$",
        "CREATE TRIGGER {p}write_seq BEFORE INSERT OR UPDATE ON {p}memories "
        "FOR EACH ROW EXECUTE FUNCTION {p}write_seq()",
    ]
    for name, (rows, event, tables) in _DELTAS.items():
        steps += [
            f"CREATE OR REPLACE FUNCTION {{p}}stats_{name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"PERFORM count({_user_lock('u.user_id')}) FROM (SELECT DISTINCT user_id FROM ({rows}) d "
            "ORDER BY user_id) u; "
            f"INSERT INTO {{p}}user_sizes AS s (user_id, n, dl_sum) SELECT user_id, sum(sign), sum(sign * dl) "
            f"FROM ({rows}) d GROUP BY user_id HAVING sum(sign) <> 0 OR sum(sign * dl) <> 0 ORDER BY user_id "
            "ON CONFLICT (user_id) DO UPDATE SET n = s.n + excluded.n, dl_sum = s.dl_sum + excluded.dl_sum; "
            f"INSERT INTO {{p}}user_terms AS s (user_id, term, df) SELECT d.user_id, t.lexeme, sum(d.sign) "
            f"FROM ({rows}) d, unnest(d.terms) t GROUP BY 1, 2 HAVING sum(d.sign) <> 0 ORDER BY 1, 2 "
            "ON CONFLICT (user_id, term) DO UPDATE SET df = s.df + excluded.df; RETURN NULL; END $$",
            f"CREATE TRIGGER {{p}}stats_{name} AFTER {event} ON {{p}}memories REFERENCING {tables} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {{p}}stats_{name}()",
        ]
    return steps


def ddl(partitions: int) -> list[str]:
    """The partitioned schema (`{p}`: the table prefix), at the current schema version."""
    steps = []
    for name, body in _TABLES:
        steps.append(f"CREATE TABLE {{p}}{name} ({body}) PARTITION BY HASH (user_id)")
        storage = " WITH (toast_tuple_target = 8160)" if name == "memories" else ""
        steps += [f"CREATE TABLE {{p}}{name}_p{i} PARTITION OF {{p}}{name} "
                  f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i}){storage}" for i in range(partitions)]
    return steps + _INDEXES + _statistics_ddl()


def check_partitions(value: Any) -> int:
    """`value` as a number of partitions (0: unpartitioned); `ValueError` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be a whole number from 0 to {MAX_PARTITIONS}, not {value!r}")
    return value


def conflict_key(key: Sequence[str]) -> tuple[str, ...]:
    """A table's upsert key in the partitioned layout: its user first (an id is unique per user there;
    `claim` keeps it unique across users)."""
    return tuple(key) if key[0] == "user_id" else ("user_id", *key)


def lock_users(conn: psycopg.Connection, prefix: str, users: Iterable[str]) -> None:
    """Take the per-user write locks of `users` (held to commit) in user order."""
    ordered = sorted(set(users))
    if ordered:
        conn.execute("SELECT count(pg_advisory_xact_lock(hashtext(k))) FROM (SELECT %s || u AS k "
                     "FROM unnest(%s::text[]) u ORDER BY u) x", (prefix + "user:", ordered))


def claim(conn: psycopg.Connection, owners: sql.Identifier, kind: str, pairs: Iterable[tuple[str, str]]) -> str | None:
    """Record the owner of each (id, user) of `kind` not yet recorded; the first id that is another
    user's (the caller refuses it), or None. New ids cost one statement; the ids already recorded
    are then read back by primary key (in a statement of their own, so one that another writer
    recorded meanwhile is seen)."""
    given = sorted(set(pairs))
    owner = dict(given)
    if len(owner) < len(given):  # one id for two users in the same call
        return next(i for (i, _), (j, _) in zip(given, given[1:]) if i == j)
    if not owner:
        return None
    ids = list(owner)
    new = conn.execute(sql.SQL("INSERT INTO {owners} (kind, id, user_id) SELECT %s, i, u FROM unnest(%s::text[], "
                               "%s::text[]) AS x(i, u) ON CONFLICT (kind, id) DO NOTHING RETURNING id")
                       .format(owners=owners), (kind, ids, [owner[i] for i in ids])).fetchall()
    known = sorted(set(ids).difference(r[0] for r in new))
    if not known:
        return None
    rows = conn.execute(sql.SQL("SELECT id, user_id FROM {owners} WHERE kind = %s AND id = ANY(%s)")
                        .format(owners=owners), (kind, known)).fetchall()
    return min((str(i) for i, user in rows if user != owner[i]), default=None)


def owners_of(conn: psycopg.Connection, owners: sql.Identifier, kind: str,
              ids: Sequence[str]) -> dict[str, list[str]]:
    """The ids of `kind` recorded in `owners`, by user (users in order, ids sorted)."""
    rows = conn.execute(sql.SQL("SELECT user_id, array_agg(id ORDER BY id) FROM {owners} WHERE kind = %s "
                                "AND id = ANY(%s) GROUP BY user_id ORDER BY user_id").format(owners=owners),
                        (kind, sorted(set(ids)))).fetchall()
    return {str(user): list(found) for user, found in rows}


def release(conn: psycopg.Connection, owners: sql.Identifier, kind: str, user_id: str, ids: Sequence[str]) -> None:
    """Forget the owner of the user's ids of `kind` (deleted)."""
    conn.execute(sql.SQL("DELETE FROM {owners} WHERE kind = %s AND user_id = %s AND id = ANY(%s)")
                 .format(owners=owners), (kind, user_id, sorted(set(ids))))
