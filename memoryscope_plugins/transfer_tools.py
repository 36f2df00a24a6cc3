"""The agent's tool calls in an export (`transfer`): one line each, ``"record": "tool_call"``, after
the memories and the ledger, so an import into another store (or another user id) logs them again
and the tool statistics, which are the fold of the logged calls, follow exactly.

A line holds the logged message's id, agent, session, speaker name, time, metadata and the call
(`ToolCall.to_dict`). On import every line is checked as `record` checks a tool call; its id is
kept as the user's own when the user's log holds it already (the line is then skipped: a re-import
never counts a call twice), else derived from the user and the id (`transfer.derived_id`), and
skipped too when that derived id is logged already.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from . import tool_calls, validation
from .errors import ValidationError
from .storage.base import MemoryStore, StoredMessage
from .storage.messages import DONE
from .storage.records import TOOL_CALL_KEY
from .types import Message

FIELDS = {"record", "id", "agent_id", "session_id", "name", "timestamp", "metadata", "tool_call"}


def tool_call_records(store: MemoryStore, user_id: str) -> Iterator[dict[str, Any]]:
    """The user's logged tool calls as export records, oldest first."""
    for batch in store.iter_messages(user_id):
        for logged in batch:
            call, message = logged.message.tool_call, logged.message
            if call is None:
                continue
            yield {"record": "tool_call", "id": logged.id, "agent_id": logged.agent_id,
                   "session_id": logged.session_id, "name": message.name,
                   "timestamp": None if message.timestamp is None else message.timestamp.isoformat(),
                   "metadata": message.metadata, "tool_call": call.to_dict()}


def read_tool_call(data: dict[str, Any], user_id: str, *, max_content_chars: int,
                   max_metadata_chars: int) -> StoredMessage:
    """One export line's tool call, checked, as a message of `user_id` to log (state done)."""
    unknown = set(data) - FIELDS
    if unknown:
        raise ValidationError(f"unknown tool_call fields: {sorted(str(k)[:40] for k in unknown)}")
    call = tool_calls.check_tool_call(data.get("tool_call"), "tool_call", max_content_chars)
    moment = validation.check_time(data.get("timestamp"), "timestamp")
    if moment is None:
        raise ValidationError("a tool call needs its timestamp")
    metadata = validation.check_metadata(data.get("metadata"), "metadata", max_metadata_chars)
    if TOOL_CALL_KEY in metadata:
        raise ValidationError(f"metadata must not use the reserved key {TOOL_CALL_KEY!r}")
    message = Message(role="tool", content=tool_calls.message_text(call),
                      name=validation.check_name(data.get("name"), "name"), timestamp=moment, metadata=metadata,
                      tool_call=call)
    return StoredMessage(id=validation.check_id(data.get("id"), "id"), user_id=user_id,
                         agent_id=validation.check_id(data.get("agent_id"), "agent_id"), message=message, seq=0,
                         state=DONE, session_id=validation.check_optional_id(data.get("session_id"), "session_id"))


def new_tool_calls(calls: Sequence[StoredMessage], logged: set[str], derive: Any) -> list[StoredMessage]:
    """The calls to log, with their stored ids: those the user's log (`logged` ids) does not hold
    under their own id or their derived one (`derive(id)`), each once."""
    out: list[StoredMessage] = []
    seen: set[str] = set()
    for call in calls:
        if call.id in logged:
            continue
        stored = derive(call.id)
        if stored in logged or stored in seen:
            continue
        seen.add(stored)
        out.append(StoredMessage(id=stored, user_id=call.user_id, agent_id=call.agent_id, message=call.message,
                                 seq=0, state=DONE, session_id=call.session_id))
    return out
