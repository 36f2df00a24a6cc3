"""Small builders for the person tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memoryscope_plugins.types import Entity, EntityKind, EntityMention, Memory, MemoryType

T0 = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)


def entity(entity_id: str, name: str, *aliases: str, kind: EntityKind = EntityKind.PERSON, user: str = "u",
           count: int = 0, last: datetime | None = None) -> Entity:
    return Entity(id=entity_id, user_id=user, name=name, kind=kind, aliases=list(aliases), mention_count=count,
                  last_mentioned_at=last, created_at=T0, updated_at=T0)


def memory(memory_id: str, content: str, *, user: str = "u", kind: MemoryType = MemoryType.TURN,
           days: float = 0) -> Memory:
    return Memory(id=memory_id, user_id=user, agent_id="a", content=content, type=kind,
                  created_at=T0 + timedelta(days=days))


def mention(entity_id: str, memory_id: str, *, days: float = 0, counted: bool = True, user: str = "u",
            ) -> EntityMention:
    return EntityMention(entity_id=entity_id, memory_id=memory_id, user_id=user,
                         said_at=T0 + timedelta(days=days), counted=counted)
