"""The MCP tools over an agent's task memory: ending a run with its outcome, the agent's procedures (list,
edit, forget) and the statistics of its tool calls.

``record_run`` is the MCP form of ``record(..., run_outcome=)``: the caller's user's messages of a task (what
the user asked, the agent's tool calls with their results or errors, its reply, the user's feedback) and how
the task went, which is what the learning step reads (docs/procedural.md). It is a tool of its own rather
than an argument of ``save_memory``: ``save_memory`` stores one fact about the user as a memory, never a
message of a run, so an outcome given with it would end a run of messages the server never got.

Procedures are the agent's for a whole tenant (learnt from every user's runs, shown to all of them), so
the procedure tools need a caller allowed every user of the tenant (`ResolveTeam`: a key not bound to
users, or the stdio process) and reach that tenant's procedures only. ``tool_stats`` gives the caller's
user's figures, as ``GET /v1/users/{u}/tool-stats`` does.
"""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp import Context, FastMCP

from ..engine import MemoryScope
from .mcp_support import Resolve, ResolveTeam, tool_errors
from .procedure_json import procedure_record


def add_agent_tools(mcp: FastMCP, engine: MemoryScope, resolve: Resolve, resolve_team: ResolveTeam) -> None:
    """record_run, list_procedures, update_procedure, forget_procedure, tool_stats."""

    @mcp.tool()
    @tool_errors
    def record_run(messages: list[dict[str, Any]], run_outcome: str, ctx: Context, agent_id: str = "assistant",
                   procedures_used: list[str] | None = None, session_id: str | None = None) -> dict[str, Any]:
        """End a task (a run) of yours for the user: record its messages and how it went, so what worked is
        learnt. messages: what happened since the previous run, oldest first: {"role": "user"|"assistant",
        "content"}, and each tool call as {"role": "tool", "tool_call": {"name", "arguments", "result" or
        "error"}}. run_outcome: "succeeded", "failed" or "unknown". agent_id: your agent id (as given to
        search_memories). procedures_used: the ids of the procedures search_memories returned that you
        followed."""
        user, _ = resolve(ctx)
        ids = engine.record(user, messages, agent_id=agent_id, session_id=session_id, run_outcome=run_outcome,
                            procedures_used=procedures_used)
        return {"ids": ids, "run_outcome": run_outcome}

    @mcp.tool()
    @tool_errors
    def list_procedures(agent_id: str, ctx: Context, include_expired: bool = False, limit: int = 20) -> dict[str, Any]:
        """The procedures an agent learnt from its finished runs ("when ...: do ..."), newest first, each with
        the tools it names, its outcome counters and the ids of the messages it rests on."""
        team = resolve_team(ctx)
        found = engine.procedures(agent_id, team=team, include_expired=include_expired, limit=limit)
        return {"procedures": [procedure_record(m) for m in found]}

    @mcp.tool()
    @tool_errors
    def update_procedure(agent_id: str, procedure_id: str, ctx: Context, when: str | None = None,
                         do: str | None = None, why: str | None = None,
                         tools: list[str] | None = None) -> dict[str, Any]:
        """Correct one of an agent's procedures: when it applies, what to do, why ("" removes it), and which of
        its tools it names (never a tool it does not name already)."""
        team = resolve_team(ctx)
        memory = engine.update_procedure(agent_id, procedure_id, team=team, when=when, do=do, why=why, tools=tools)
        return procedure_record(memory)

    @mcp.tool()
    @tool_errors
    def forget_procedure(agent_id: str, procedure_id: str, ctx: Context) -> dict[str, Any]:
        """Delete one of an agent's procedures for good (a wrong one)."""
        team = resolve_team(ctx)
        engine.delete_procedure(agent_id, procedure_id, team=team)
        return {"deleted": procedure_id}

    @mcp.tool()
    @tool_errors
    def tool_stats(agent_id: str, ctx: Context, tool: str | None = None, top: int = 5) -> dict[str, Any]:
        """How an agent's tool calls for this user went, per tool: calls, failures, the most frequent
        (normalised) errors and argument shapes, latency p50/p95."""
        user, _ = resolve(ctx)
        return {"tools": [stats.to_dict() for stats in engine.tool_stats(agent_id, tool, user_id=user, top=top)]}
