"""The /v1 routes over whole users: the tenant's users, and a user's memories exported, imported or
deleted at once."""

from __future__ import annotations

import io
import json

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import transfer, transfer_tools
from ..engine import MemoryScope
from .route_support import ApiError, admin_key, content_disposition, int_param, public_memory, request_key, store_user
from .tenancy import public_user_id


def user_routes(engine: MemoryScope, base: str) -> list[Route]:
    """``{base}`` (the users) and ``{base}/{user}`` (delete), ``/export``, ``/import`` and ``/tool-stats``."""

    async def users(request: Request) -> Response:
        """
        summary: The users of the key's tenant (only its own users for a user-bound key).
        """
        key = request_key(request)
        names = [public_user_id(u, key.tenant) for u in await run_in_threadpool(engine.users)]
        return JSONResponse({"users": [u for u in names if u is not None and key.may_reach(u)]})

    async def delete_user(request: Request) -> Response:
        """
        summary: Delete every memory of a user (admin key).
        """
        key = admin_key(request)
        user = store_user(key, request.path_params["user"])
        return JSONResponse({"deleted": await run_in_threadpool(engine.delete_all, user)})

    async def export(request: Request) -> Response:
        """
        summary: Every memory of a user as JSON Lines (streamed), then their entity ledger and profile, then the
          agents' tool calls made for them.
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])

        def lines():
            for batch in engine.store.iter_memories(user):
                for memory in batch:
                    yield json.dumps(public_memory(memory, key.tenant, listing=False), ensure_ascii=False) + "\n"
            yield from transfer.ledger_lines(engine.store, user)  # no user ids in them: nothing to unprefix
            for record in transfer_tools.tool_call_records(engine.store, user):  # nor in these
                yield json.dumps(record, ensure_ascii=False) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson",
                                 headers={"Content-Disposition": content_disposition(
                                     request.path_params["user"] + ".jsonl")})

    async def import_(request: Request) -> Response:
        """
        summary: Import JSON Lines into a user (admin key); answers {imported, ids} where ids maps every id the
          lines name to the id it is stored under (kept when already the user's, else a stable derived one).
        """
        key = admin_key(request)
        user = store_user(key, request.path_params["user"])
        try:
            text = (await request.body()).decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, "the body must be UTF-8 JSON Lines") from None
        result = await run_in_threadpool(lambda: engine.import_with_ids(user, io.StringIO(text), progress=False))
        return JSONResponse({"imported": result.imported, "ids": result.ids, "tool_calls": result.tool_calls})

    async def tool_stats(request: Request) -> Response:
        """
        summary: The statistics of an agent's tool calls recorded for this user (query agent_id, tool?, top?),
          one record per tool; an agent's statistics over every user are the store owner's (Python API, CLI).
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        unknown = sorted(set(request.query_params) - {"agent_id", "tool", "top"})
        if unknown:
            raise ApiError(400, f"unknown query parameters: {', '.join(unknown)}")
        agent, tool = request.query_params.get("agent_id"), request.query_params.get("tool")
        if agent is None:
            raise ApiError(400, "agent_id is required")
        top = int_param(request, "top", 10)
        found = await run_in_threadpool(lambda: engine.tool_stats(agent, tool, user_id=user, top=top))
        return JSONResponse({"tools": [stats.to_dict() for stats in found]})

    return [
        Route(base, users, methods=["GET"]),
        Route(base + "/{user}", delete_user, methods=["DELETE"]),
        Route(base + "/{user}/export", export, methods=["GET"]),
        Route(base + "/{user}/import", import_, methods=["POST"]),
        Route(base + "/{user}/tool-stats", tool_stats, methods=["GET"]),
    ]
