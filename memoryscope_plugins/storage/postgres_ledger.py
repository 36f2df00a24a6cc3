"""The entity ledger and the profile in the PostgreSQL store: three tables beside the memories
(``<prefix>entities``, ``<prefix>mentions``, ``<prefix>profile``, made by schema version 2),
written inside the store's transactions (`apply`); the mention figures are aggregated in SQL.
"""

from __future__ import annotations

from typing import Any, Sequence

import psycopg
from psycopg import sql

from ..types import Entity, EntityMention, ProfileValue
from . import ledger_records as lr, postgres_partitions as parts
from .base import LedgerChanges, LedgerEdit
from .core import BoundReader
from .timecodes import aware

# schema version 2: `{p}` is the table prefix
MIGRATION = [
    """CREATE TABLE IF NOT EXISTS {p}entities (
        id text PRIMARY KEY,
        user_id text NOT NULL,
        name text NOT NULL,
        kind text NOT NULL,
        aliases text NOT NULL DEFAULT '[]',
        created_at text NOT NULL,
        updated_at text NOT NULL,
        metadata text NOT NULL DEFAULT '{{}}'
    )""",
    "CREATE INDEX IF NOT EXISTS {p}ent_user ON {p}entities (user_id, kind)",
    """CREATE TABLE IF NOT EXISTS {p}mentions (
        entity_id text NOT NULL,
        memory_id text NOT NULL,
        user_id text NOT NULL,
        said_at text NOT NULL,
        event_at text,
        counted boolean NOT NULL,
        said_ts timestamptz NOT NULL,
        event_ts timestamptz,
        PRIMARY KEY (entity_id, memory_id)
    )""",
    "CREATE INDEX IF NOT EXISTS {p}men_memory ON {p}mentions (memory_id)",
    "CREATE INDEX IF NOT EXISTS {p}men_user ON {p}mentions (user_id, entity_id)",
    """CREATE TABLE IF NOT EXISTS {p}profile (
        id text PRIMARY KEY,
        user_id text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        valid_from text,
        valid_to text,
        source_ids text NOT NULL DEFAULT '[]',
        set_by text NOT NULL,
        superseded_by text,
        created_at text NOT NULL,
        updated_at text NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS {p}prof_user_key ON {p}profile (user_id, key)",
]
TABLES = tuple(lr.WRITES)  # entities, mentions, profile


_UPSERT_ENTITY, _UPSERT_MENTION, _UPSERT_PROFILE = (lr.upsert_sql(f"{{{t}}}", t, "%s") for t in TABLES)
# the partitioned layout's (`postgres_partitions`): on keys that start with the user
_UPSERTS_PARTITIONED = {t: lr.upsert_sql(f"{{{t}}}", t, "%s", parts.conflict_key(lr.WRITES[t][1])) for t in TABLES}
_OWNER_KIND = {"entities": parts.ENTITY, "profile": parts.PROFILE}
_FIGURES = ("SELECT entity_id, count(*) FILTER (WHERE counted), "
            "COALESCE(min(said_ts) FILTER (WHERE counted), min(said_ts)), "
            "COALESCE(max(said_ts) FILTER (WHERE counted), max(said_ts)), max(event_ts) FROM {mentions} ")


class PostgresLedger:
    """The ledger's statements for one table prefix; every method runs on the caller's connection
    (inside its transaction)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.names = {t: sql.Identifier(prefix + t) for t in (*TABLES, "memories", "messages", "owners")}
        self.partitioned = False  # the store's layout, set when it opens

    def _upsert(self, table: str, default: str) -> sql.Composed:
        return self.q(_UPSERTS_PARTITIONED[table] if self.partitioned else default)

    def q(self, template: str) -> sql.Composed:
        return sql.SQL(template).format(**self.names)

    def apply(self, conn: psycopg.Connection, changes: LedgerChanges) -> None:
        """Write `changes` after the call's memories; `ValueError` (the caller's transaction rolls
        back) on an id of another user or a mention of a memory or entity that is not the user's."""
        user = changes.user_id
        self._foreign(conn, "entities", user, [e.id for e in changes.entities])
        self._foreign(conn, "profile", user, [p.id for p in changes.profile])
        with conn.cursor() as cur:
            if changes.entities:
                # rows in key order, so concurrent writers take their row locks in one order
                cur.executemany(self._upsert("entities", _UPSERT_ENTITY),
                                [lr.entity_values(e) for e in sorted(changes.entities, key=lambda e: e.id)])
            if changes.removed_entities:
                removed = sorted(set(changes.removed_entities))
                cur.execute(self.q("DELETE FROM {mentions} WHERE user_id = %s AND entity_id = ANY(%s)"),
                            (user, removed))
                cur.execute(self.q("DELETE FROM {entities} WHERE user_id = %s AND id = ANY(%s)"), (user, removed))
                if self.partitioned:
                    parts.release(conn, self.names["owners"], parts.ENTITY, user, removed)
            if changes.relinked_memories:
                self.delete_mentions_of(conn, user, changes.relinked_memories)
            if changes.mentions:
                memories = self._owned(conn, "memories", user, [m.memory_id for m in changes.mentions])
                entities = self._owned(conn, "entities", user, [m.entity_id for m in changes.mentions])
                lr.refuse_unknown(lr.unknown_mentions(changes, memories, entities), user)
                cur.executemany(self._upsert("mentions", _UPSERT_MENTION), [
                    (*lr.mention_values(m), aware(m.said_at), aware(m.event_at))
                    for m in sorted(changes.mentions, key=lambda m: (m.entity_id, m.memory_id))])
            if changes.profile:
                cur.executemany(self._upsert("profile", _UPSERT_PROFILE),
                                [lr.profile_row(p) for p in sorted(changes.profile, key=lambda p: p.id)])

    def edit(self, conn: psycopg.Connection, user_id: str, edit: LedgerEdit) -> LedgerChanges | None:
        """`StoreBase._edit_ledger` in the caller's transaction: a per-user advisory lock held to
        its commit serialises the edits of one user (each reads after the previous one committed)."""
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self.prefix}ledger:{user_id}",))
        changes = edit(BoundReader(self, conn))
        if changes is not None:
            self.apply(conn, changes)
        return changes

    def _owned(self, conn: psycopg.Connection, table: str, user_id: str, ids: Sequence[str]) -> set[str]:
        rows = conn.execute(self.q(f"SELECT id FROM {{{table}}} WHERE user_id = %s AND id = ANY(%s)"),
                            (user_id, sorted(set(ids)))).fetchall()
        return {r[0] for r in rows}

    def _foreign(self, conn: psycopg.Connection, table: str, user_id: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        if self.partitioned:  # each id's owner recorded (or found) in `owners`
            taken = parts.claim(conn, self.names["owners"], _OWNER_KIND[table], ((i, user_id) for i in ids))
            if taken is not None:
                raise ValueError(f"{table} id {taken!r} belongs to another user")
            return
        row = conn.execute(self.q(f"SELECT id FROM {{{table}}} WHERE user_id <> %s AND id = ANY(%s) LIMIT 1"),
                           (user_id, sorted(set(ids)))).fetchone()
        if row is not None:
            raise ValueError(f"{table} id {row[0]!r} belongs to another user")

    def delete_mentions_of(self, conn: psycopg.Connection, user_id: str, memory_ids: Sequence[str]) -> None:
        conn.execute(self.q("DELETE FROM {mentions} WHERE user_id = %s AND memory_id = ANY(%s)"),
                     (user_id, sorted(set(memory_ids))))

    def delete_user(self, conn: psycopg.Connection, user_id: str) -> None:
        for table in TABLES:
            conn.execute(self.q(f"DELETE FROM {{{table}}} WHERE user_id = %s"), (user_id,))

    def rename_user(self, conn: psycopg.Connection, old_user_id: str, new_user_id: str) -> None:
        for table in TABLES:
            conn.execute(self.q(f"UPDATE {{{table}}} SET user_id = %s WHERE user_id = %s"), (new_user_id, old_user_id))

    def has_user(self, conn: psycopg.Connection, user_id: str) -> bool:
        return any(conn.execute(self.q(f"SELECT 1 FROM {{{table}}} WHERE user_id = %s LIMIT 1"),
                                (user_id,)).fetchone() for table in TABLES)

    # -- reads ---------------------------------------------------------------------------------
    def entities(self, conn: psycopg.Connection, user_id: str, ids: Sequence[str] | None,
                 kind: str | None) -> list[Entity]:
        params: dict[str, Any] = {"user": user_id, "ids": None if ids is None else list(ids),
                                  "kind": None if kind is None else lr.kind_value(kind)}
        where = "user_id = %(user)s" + (" AND id = ANY(%(ids)s)" if ids is not None else "") + (
            " AND kind = %(kind)s" if kind is not None else "")
        rows = conn.execute(self.q(f"SELECT {', '.join(lr.ENTITY_COLUMNS)} FROM {{entities}} WHERE {where} "
                                   'ORDER BY id COLLATE "C"'), params).fetchall()
        if not rows:
            return []
        figures = {r[0]: lr.figures_from(*r[1:]) for r in conn.execute(
            self.q(_FIGURES + "WHERE user_id = %s AND entity_id = ANY(%s) GROUP BY entity_id"),
            (user_id, [r[0] for r in rows]))}
        return [lr.entity_from_row(r, figures.get(r[0])) for r in rows]

    def mentions(self, conn: psycopg.Connection, user_id: str, entity_ids: Sequence[str] | None,
                 memory_ids: Sequence[str] | None) -> list[EntityMention]:
        where = "user_id = %(user)s"
        if entity_ids is not None:
            where += " AND entity_id = ANY(%(entities)s)"
        if memory_ids is not None:
            where += " AND memory_id = ANY(%(memories)s)"
        rows = conn.execute(self.q(f"SELECT {', '.join(lr.MENTION_COLUMNS)} FROM {{mentions}} WHERE {where}"), {
            "user": user_id, "entities": None if entity_ids is None else list(entity_ids),
            "memories": None if memory_ids is None else list(memory_ids)}).fetchall()
        return lr.mention_order(lr.mention_from_row(r) for r in rows)

    def profile_values(self, conn: psycopg.Connection, user_id: str, key: str | None,
                       current_only: bool) -> list[ProfileValue]:
        where = "user_id = %(user)s" + (" AND key = %(key)s" if key is not None else "")
        if current_only:
            where += " AND valid_to IS NULL AND superseded_by IS NULL"
        rows = conn.execute(self.q(f"SELECT {', '.join(lr.PROFILE_COLUMNS)} FROM {{profile}} WHERE {where}"),
                            {"user": user_id, "key": key}).fetchall()
        return lr.profile_order(lr.profile_from_row(r) for r in rows)
