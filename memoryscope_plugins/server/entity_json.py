"""Entities, profile values and an entity's details as the HTTP API and the MCP tools show them: times
as ISO 8601, the tenant's prefix taken off the user."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..types import Entity, EntityDetails, EntityKind, ProfileValue
from .route_support import public_memory
from .tenancy import public_user_id


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def entity_json(entity: Entity, tenant: str) -> dict[str, Any]:
    """One entity of the ledger with its mention figures."""
    return {"id": entity.id, "user_id": public_user_id(entity.user_id, tenant) or entity.user_id,
            "name": entity.name, "kind": EntityKind(entity.kind).value, "aliases": list(entity.aliases),
            "mention_count": entity.mention_count, "first_mentioned_at": _iso(entity.first_mentioned_at),
            "last_mentioned_at": _iso(entity.last_mentioned_at), "last_event_at": _iso(entity.last_event_at),
            "created_at": _iso(entity.created_at), "updated_at": _iso(entity.updated_at),
            "metadata": dict(entity.metadata)}


def profile_value_json(value: ProfileValue, tenant: str) -> dict[str, Any]:
    """One value of a profile key, current or ended (`valid_to`, `superseded_by`)."""
    return {"id": value.id, "user_id": public_user_id(value.user_id, tenant) or value.user_id, "key": value.key,
            "value": value.value, "current": value.current, "valid_from": _iso(value.valid_from),
            "valid_to": _iso(value.valid_to), "source_ids": list(value.source_ids), "set_by": value.set_by,
            "superseded_by": value.superseded_by, "created_at": _iso(value.created_at),
            "updated_at": _iso(value.updated_at)}


def timeline_json(timeline: list[tuple[datetime, int]]) -> list[dict[str, Any]]:
    """Mentions per period: ``[{"start": ISO time, "mentions": n}, ...]``, oldest first."""
    return [{"start": start.isoformat(), "mentions": count} for start, count in timeline]


def details_json(details: EntityDetails, tenant: str) -> dict[str, Any]:
    """An entity with its timeline, its memories and (for the user themself) the profile."""
    return {"entity": entity_json(details.entity, tenant), "timeline": timeline_json(details.timeline),
            "memories": [public_memory(m, tenant) for m in details.memories],
            "profile": [profile_value_json(v, tenant) for v in details.profile]}


def profile_json(profile: dict[str, list[ProfileValue]], tenant: str) -> dict[str, list[dict[str, Any]]]:
    """The current profile: each key's current values."""
    return {key: [profile_value_json(v, tenant) for v in values] for key, values in profile.items()}
