"""The /v1 routes over one user's memories: list, add, read, change and delete them."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..engine import MemoryScope
from ..storage import read_consistency
from .route_support import given, int_param, json_body, public_memory, request_key, store_user


def consistency_param(request: Request) -> read_consistency.Consistency:
    """The ``consistency`` query parameter (``replica`` when absent): where a store with read standbys reads."""
    return read_consistency.check(request.query_params.get("consistency", "replica"))


def memory_routes(engine: MemoryScope, base: str) -> list[Route]:
    """The routes under ``{base}/{user}/memories``. Each handler runs the engine call in a worker thread."""

    async def list_memories(request: Request) -> Response:
        """
        summary: A page of a user's memories, newest first (query limit, offset, types, include_expired, consistency).
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        types = [t for t in request.query_params.get("types", "").split(",") if t] or None
        expired = request.query_params.get("include_expired", "true").lower() != "false"
        consistency = consistency_param(request)
        items = await run_in_threadpool(lambda: engine.list(
            user, types=types, include_expired=expired, limit=int_param(request, "limit", 100),
            offset=int_param(request, "offset", 0), consistency=consistency))
        return JSONResponse({"memories": [public_memory(m, key.tenant) for m in items]})

    async def add_memory(request: Request) -> Response:
        """
        summary: Add a memory directly (body content, optional type, agent_id, event_start, event_end, metadata).
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        body = await json_body(request, {"content", "type", "agent_id", "event_start", "event_end", "created_at",
                                         "metadata"})
        memory = await run_in_threadpool(lambda: engine.add(user, given(body, "content"),
                                                            **{k: v for k, v in body.items() if k != "content"}))
        return JSONResponse(public_memory(memory, key.tenant), status_code=201)

    async def get_memory(request: Request) -> Response:
        """
        summary: One memory (query consistency).
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        consistency = consistency_param(request)
        memory = await run_in_threadpool(lambda: engine.get(user, request.path_params["memory_id"],
                                                            consistency=consistency))
        return JSONResponse(public_memory(memory, key.tenant))

    async def update_memory(request: Request) -> Response:
        """
        summary: Change a memory (body content, status active|expired, metadata, event_start, event_end).
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        body = await json_body(request, {"content", "status", "metadata", "event_start", "event_end"})
        memory = await run_in_threadpool(lambda: engine.update(user, request.path_params["memory_id"], **body))
        return JSONResponse(public_memory(memory, key.tenant))

    async def delete_memory(request: Request) -> Response:
        """
        summary: Delete one memory.
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        await run_in_threadpool(engine.delete, user, request.path_params["memory_id"])
        return JSONResponse({"deleted": request.path_params["memory_id"]})

    memories = base + "/{user}/memories"
    return [
        Route(memories, list_memories, methods=["GET"]),
        Route(memories, add_memory, methods=["POST"]),
        # reading and deleting also reach a memory id stored before the identifier rule ("a/b",
        # sent as a%2Fb): the user is always the one path segment before /memories/
        Route(memories + "/{memory_id:path}", get_memory, methods=["GET"]),
        Route(memories + "/{memory_id}", update_memory, methods=["PATCH"]),
        Route(memories + "/{memory_id:path}", delete_memory, methods=["DELETE"]),
    ]
