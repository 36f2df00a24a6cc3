"""The entity ledger and the profile in the SQLite store: three tables beside the memories, written
inside the store's write transactions (`apply`), read with plain indexed queries.

- ``entities``: one row per entity (id unique in the store), its names as JSON text;
- ``mentions``: one row per (entity, memory), with the times said and of the event as ISO text
  beside epoch seconds (the figures are aggregated on those);
- ``profile``: one row per profile value, current or replaced.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Sequence

from ..types import Entity, EntityMention, ProfileValue
from . import ledger_records as lr
from .base import LedgerChanges
from .timecodes import epoch_seconds

DDL = """
CREATE TABLE IF NOT EXISTS entities (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    aliases TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS entities_user ON entities(user_id, kind);
CREATE TABLE IF NOT EXISTS mentions (
    entity_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    said_at TEXT NOT NULL,
    event_at TEXT,
    counted INTEGER NOT NULL,
    said_ts REAL NOT NULL,
    event_ts REAL,
    PRIMARY KEY (entity_id, memory_id)
);
CREATE INDEX IF NOT EXISTS mentions_memory ON mentions(memory_id);
CREATE INDEX IF NOT EXISTS mentions_user ON mentions(user_id, entity_id);
CREATE TABLE IF NOT EXISTS profile (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    valid_from TEXT,
    valid_to TEXT,
    source_ids TEXT NOT NULL DEFAULT '[]',
    set_by TEXT NOT NULL,
    superseded_by TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS profile_user_key ON profile(user_id, key)
"""
TABLES = tuple(lr.WRITES)  # entities, mentions, profile

_E = ", ".join(lr.ENTITY_COLUMNS)
_M = ", ".join(lr.MENTION_COLUMNS)
_P = ", ".join(lr.PROFILE_COLUMNS)


_UPSERT_ENTITY, _UPSERT_MENTION, _UPSERT_PROFILE = (lr.upsert_sql(t, t, "?") for t in TABLES)


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def _owned(conn: sqlite3.Connection, table: str, user_id: str, ids: Sequence[str]) -> set[str]:
    """Which of `ids` are rows of `table` of the user (in chunks below SQLite's parameter bound)."""
    found: set[str] = set()
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start:start + 500]
        found.update(r[0] for r in conn.execute(
            f"SELECT id FROM {table} WHERE user_id=? AND id IN ({_marks(chunk)})", [user_id, *chunk]))
    return found


def _foreign(conn: sqlite3.Connection, table: str, user_id: str, ids: Sequence[str]) -> None:
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start:start + 500]
        row = conn.execute(f"SELECT id FROM {table} WHERE user_id<>? AND id IN ({_marks(chunk)}) LIMIT 1",
                           [user_id, *chunk]).fetchone()
        if row is not None:
            raise ValueError(f"{table} id {row[0]!r} belongs to another user")


def apply(conn: sqlite3.Connection, changes: LedgerChanges) -> None:
    """Write `changes` inside the caller's write transaction (after the call's memories);
    `ValueError` (the caller rolls back) on an id of another user or a mention of a memory or an
    entity that is not the user's."""
    user = changes.user_id
    _foreign(conn, "entities", user, [e.id for e in changes.entities])
    _foreign(conn, "profile", user, [p.id for p in changes.profile])
    conn.executemany(_UPSERT_ENTITY, (lr.entity_values(e) for e in changes.entities))
    removed = list(dict.fromkeys(changes.removed_entities))
    for start in range(0, len(removed), 500):
        chunk = removed[start:start + 500]
        conn.execute(f"DELETE FROM mentions WHERE user_id=? AND entity_id IN ({_marks(chunk)})", [user, *chunk])
        conn.execute(f"DELETE FROM entities WHERE user_id=? AND id IN ({_marks(chunk)})", [user, *chunk])
    delete_mentions_of(conn, user, list(dict.fromkeys(changes.relinked_memories)))
    if changes.mentions:
        memories = _owned(conn, "memories", user, [m.memory_id for m in changes.mentions])
        entities = _owned(conn, "entities", user, [m.entity_id for m in changes.mentions])
        lr.refuse_unknown(lr.unknown_mentions(changes, memories, entities), user)
        conn.executemany(_UPSERT_MENTION, ((*lr.mention_values(m), epoch_seconds(m.said_at),
                                            epoch_seconds(m.event_at)) for m in changes.mentions))
    conn.executemany(_UPSERT_PROFILE, (lr.profile_row(p) for p in changes.profile))


def delete_mentions_of(conn: sqlite3.Connection, user_id: str, memory_ids: Sequence[str]) -> None:
    """Remove the mentions of `memory_ids` (deleted, or relinked: inside the caller's transaction)."""
    for start in range(0, len(memory_ids), 500):
        chunk = list(memory_ids[start:start + 500])
        conn.execute(f"DELETE FROM mentions WHERE user_id=? AND memory_id IN ({_marks(chunk)})", [user_id, *chunk])


def delete_user(conn: sqlite3.Connection, user_id: str) -> None:
    for table in TABLES:
        conn.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))


def rename_user(conn: sqlite3.Connection, old_user_id: str, new_user_id: str) -> None:
    for table in TABLES:
        conn.execute(f"UPDATE {table} SET user_id=? WHERE user_id=?", (new_user_id, old_user_id))


def has_user(conn: sqlite3.Connection, user_id: str) -> bool:
    return any(conn.execute(f"SELECT 1 FROM {table} WHERE user_id=? LIMIT 1", (user_id,)).fetchone()
               for table in TABLES)


def _in(column: str, values: Sequence[str] | None, clauses: list[str], params: list[Any]) -> None:
    if values is not None:
        clauses.append(f"{column} IN ({_marks(values) or 'NULL'})")
        params.extend(values)


_FIGURES = ("SELECT entity_id, SUM(counted), COALESCE(MIN(CASE WHEN counted THEN said_ts END), MIN(said_ts)), "
            "COALESCE(MAX(CASE WHEN counted THEN said_ts END), MAX(said_ts)), MAX(event_ts) FROM mentions ")


def entities(conn: sqlite3.Connection, user_id: str, ids: Sequence[str] | None, kind: str | None) -> list[Entity]:
    clauses, params = ["user_id=?"], [user_id]
    _in("id", None if ids is None else list(ids), clauses, params)
    if kind is not None:
        clauses.append("kind=?")
        params.append(lr.kind_value(kind))
    rows = conn.execute(f"SELECT {_E} FROM entities WHERE {' AND '.join(clauses)} ORDER BY id", params).fetchall()
    if not rows:
        return []
    m_clauses, m_params = ["user_id=?"], [user_id]
    _in("entity_id", None if ids is None else [r[0] for r in rows], m_clauses, m_params)
    figures = {r[0]: lr.figures_from(*r[1:]) for r in conn.execute(
        _FIGURES + f"WHERE {' AND '.join(m_clauses)} GROUP BY entity_id", m_params)}
    return [lr.entity_from_row(r, figures.get(r[0])) for r in rows]


def mentions(conn: sqlite3.Connection, user_id: str, entity_ids: Sequence[str] | None,
             memory_ids: Sequence[str] | None) -> list[EntityMention]:
    clauses, params = ["user_id=?"], [user_id]
    _in("entity_id", None if entity_ids is None else list(entity_ids), clauses, params)
    _in("memory_id", None if memory_ids is None else list(memory_ids), clauses, params)
    rows = conn.execute(f"SELECT {_M} FROM mentions WHERE {' AND '.join(clauses)} "
                        "ORDER BY entity_id, said_ts, memory_id", params).fetchall()
    return lr.mention_order(lr.mention_from_row(r) for r in rows)


def profile_values(conn: sqlite3.Connection, user_id: str, key: str | None,
                   current_only: bool) -> list[ProfileValue]:
    clauses, params = ["user_id=?"], [user_id]
    if key is not None:
        clauses.append("key=?")
        params.append(key)
    if current_only:
        clauses.append("valid_to IS NULL AND superseded_by IS NULL")
    rows = conn.execute(f"SELECT {_P} FROM profile WHERE {' AND '.join(clauses)}", params).fetchall()
    return lr.profile_order(lr.profile_from_row(r) for r in rows)
