"""The /v1 routes over a tenant's agents: list, edit, delete, export and import an agent's procedures
(task memory).

An agent's procedures are learnt from the runs of every user of the key's tenant and shown to all of
them, so these routes need a key not bound to users (403 otherwise), and reach the procedures of the
key's tenant only: the scope is the tenant's team (`tenancy.tenant_team`), never named by the request.
"""

from __future__ import annotations

import io

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import transfer_procedures as procedure_transfer
from ..engine import MemoryScope
from ..procedures.scope import procedure_scope
from .auth import ApiKey
from .procedure_json import procedure_record
from .route_support import ApiError, content_disposition, int_param, json_body, request_key
from .tenancy import tenant_team


def team_key(request: Request) -> ApiKey:
    """The request's key, which must reach every user of its tenant (403 otherwise)."""
    key = request_key(request)
    if key.users:
        raise ApiError(403, "an agent's procedures are every user's of the tenant: this key is bound to users")
    return key


def agent_routes(engine: MemoryScope, base: str) -> list[Route]:
    """The routes under ``{base}/{agent}/procedures``."""

    async def list_procedures(request: Request) -> Response:
        """
        summary: A page of an agent's procedures learnt from this tenant's runs, newest first (query
          include_expired=false, limit, offset; a key not bound to users).
        """
        team = tenant_team(team_key(request).tenant)
        unknown = sorted(set(request.query_params) - {"include_expired", "limit", "offset"})
        if unknown:
            raise ApiError(400, f"unknown query parameters: {', '.join(unknown)}")
        expired = request.query_params.get("include_expired", "false").lower()
        if expired not in ("true", "false"):
            raise ApiError(400, "include_expired must be true or false")
        found = await run_in_threadpool(lambda: engine.procedures(
            request.path_params["agent"], team=team, include_expired=expired == "true",
            limit=int_param(request, "limit", 100), offset=int_param(request, "offset", 0)))
        return JSONResponse({"procedures": [procedure_record(m) for m in found]})

    async def update_procedure(request: Request) -> Response:
        """
        summary: Edit one of an agent's procedures (body when?, do?, why?, tools?; checked as learning checks
          the model's text; its sources and counters are kept; a key not bound to users).
        """
        team = tenant_team(team_key(request).tenant)
        body = await json_body(request, {"when", "do", "why", "tools"})
        memory = await run_in_threadpool(lambda: engine.update_procedure(
            request.path_params["agent"], request.path_params["procedure_id"], team=team, **body))
        return JSONResponse(procedure_record(memory))

    async def delete_procedure(request: Request) -> Response:
        """
        summary: Delete one of an agent's procedures (a key not bound to users).
        """
        team = tenant_team(team_key(request).tenant)
        procedure_id = request.path_params["procedure_id"]
        await run_in_threadpool(lambda: engine.delete_procedure(request.path_params["agent"], procedure_id,
                                                                team=team))
        return JSONResponse({"deleted": procedure_id})

    async def export_procedures(request: Request) -> Response:
        """
        summary: Every procedure of an agent learnt from this tenant's runs, active and expired, as JSON Lines
          (streamed; a key not bound to users).
        """
        team = tenant_team(team_key(request).tenant)
        agent = request.path_params["agent"]
        await run_in_threadpool(lambda: engine.procedures(agent, team=team, limit=1))  # checks the agent id first
        scope = procedure_scope(f"{team}:x" if team else "x", agent)
        lines = (line for _, line in procedure_transfer.export_lines(engine.store, scope, with_scope=False))
        return StreamingResponse(lines, media_type="application/x-ndjson",
                                 headers={"Content-Disposition": content_disposition(f"{agent}.procedures.jsonl")})

    async def import_procedures(request: Request) -> Response:
        """
        summary: Import JSON Lines of an agent's procedures into this tenant's (an admin key not bound to users;
          all or nothing); answers {imported}.
        """
        key = team_key(request)
        if not key.admin:
            raise ApiError(403, "this operation needs an admin key")
        try:
            text = (await request.body()).decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, "the body must be UTF-8 JSON Lines") from None
        count = await run_in_threadpool(lambda: engine.import_procedures(
            request.path_params["agent"], io.StringIO(text), team=tenant_team(key.tenant)))
        return JSONResponse({"imported": count})

    procedures = base + "/{agent}/procedures"
    return [
        Route(procedures, list_procedures, methods=["GET"]),
        Route(procedures + "/export", export_procedures, methods=["GET"]),
        Route(procedures + "/import", import_procedures, methods=["POST"]),
        Route(procedures + "/{procedure_id}", update_procedure, methods=["PATCH"]),
        Route(procedures + "/{procedure_id}", delete_procedure, methods=["DELETE"]),
    ]
