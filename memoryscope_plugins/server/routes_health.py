"""``/health`` for load balancers and ``/openapi.json``, the schema of the app's routes."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.schemas import SchemaGenerator

_SCHEMAS = SchemaGenerator({"openapi": "3.0.0", "info": {"title": "memoryscope-plugins", "version": "1"}})


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def openapi(request: Request) -> Response:
    return JSONResponse(_SCHEMAS.get_schema(routes=request.app.routes))


def health_routes() -> list[Route]:
    """``/health`` and ``/openapi.json`` (left out of the schema itself)."""
    return [Route("/health", health), Route("/openapi.json", openapi, include_in_schema=False)]
