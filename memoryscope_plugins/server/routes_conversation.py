"""The /v1 routes of the conversation cycle: record messages, retrieve for a query, and consolidate
and reflect on demand."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..engine import MemoryScope
from ..types import RetrievalResult
from .procedure_json import procedure_json
from .route_support import admin_key, given, json_body, public_memory, report_dict, request_key, store_user


def retrieval_json(result: RetrievalResult, tenant: str) -> dict[str, Any]:
    """A retrieval's answer: the context, timings, the time range it read, the memories with scores."""
    span = result.time_range
    return {
        "context": result.context, "timings_ms": result.timings_ms,
        "time_range": None if span is None else [span.start and span.start.isoformat(),
                                                 span.end and span.end.isoformat()],
        "memories": [{"memory": public_memory(m.memory, tenant), "score": m.score, "scores": m.scores}
                     for m in result.memories],
        "procedures": [procedure_json(m) for m in result.procedures],
        "tool_notes": [stats.to_dict() for stats in result.tool_notes]}


def conversation_routes(engine: MemoryScope, base: str) -> list[Route]:
    """record, retrieve, consolidate and reflect under ``{base}/{user}``."""

    async def record(request: Request) -> Response:
        """
        summary: Record conversation messages (body messages [{role, content, name?, timestamp?, key?}], agent_id?, session_id?, run_outcome?, procedures_used?).
        """  # noqa: E501 - one line of the OpenAPI schema
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        body = await json_body(request, {"messages", "agent_id", "session_id", "run_outcome", "procedures_used"})
        ids = await run_in_threadpool(lambda: engine.record(user, given(body, "messages"),
                                                            agent_id=body.get("agent_id", "assistant"),
                                                            session_id=body.get("session_id"),
                                                            run_outcome=body.get("run_outcome"),
                                                            procedures_used=body.get("procedures_used")))
        return JSONResponse({"ids": ids}, status_code=201)

    async def retrieve(request: Request) -> Response:
        """
        summary: What memory recalls for a query, with scores (body query, top_k?, types?, include_expired?, now?, agent_id?, tools?, procedures_of?, consistency?).
        """  # noqa: E501 - one line of the OpenAPI schema
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        body = await json_body(request, {"query", "top_k", "types", "include_expired", "now", "agent_id", "rerank",
                                               "tools", "procedures_of", "consistency"})
        result = await run_in_threadpool(lambda: engine.retrieve(user, given(body, "query"),
                                                                 **{k: v for k, v in body.items() if k != "query"}))
        return JSONResponse(retrieval_json(result, key.tenant))

    async def consolidate(request: Request) -> Response:
        """
        summary: Consolidate a user's pending messages now (needs an LLM; admin key).
        """
        key = admin_key(request)
        user = store_user(key, request.path_params["user"])
        return JSONResponse(report_dict(await run_in_threadpool(engine.consolidate, user)))

    async def reflect(request: Request) -> Response:
        """
        summary: Turn a user's observations into insights now (needs an LLM; admin key).
        """
        key = admin_key(request)
        user = store_user(key, request.path_params["user"])
        return JSONResponse(report_dict(await run_in_threadpool(engine.reflect, user)))

    return [
        Route(base + "/{user}/record", record, methods=["POST"]),
        Route(base + "/{user}/retrieve", retrieve, methods=["POST"]),
        Route(base + "/{user}/consolidate", consolidate, methods=["POST"]),
        Route(base + "/{user}/reflect", reflect, methods=["POST"]),
    ]
