"""The entity ledger and the profile as every backend keeps them, written once: their columns, how
an item becomes a row and a row an item, the checks every write makes, and the mention figures.

Encoding as in `records`: times as exact ISO text (`timecodes.iso`) beside a comparable number
the backend adds for the mention times, lists and metadata as JSON text, `counted` as a bool (a
backend converts it to its own type).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from ..errors import StaleLedgerError
from ..types import Entity, EntityKind, EntityMention, ProfileValue
from .base import LedgerChanges
from .timecodes import iso, parse_iso

# the order `entity_from_row` reads and `entity_values` writes
ENTITY_COLUMNS = ("id", "user_id", "name", "kind", "aliases", "created_at", "updated_at", "metadata")
# the order `mention_from_row` reads and `mention_values` writes
MENTION_COLUMNS = ("entity_id", "memory_id", "user_id", "said_at", "event_at", "counted")
# the order `profile_from_row` reads and `profile_row` writes
PROFILE_COLUMNS = ("id", "user_id", "key", "value", "valid_from", "valid_to", "source_ids", "set_by",
                   "superseded_by", "created_at", "updated_at")

_KINDS = {k.value: k for k in EntityKind}
# what the SQL stores write per table: the shared columns (the mentions' comparable times after
# them) and the key an upsert replaces on
WRITES = {"entities": (ENTITY_COLUMNS, ("id",)),
          "mentions": ((*MENTION_COLUMNS, "said_ts", "event_ts"), ("entity_id", "memory_id")),
          "profile": (PROFILE_COLUMNS, ("id",))}


def upsert_sql(table: str, name: str, mark: str, key: Sequence[str] | None = None) -> str:
    """The SQL stores' upsert of one `WRITES` table (`name`) as `table` (its name in the statement)
    with parameter marker `mark`, on the table's key (or `key`); a row of another user is left as it
    is (the store has refused such ids before)."""
    columns, key = WRITES[name][0], key or WRITES[name][1]
    sets = ", ".join(f"{c}=excluded.{c}" for c in columns if c not in key and c != "user_id")
    return (f"INSERT INTO {table} AS t ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sets} WHERE t.user_id = excluded.user_id")


def _list(value: Any) -> list:
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str) else list(value)


def kind_value(kind: str | EntityKind) -> str:
    """A kind asked for (`EntityKind` or its text) as the text stored."""
    return str(getattr(kind, "value", kind))


def entity_values(entity: Entity) -> tuple[Any, ...]:
    """An entity's values in `ENTITY_COLUMNS` order (the mention figures are never written)."""
    return (entity.id, entity.user_id, entity.name, EntityKind(entity.kind).value,
            json.dumps(list(entity.aliases), ensure_ascii=False), iso(entity.created_at), iso(entity.updated_at),
            json.dumps(entity.metadata, default=str, ensure_ascii=False))


def entity_from_row(row: Sequence[Any], figures: Figures | None = None) -> Entity:
    """An entity from its values in `ENTITY_COLUMNS` order, with its mention figures when given."""
    # a kind this release does not know (written by a newer one) reads as unknown, never as a wrong kind
    entity = Entity(id=row[0], user_id=row[1], name=row[2], kind=_KINDS.get(row[3], EntityKind.UNKNOWN),
                    aliases=_list(row[4]), created_at=datetime.fromisoformat(row[5]),
                    updated_at=datetime.fromisoformat(row[6]), metadata=json.loads(row[7]) if row[7] else {})
    if figures is not None:
        entity.mention_count = figures.count
        entity.first_mentioned_at, entity.last_mentioned_at = figures.first, figures.last
        entity.last_event_at = figures.last_event
    return entity


def mention_values(mention: EntityMention) -> tuple[Any, ...]:
    """A mention's values in `MENTION_COLUMNS` order."""
    return (mention.entity_id, mention.memory_id, mention.user_id, iso(mention.said_at), iso(mention.event_at),
            bool(mention.counted))


def mention_from_row(row: Sequence[Any]) -> EntityMention:
    """A mention from its values in `MENTION_COLUMNS` order."""
    said = parse_iso(row[3])
    assert said is not None
    return EntityMention(entity_id=row[0], memory_id=row[1], user_id=row[2], said_at=said,
                         event_at=parse_iso(row[4]), counted=bool(row[5]))


def profile_row(value: ProfileValue) -> tuple[Any, ...]:
    """A profile value's values in `PROFILE_COLUMNS` order."""
    return (value.id, value.user_id, value.key, value.value, iso(value.valid_from), iso(value.valid_to),
            json.dumps(list(value.source_ids)), value.set_by, value.superseded_by, iso(value.created_at),
            iso(value.updated_at))


def profile_from_row(row: Sequence[Any]) -> ProfileValue:
    """A profile value from its values in `PROFILE_COLUMNS` order."""
    return ProfileValue(id=row[0], user_id=row[1], key=row[2], value=row[3], valid_from=parse_iso(row[4]),
                        valid_to=parse_iso(row[5]), source_ids=_list(row[6]), set_by=row[7],
                        superseded_by=row[8], created_at=datetime.fromisoformat(row[9]),
                        updated_at=datetime.fromisoformat(row[10]))


def profile_order(values: Iterable[ProfileValue]) -> list[ProfileValue]:
    """Profile values in the order every store returns them: by key, then by when they became
    true (unknown first), then by id."""
    floor = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(values, key=lambda v: (v.key, v.valid_from or floor, v.id))


def mention_order(mentions: Iterable[EntityMention]) -> list[EntityMention]:
    """Mentions in the order every store returns them: by entity, then by when they were said."""
    return sorted(mentions, key=lambda m: (m.entity_id, m.said_at, m.memory_id))


# -- the checks every write makes ------------------------------------------------------------------
def check_changes(changes: LedgerChanges) -> None:
    """`ValueError` unless every item belongs to `changes.user_id` and every entity has a name and
    a known kind; the store then checks what only it can (ids of other users, the mentions'
    memories and entities)."""
    user = changes.user_id
    items: list[Any] = [*changes.entities, *changes.mentions, *changes.profile]
    if any(item.user_id != user for item in items):
        raise ValueError(f"every ledger item must belong to the user {user!r}")
    for entity in changes.entities:
        if not entity.name:
            raise ValueError(f"entity {entity.id!r} has no name")
        EntityKind(entity.kind)  # ValueError for an unknown kind


def unknown_mentions(changes: LedgerChanges, memories: set[str], entities: set[str]) -> list[str]:
    """The mentions (as "entity/memory") whose memory is not among the user's `memories` or whose
    entity is not among the user's `entities` (after the call's own writes and removals)."""
    return [f"{m.entity_id}/{m.memory_id}" for m in changes.mentions
            if m.memory_id not in memories or m.entity_id not in entities]


def refuse_unknown(bad: Sequence[str], user_id: str) -> None:
    if bad:
        raise StaleLedgerError(f"mentions of memories or entities that are not the user {user_id!r}'s: "
                         + ", ".join(bad[:5]))


# -- the mention figures ------------------------------------------------------------------------------
@dataclass(slots=True)
class Figures:
    """An entity's figures, computed from its mentions (see `Entity`): the counted mentions, the
    first and last time said (of the counted mentions; of all when none is counted) and the
    latest event time, as UTC."""

    count: int = 0
    first: datetime | None = None
    last: datetime | None = None
    last_event: datetime | None = None


def utc_from_epoch(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=timezone.utc)


def figures_of(rows: Iterable[tuple[str, Any, Any, bool]]) -> dict[str, Figures]:
    """Each entity's `Figures` from its mentions as (entity_id, said, event or None, counted), the
    times as aware datetimes or epoch seconds: what the SQL stores' aggregate queries compute."""
    acc: dict[str, list[Any]] = {}  # entity -> [count, counted min, counted max, min, max, event max]
    for entity_id, said, event, counted in rows:
        a = acc.setdefault(entity_id, [0, None, None, said, said, None])
        if counted:
            a[0] += 1
            a[1] = said if a[1] is None else min(a[1], said)
            a[2] = said if a[2] is None else max(a[2], said)
        a[3], a[4] = min(a[3], said), max(a[4], said)
        if event is not None:
            a[5] = event if a[5] is None else max(a[5], event)
    return {entity_id: figures_from(a[0], a[1] if a[0] else a[3], a[2] if a[0] else a[4], a[5])
            for entity_id, a in acc.items()}


def figures_from(count: Any, first: Any, last: Any, last_event: Any) -> Figures:
    """`Figures` from aggregated values: times as epoch seconds or as datetimes."""
    def utc(value: Any) -> datetime | None:
        if isinstance(value, datetime):
            return value.astimezone(timezone.utc)
        return utc_from_epoch(None if value is None else float(value))
    return Figures(int(count or 0), utc(first), utc(last), utc(last_event))
