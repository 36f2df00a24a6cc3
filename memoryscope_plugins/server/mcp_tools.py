"""The MCP server (official `mcp` SDK, FastMCP): tools to search, save, update and forget memories, to
read the user's entities and profile, and (`mcp_agent_tools`) to end an agent's run, and its procedures and
tool statistics.

Every tool acts on the caller's user only. Over streamable HTTP the caller is the API key (and,
for a key bound to several users or to none, the ``X-Memory-User`` header); over stdio it is the
tenant and user the process was started for. An agent's procedures are its tenant's (every user's of
it): only a key not bound to users (or the stdio process) lists, edits or forgets them.
"""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.transport_security import TransportSecuritySettings

from ..engine import MemoryScope
from ..errors import ValidationError
from ..person import name_rules
from ..types import EntityKind, Memory
from .auth import ApiKey, KeyRing
from .entity_json import entity_json, profile_json, profile_value_json, timeline_json
from .guard import AmbiguousCredentials, current_key, key_from_headers
from .mcp_agent_tools import add_agent_tools
from .mcp_support import Resolve, ResolveTeam, tool_errors as _tool_errors
from .procedure_json import procedure_json
from .tenancy import migrate_legacy_users, store_user_id, tenant_team

INSTRUCTIONS = ("Long-term memory of the user you are talking to. Call search_memories before answering "
                "anything that may depend on the past; save_memory for facts worth keeping; "
                "forget_memory when the user asks you to forget something; about_entity for \"who is X\" or "
                "\"what do you know about X\"; get_profile for what is true of the user now. An agent with "
                "tools: give search_memories your agent_id and tools for what worked before, and end each task "
                "with record_run (its messages and tool calls, and how it went).")


LIST_ENTITIES = ("The people, places, organisations, pets, objects and topics the user's conversations name, best "
                 f"first. kind: {'|'.join(kind.value for kind in EntityKind)}; order: relevance|frequency|recency.")


def _http_key(keys: KeyRing, ctx: Context) -> tuple[ApiKey, Any]:
    """The key of an MCP call over HTTP (what the guard found, under the same one-credential rule) and
    the request."""
    request = ctx.request_context.request
    if request is None:
        raise ValidationError("no HTTP request for this call")
    key = current_key(request.scope)
    if key is None:
        try:
            key = keys.lookup(key_from_headers(request.headers))
        except AmbiguousCredentials as exc:
            raise ValidationError(str(exc)) from None
    if key is None:
        raise ValidationError("missing or unknown API key")
    return key, request


def _http_user(keys: KeyRing) -> Resolve:
    def resolve(ctx: Context) -> tuple[str, str]:
        key, request = _http_key(keys, ctx)
        user = request.headers.get("x-memory-user") or (key.users[0] if len(key.users) == 1 else None)
        if not user:
            raise ValidationError("say which user with the X-Memory-User header")
        stored = store_user_id(key.tenant, user)  # the identifier rule, before the prefix
        if not key.may_reach(user):
            raise ValidationError("this key may not reach that user")
        return stored, key.tenant
    return resolve


def _http_team(keys: KeyRing) -> ResolveTeam:
    def resolve(ctx: Context) -> str:
        key, _ = _http_key(keys, ctx)
        if key.users:  # procedures are learnt from and shown to every user of the tenant
            raise ValidationError("an agent's procedures are every user's of the tenant: this key is bound to users")
        return tenant_team(key.tenant)
    return resolve


def mcp_security(allowed_hosts: list[str]) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection with the service's Host allow-list (see guard.host_allowed);
    browsers' Origin must name an allowed host too. ``*`` turns both checks off (a proxy does them)."""
    if "*" in allowed_hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts: list[str] = []
    origins: list[str] = []
    for entry in allowed_hosts:
        bare = entry.endswith("]") or ":" not in entry  # "name" or "[v6]": any port
        name = entry if bare else entry.rsplit(":", 1)[0]
        hosts += [entry, f"{entry}:*"] if bare else [entry]
        for scheme in ("http", "https"):
            origins += [f"{scheme}://{name}", f"{scheme}://{name}:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def build_mcp(engine: MemoryScope, *, keys: KeyRing | None = None, fixed_user: tuple[str, str] | None = None,
              security: TransportSecuritySettings | None = None) -> FastMCP:
    """An MCP server over `engine`. Give `keys` (HTTP) or `fixed_user` = (tenant, user) (stdio)."""
    resolve, resolve_team = _resolver(engine, keys, fixed_user)
    security = security or mcp_security(["localhost", "127.0.0.1", "[::1]"])
    mcp = FastMCP("memoryscope", instructions=INSTRUCTIONS, stateless_http=True, json_response=True,
                  streamable_http_path="/mcp", transport_security=security, log_level="WARNING")
    _add_memory_tools(mcp, engine, resolve)
    _add_ledger_tools(mcp, engine, resolve)
    add_agent_tools(mcp, engine, resolve, resolve_team)
    return mcp


def _resolver(engine: MemoryScope, keys: KeyRing | None,
              fixed_user: tuple[str, str] | None) -> tuple[Resolve, ResolveTeam]:
    """Whose memories a call acts on, and whose agents' procedures: the process's one user and its
    tenant over stdio, the key's over HTTP."""
    if fixed_user is not None:
        tenant, user = fixed_user
        stored = store_user_id(tenant, user)
        team = tenant_team(tenant)
        migrate_legacy_users(engine)  # as `create_app` does: older versions stored other layouts
        return (lambda ctx: (stored, tenant)), (lambda ctx: team)
    if keys is not None:
        return _http_user(keys), _http_team(keys)
    raise ValueError("build_mcp needs keys or fixed_user")


def _brief(memory: Memory, score: float | None = None) -> dict[str, Any]:
    """A memory as a tool answers it: id, text, type, status, times, and its score in a search."""
    out: dict[str, Any] = {"id": memory.id, "content": memory.content, "type": memory.type.value,
                           "status": memory.status.value, "created_at": memory.created_at.isoformat()}
    if memory.event_start is not None:
        out["event_start"] = memory.event_start.isoformat()
    if score is not None:
        out["score"] = round(score, 4)
    return out


def _add_memory_tools(mcp: FastMCP, engine: MemoryScope, resolve: Resolve) -> None:
    """search_memories, save_memory, update_memory, forget_memory, list_memories."""

    @mcp.tool()
    @_tool_errors
    def search_memories(query: str, ctx: Context, top_k: int = 8, agent_id: str | None = None,
                        tools: list[str] | None = None) -> dict[str, Any]:
        """Search the user's memories the way retrieval before a turn does; returns the ranked memories
        with scores and a dated context block. agent_id: your own agent id, to also get the procedures
        that worked for you before on such a task (pass the ids of those you follow to record_run as
        procedures_used); it does not narrow the user's memories. tools: the tools you are about to use,
        to get those that failed before (tool_notes)."""
        user, _ = resolve(ctx)
        result = engine.retrieve(user, query, top_k=top_k, procedures_of=agent_id, tools=tools)
        return {"context": result.context, "memories": [_brief(m.memory, m.score) for m in result.memories],
                "procedures": [procedure_json(p) for p in result.procedures],
                "tool_notes": [stats.to_dict() for stats in result.tool_notes]}

    @mcp.tool()
    @_tool_errors
    def save_memory(content: str, ctx: Context, event_start: str | None = None) -> dict[str, Any]:
        """Save a fact about the user (searchable at once). event_start: ISO 8601 date when it happened."""
        user, _ = resolve(ctx)
        return _brief(engine.add(user, content, event_start=event_start))

    @mcp.tool()
    @_tool_errors
    def update_memory(memory_id: str, content: str, ctx: Context) -> dict[str, Any]:
        """Correct the text of one of the user's memories."""
        user, _ = resolve(ctx)
        return _brief(engine.update(user, memory_id, content=content))

    @mcp.tool()
    @_tool_errors
    def forget_memory(memory_id: str, ctx: Context) -> dict[str, Any]:
        """Delete one of the user's memories for good."""
        user, _ = resolve(ctx)
        engine.delete(user, memory_id)
        return {"deleted": memory_id}

    @mcp.tool()
    @_tool_errors
    def list_memories(ctx: Context, limit: int = 20) -> dict[str, Any]:
        """The user's most recent memories, newest first."""
        user, _ = resolve(ctx)
        return {"memories": [_brief(m) for m in engine.list(user, limit=limit)]}


def _add_ledger_tools(mcp: FastMCP, engine: MemoryScope, resolve: Resolve) -> None:
    """list_entities, about_entity, get_profile: the entity ledger and the profile, read only."""

    @mcp.tool(description=LIST_ENTITIES)
    @_tool_errors
    def list_entities(ctx: Context, kind: str | None = None, order: str = "relevance",
                      limit: int = 20) -> dict[str, Any]:
        user, tenant = resolve(ctx)
        return {"entities": [entity_json(e, tenant) for e in engine.entities(user, kind=kind, order=order,
                                                                             limit=limit)]}

    @mcp.tool()
    @_tool_errors
    def about_entity(name: str, ctx: Context, limit: int = 10) -> dict[str, Any]:
        """What memory knows about one person, place or thing (by name or alias): the entity, its mentions
        per month and its memories (observations first, newest first)."""
        user, tenant = resolve(ctx)
        details = engine.entity(user, name, limit=limit)
        return {"entity": entity_json(details.entity, tenant), "timeline": timeline_json(details.timeline),
                "memories": [_brief(m) for m in details.memories],
                "profile": [profile_value_json(v, tenant) for v in details.profile]}

    @mcp.tool()
    @_tool_errors
    def get_profile(ctx: Context, key: str | None = None) -> dict[str, Any]:
        """The user's profile (home, work, family, likes, ...): each key's current values; with key, every
        value that key ever had, oldest first (ended ones carry valid_to), under its canonical key (家 is home)."""
        user, tenant = resolve(ctx)
        if key is not None:
            canonical = name_rules.canonical_key(key, "key")  # 家 is home: the answer says which key it read
            return {"key": canonical, "history": [profile_value_json(v, tenant)
                                                  for v in engine.profile_history(user, key)]}
        return {"profile": profile_json(engine.profile(user), tenant)}
