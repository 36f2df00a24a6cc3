"""The /v1 routes over whole users: the tenant's users, and a user's memories exported, imported or
deleted at once."""

from __future__ import annotations

import io
import json

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import transfer
from ..engine import MemoryScope
from .route_support import ApiError, admin_key, content_disposition, public_memory, request_key, store_user
from .tenancy import public_user_id


def user_routes(engine: MemoryScope, base: str) -> list[Route]:
    """``{base}`` (the users) and ``{base}/{user}`` (delete), ``/export`` and ``/import``."""

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
        summary: Every memory of a user as JSON Lines (streamed), then their entity ledger and profile.
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])

        def lines():
            for batch in engine.store.iter_memories(user):
                for memory in batch:
                    yield json.dumps(public_memory(memory, key.tenant, listing=False), ensure_ascii=False) + "\n"
            yield from transfer.ledger_lines(engine.store, user)  # no user ids in them: nothing to unprefix

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
        return JSONResponse({"imported": result.imported, "ids": result.ids})

    return [
        Route(base, users, methods=["GET"]),
        Route(base + "/{user}", delete_user, methods=["DELETE"]),
        Route(base + "/{user}/export", export, methods=["GET"]),
        Route(base + "/{user}/import", import_, methods=["POST"]),
    ]
