"""The records every backend keeps, written once: their columns and how a record becomes a row
and a row a record. A backend adds only its own columns (comparable times, vectors, search text)
and the DDL or mapping that holds them.

Encoding (the same in every engine): times as exact ISO text (`timecodes.iso`), type and status as
their enum values, `source_ids` and `metadata` as JSON text (a backend that stores them natively
may pass a list for `source_ids`).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Sequence

from ..types import Memory, MemoryStatus, MemoryType, Message, ToolCall
from .base import StoredMessage
from .timecodes import iso, parse_iso

# the order `memory_from_row` reads
MEMORY_COLUMNS = (
    "id", "user_id", "agent_id", "type", "status", "content", "context", "speaker", "role", "session_id",
    "created_at", "updated_at", "event_start", "event_end", "superseded_by", "source_ids", "metadata",
    "embedding_model", "previous_id",
)
# what `memory_values` writes, in its order
MEMORY_VALUE_COLUMNS = tuple(c for c in MEMORY_COLUMNS if c != "embedding_model")
# the order `message_from_row` reads
MESSAGE_COLUMNS = ("id", "user_id", "agent_id", "session_id", "role", "name", "content", "timestamp", "metadata",
                   "seq", "state", "attempts")
# what `message_values` writes (the log numbers the message and counts its attempts itself)
MESSAGE_WRITE_COLUMNS = MESSAGE_COLUMNS[:9] + ("state",)
# a tool call message keeps its call in the metadata JSON under this key (no column of its own, so
# every store's log holds it as it is); `record` refuses the key in a caller's metadata
TOOL_CALL_KEY = "__tool_call__"

_TYPES = {t.value: t for t in MemoryType}
_STATUSES = {s.value: s for s in MemoryStatus}


def _list(value: Any) -> list:
    if value is None or value == "[]":
        return []
    return json.loads(value) if isinstance(value, str) else list(value)


def _dict(value: Any) -> dict:
    return {} if not value or value == "{}" else json.loads(value)


def memory_from_row(row: Sequence[Any]) -> Memory:
    """A memory from its encoded values in `MEMORY_COLUMNS` order."""
    # on the retrieval path for every candidate: plain lookups, no parsing of empty JSON
    return Memory(
        id=row[0], user_id=row[1], agent_id=row[2], type=_TYPES[row[3]],
        status=_STATUSES[row[4]], content=row[5], context=row[6], speaker=row[7], role=row[8],
        session_id=row[9], created_at=datetime.fromisoformat(row[10]),
        updated_at=datetime.fromisoformat(row[11]), event_start=parse_iso(row[12]),
        event_end=parse_iso(row[13]), superseded_by=row[14], source_ids=_list(row[15]),
        metadata=_dict(row[16]), embedding_model=row[17], previous_id=row[18],
    )


def memory_values(memory: Memory) -> dict[str, Any]:
    """The encoded values of a memory by column, every one of `MEMORY_COLUMNS` but
    `embedding_model` (the store sets that with the vector)."""
    return {
        "id": memory.id, "user_id": memory.user_id, "agent_id": memory.agent_id, "type": memory.type.value,
        "status": memory.status.value, "content": memory.content, "context": memory.context,
        "speaker": memory.speaker, "role": memory.role, "session_id": memory.session_id,
        "created_at": iso(memory.created_at), "updated_at": iso(memory.updated_at),
        "event_start": iso(memory.event_start), "event_end": iso(memory.event_end),
        "superseded_by": memory.superseded_by, "source_ids": json.dumps(memory.source_ids),
        "metadata": json.dumps(memory.metadata, default=str), "previous_id": memory.previous_id,
    }


def message_from_row(row: Sequence[Any]) -> StoredMessage:
    """A logged message from its values in `MESSAGE_COLUMNS` order."""
    metadata = _dict(row[8])
    call = metadata.pop(TOOL_CALL_KEY, None)
    return StoredMessage(
        id=row[0], user_id=row[1], agent_id=row[2], session_id=row[3],
        message=Message(role=row[4], name=row[5], content=row[6],
                        timestamp=datetime.fromisoformat(row[7]), metadata=metadata,
                        tool_call=None if call is None else _tool_call(call)),
        seq=int(row[9]), state=row[10], attempts=int(row[11] or 0))


def _tool_call(data: dict[str, Any]) -> ToolCall:
    """A logged call from its JSON (fields a later release may add are left out, not an error)."""
    return ToolCall(**{name: data[name] for name in ToolCall.__slots__ if name in data})


def message_metadata(message: Message) -> str:
    """The metadata JSON a message is logged with (its tool call, if any, under `TOOL_CALL_KEY`)."""
    metadata = message.metadata
    if message.tool_call is not None:
        metadata = {**metadata, TOOL_CALL_KEY: message.tool_call.to_dict()}
    return json.dumps(metadata, default=str)


def message_values(message_id: str, user_id: str, agent_id: str, session_id: str | None, message: Message,
                   state: str) -> tuple[Any, ...]:
    """A message's values in `MESSAGE_WRITE_COLUMNS` order; no timestamp means now."""
    return (message_id, user_id, agent_id, session_id, message.role, message.name, message.content,
            iso(message.timestamp or datetime.now(timezone.utc)), message_metadata(message), state)
