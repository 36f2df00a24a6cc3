"""An agent's procedure as the HTTP API and the MCP tools show it: stored, or retrieved for a task."""

from __future__ import annotations

from typing import Any

from ..types import Memory, ScoredMemory

PROCEDURE_FIELDS = ("when", "do", "why", "tools", "runs", "uses", "successes", "failures", "weight", "last_used",
                    "edited_at")


def procedure_record(memory: Memory) -> dict[str, Any]:
    """A stored procedure as the API shows it (its store scope never): id, text, status, times, the
    messages it rests on (``source_ids``: ids in its users' logs) and its fields and counters."""
    data = memory.metadata
    return {"id": memory.id, "agent_id": memory.agent_id, "content": memory.content, "status": memory.status.value,
            "superseded_by": memory.superseded_by, "created_at": memory.created_at.isoformat(),
            "updated_at": memory.updated_at.isoformat(), "source_ids": list(memory.source_ids),
            **{k: data.get(k) for k in PROCEDURE_FIELDS}}


def procedure_json(scored: ScoredMemory) -> dict[str, Any]:
    """A retrieved procedure (the agent's; its store scope is never shown): what `procedures_used` takes."""
    memory, data = scored.memory, scored.memory.metadata
    return {"id": memory.id, "agent_id": memory.agent_id, "content": memory.content, "score": scored.score,
            **{k: data.get(k) for k in ("when", "do", "why", "tools", "runs", "uses", "successes", "failures",
                                        "weight", "last_used")}}
