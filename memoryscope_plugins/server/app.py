"""The HTTP API (Starlette): JSON routes over one `MemoryScope`, scoped per tenant, plus MCP and the browser.

Users of a tenant live in the store as ``"<tenant>:<user>"`` (`tenancy`); tenant names never contain
":", so a key of one tenant can never name another tenant's user. The process keeps no state besides
the engine, so any number of instances can serve one PostgreSQL or Elasticsearch store.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.schemas import SchemaGenerator

from ..engine import MemoryScope
from ..errors import ConfigError, MemoryScopeError, ModelError, NotFoundError, StoreError, ValidationError
from ..timeparse import when_label
from . import safe_json
from .auth import ApiKey, KeyRing, RateLimiter
from .guard import GuardMiddleware, current_key, default_allowed_hosts, request_id
from .mcp_tools import build_mcp, mcp_security
from .peers import TrustedProxies
from .pipeline import RequestIdMiddleware
from .tenancy import migrate_legacy_users, public_user_id, store_user_id, strip_tenant

log = logging.getLogger(__name__)


@dataclass
class ServerConfig:
    """How the service guards itself. Defaults are the safe ones (no CORS, 1 MiB bodies, JSON nested 64 deep
    at most, 20 req/s per key, 20 failed authentications per client address and per unknown key then 1 per
    second, a valid key never held back by them; loopback Host names only; no proxy trusted)."""

    max_body_bytes: int = 1 << 20
    rate_per_second: float = 20.0
    rate_burst: int = 40
    cors_origins: list[str] = field(default_factory=list)
    # Host headers served on every route: None means the loopback names plus `bind_host`; "name" allows any
    # port, "name:443" one port, "*" any host (only behind a proxy that checks it)
    allowed_hosts: list[str] | None = None
    bind_host: str | None = None
    auth_failure_rate: float = 1.0
    auth_failure_burst: int = 20
    max_json_depth: int = safe_json.MAX_DEPTH
    # proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (addresses, networks, "*"); see peers.py
    forwarded_allow_ips: list[str] = field(default_factory=list)

    def hosts(self) -> list[str]:
        return list(self.allowed_hosts) if self.allowed_hosts else default_allowed_hosts(self.bind_host)


# The page runs only its own script file (no inline script), sends forms nowhere else, cannot be
# framed, and a <base> tag cannot move its relative URLs. Inline styles stay (style attributes).
BROWSER_HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'self'; "
                                              "style-src 'self' 'unsafe-inline'; base-uri 'none'; "
                                              "form-action 'self'; frame-ancestors 'none'; object-src 'none'",
                   "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def store_user(key: ApiKey, user: str) -> str:
    """The store's user id for a tenant's user (the identifier rule checked: 400), after checking
    the key may reach that user (403)."""
    stored = store_user_id(key.tenant, user)
    if not key.may_reach(user):
        raise ApiError(403, "this key may not reach that user")
    return stored


def public_memory(memory, tenant: str, *, listing: bool = True) -> dict[str, Any]:
    data = memory.to_dict()
    data["user_id"] = public_user_id(data["user_id"], tenant) or data["user_id"]
    if isinstance(data.get("speaker"), str):
        data["speaker"] = strip_tenant(data["speaker"], tenant)
    data.pop("context", None)
    if listing:  # not in an export: `import` takes the stored fields only
        data["when"] = when_label(memory)  # "said 2026-11-25 Wed · event 2026-10": what a listing shows
    return data


def _key(request: Request) -> ApiKey:
    key = current_key(request.scope)
    if key is None:  # the guard lets no request through without one; this is belt and braces
        raise ApiError(401, "missing API key")
    return key


def _admin(request: Request) -> ApiKey:
    key = _key(request)
    if not key.admin:
        raise ApiError(403, "this operation needs an admin key")
    return key


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = safe_json.loads(await request.body())
    except safe_json.TooDeep as exc:
        raise ApiError(400, str(exc)) from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ApiError(400, "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def _given(body: dict[str, Any], name: str) -> Any:
    """A body field as sent (None when absent), for the engine to check."""
    return body.get(name)


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None
    if not 0 <= value <= 1_000_000_000:
        raise ApiError(400, f"{name} must be between 0 and 1000000000")
    return value


def build_routes(engine: MemoryScope) -> list[Route]:
    """The /v1 routes. Each handler runs the synchronous engine call in a worker thread."""

    async def users(request: Request) -> Response:
        """
        summary: The users of the key's tenant (only its own users for a user-bound key).
        """
        key = _key(request)
        names = [public_user_id(u, key.tenant) for u in await run_in_threadpool(engine.users)]
        return JSONResponse({"users": [u for u in names if u is not None and key.may_reach(u)]})

    async def list_memories(request: Request) -> Response:
        """
        summary: A page of a user's memories, newest first (query limit, offset, types, include_expired).
        """
        key = _key(request)
        user = store_user(key, request.path_params["user"])
        types = [t for t in request.query_params.get("types", "").split(",") if t] or None
        expired = request.query_params.get("include_expired", "true").lower() != "false"
        items = await run_in_threadpool(lambda: engine.list(
            user, types=types, include_expired=expired, limit=_int_param(request, "limit", 100),
            offset=_int_param(request, "offset", 0)))
        return JSONResponse({"memories": [public_memory(m, key.tenant) for m in items]})

    async def add_memory(request: Request) -> Response:
        """
        summary: Add a memory directly (body content, optional type, agent_id, event_start, event_end, metadata).
        """
        key = _key(request)
        user = store_user(key, request.path_params["user"])
        body = await _json(request)
        allowed = {"content", "type", "agent_id", "event_start", "event_end", "created_at", "metadata"}
        _reject_unknown(body, allowed)
        memory = await run_in_threadpool(lambda: engine.add(user, _given(body, "content"),
                                                            **{k: v for k, v in body.items() if k != "content"}))
        return JSONResponse(public_memory(memory, key.tenant), status_code=201)

    async def get_memory(request: Request) -> Response:
        """
        summary: One memory.
        """
        key = _key(request)
        user = store_user(key, request.path_params["user"])
        memory = await run_in_threadpool(engine.get, user, request.path_params["memory_id"])
        return JSONResponse(public_memory(memory, key.tenant))

    async def update_memory(request: Request) -> Response:
        """
        summary: Change a memory (body content, status active|expired, metadata, event_start, event_end).
        """
        key = _key(request)
        user = store_user(key, request.path_params["user"])
        body = await _json(request)
        _reject_unknown(body, {"content", "status", "metadata", "event_start", "event_end"})
        memory = await run_in_threadpool(lambda: engine.update(user, request.path_params["memory_id"], **body))
        return JSONResponse(public_memory(memory, key.tenant))

    async def delete_memory(request: Request) -> Response:
        """
        summary: Delete one memory.
        """
        key = _key(request)
        user = store_user(key, request.path_params["user"])
        await run_in_threadpool(engine.delete, user, request.path_params["memory_id"])
        return JSONResponse({"deleted": request.path_params["memory_id"]})

    async def delete_user(request: Request) -> Response:
        """
        summary: Delete every memory of a user (admin key).
        """
        key = _admin(request)
        user = store_user(key, request.path_params["user"])
        return JSONResponse({"deleted": await run_in_threadpool(engine.delete_all, user)})

    async def record(request: Request) -> Response:
        """
        summary: Record conversation messages (body messages [{role, content, name?, timestamp?}], agent_id?, session_id?).
        """  # noqa: E501 - one line of the OpenAPI schema
        key = _key(request)
        user = store_user(key, request.path_params["user"])
        body = await _json(request)
        _reject_unknown(body, {"messages", "agent_id", "session_id"})
        ids = await run_in_threadpool(lambda: engine.record(user, _given(body, "messages"),
                                                            agent_id=body.get("agent_id", "assistant"),
                                                            session_id=body.get("session_id")))
        return JSONResponse({"ids": ids}, status_code=201)

    async def retrieve(request: Request) -> Response:
        """
        summary: What memory recalls for a query, with scores (body query, top_k?, types?, include_expired?, now?, agent_id?).
        """  # noqa: E501 - one line of the OpenAPI schema
        key = _key(request)
        user = store_user(key, request.path_params["user"])
        body = await _json(request)
        _reject_unknown(body, {"query", "top_k", "types", "include_expired", "now", "agent_id", "rerank"})
        result = await run_in_threadpool(lambda: engine.retrieve(user, _given(body, "query"),
                                                                 **{k: v for k, v in body.items() if k != "query"}))
        span = result.time_range
        return JSONResponse({
            "context": result.context, "timings_ms": result.timings_ms,
            "time_range": None if span is None else [span.start and span.start.isoformat(),
                                                     span.end and span.end.isoformat()],
            "memories": [{"memory": public_memory(m.memory, key.tenant), "score": m.score, "scores": m.scores}
                         for m in result.memories]})

    async def export(request: Request) -> Response:
        """
        summary: Every memory of a user as JSON Lines (streamed).
        """
        key = _key(request)
        user = store_user(key, request.path_params["user"])

        def lines():
            for batch in engine.store.iter_memories(user):
                for memory in batch:
                    yield json.dumps(public_memory(memory, key.tenant, listing=False), ensure_ascii=False) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson",
                                 headers={"Content-Disposition": content_disposition(
                                     request.path_params["user"] + ".jsonl")})

    async def import_(request: Request) -> Response:
        """
        summary: Import JSON Lines into a user (admin key); answers {imported, ids} where ids maps every id the
          lines name to the id it is stored under (kept when already the user's, else a stable derived one).
        """
        key = _admin(request)
        user = store_user(key, request.path_params["user"])
        try:
            text = (await request.body()).decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, "the body must be UTF-8 JSON Lines") from None
        result = await run_in_threadpool(lambda: engine.import_with_ids(user, io.StringIO(text), progress=False))
        return JSONResponse({"imported": result.imported, "ids": result.ids})

    async def consolidate(request: Request) -> Response:
        """
        summary: Consolidate a user's pending messages now (needs an LLM; admin key).
        """
        key = _admin(request)
        user = store_user(key, request.path_params["user"])
        report = await run_in_threadpool(engine.consolidate, user)
        return JSONResponse(_report(report))

    async def reflect(request: Request) -> Response:
        """
        summary: Turn a user's observations into insights now (needs an LLM; admin key).
        """
        key = _admin(request)
        user = store_user(key, request.path_params["user"])
        report = await run_in_threadpool(engine.reflect, user)
        return JSONResponse(_report(report))

    base = "/v1/users"
    return [
        Route(base, users, methods=["GET"]),
        Route(base + "/{user}/memories", list_memories, methods=["GET"]),
        Route(base + "/{user}/memories", add_memory, methods=["POST"]),
        # reading and deleting also reach a memory id stored before the identifier rule ("a/b",
        # sent as a%2Fb): the user is always the one path segment before /memories/
        Route(base + "/{user}/memories/{memory_id:path}", get_memory, methods=["GET"]),
        Route(base + "/{user}/memories/{memory_id}", update_memory, methods=["PATCH"]),
        Route(base + "/{user}/memories/{memory_id:path}", delete_memory, methods=["DELETE"]),
        Route(base + "/{user}", delete_user, methods=["DELETE"]),
        Route(base + "/{user}/record", record, methods=["POST"]),
        Route(base + "/{user}/retrieve", retrieve, methods=["POST"]),
        Route(base + "/{user}/export", export, methods=["GET"]),
        Route(base + "/{user}/import", import_, methods=["POST"]),
        Route(base + "/{user}/consolidate", consolidate, methods=["POST"]),
        Route(base + "/{user}/reflect", reflect, methods=["POST"]),
    ]


def _reject_unknown(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(400, f"unknown fields: {', '.join(unknown)}")


def content_disposition(filename: str) -> str:
    """``attachment`` with an ASCII fallback name (letters, digits, '.', '-', '_' only) and the exact name
    percent-encoded as RFC 6266 ``filename*``: no byte of a user id reaches the header unescaped."""
    fallback = "".join(c if c.isascii() and (c.isalnum() or c in ".-_") else "_" for c in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def _report(report) -> dict[str, Any]:
    if hasattr(report, "to_dict"):
        return report.to_dict()
    from dataclasses import asdict, is_dataclass
    return asdict(report) if is_dataclass(report) and not isinstance(report, type) else {"report": str(report)}


def _error(request: Request, status: int, message: str) -> Response:
    return JSONResponse({"error": message, "request_id": request_id(request.scope)}, status_code=status)


async def _api_error(request: Request, exc: Exception) -> Response:
    """JSON for every error. An unexpected exception is a 500 naming only the request id; it is re-raised
    by Starlette afterwards and logged (type and request id) by `RequestIdMiddleware`."""
    if isinstance(exc, ApiError):
        return _error(request, exc.status, exc.message)
    if isinstance(exc, HTTPException):
        return _error(request, exc.status_code, str(exc.detail))
    if isinstance(exc, NotFoundError):
        return _error(request, 404, "not found")
    if isinstance(exc, (ValidationError, ConfigError)):
        return _error(request, 400, str(exc))
    if isinstance(exc, MemoryScopeError):  # not the client's fault; handled here, so logged here
        log.warning("request %s failed (%s)", request_id(request.scope), type(exc).__name__)
        if isinstance(exc, StoreError):  # locked, closed, ...: a retry may work
            return _error(request, 503, "the memory store is not available; retry later")
        if isinstance(exc, ModelError):
            return _error(request, 502, "the model service failed")
    return _error(request, 500, "internal error")


class _Service(Starlette):
    """Starlette with `RequestIdMiddleware` outside everything (outside even its ServerErrorMiddleware,
    which re-raises what it handled)."""

    def build_middleware_stack(self):
        return RequestIdMiddleware(super().build_middleware_stack())


def create_app(engine: MemoryScope, keys: KeyRing, config: ServerConfig | None = None) -> Starlette:
    """The whole service as one ASGI app: /v1 JSON API, /mcp (MCP streamable HTTP), / (the browser),
    /health and /openapi.json. Every /v1 and /mcp request needs a key (``Authorization: Bearer``
    or ``X-API-Key``). Users stored in the layout of older versions are renamed first
    (`tenancy.migrate_legacy_users`)."""
    config = config or ServerConfig()
    migrate_legacy_users(engine)  # "<tenant>/<user>" users of older versions -> "<tenant>:<user>"
    schemas = SchemaGenerator({"openapi": "3.0.0", "info": {"title": "memoryscope-plugins", "version": "1"}})
    mcp = build_mcp(engine, keys=keys, security=mcp_security(config.hosts()))
    mcp_app = mcp.streamable_http_app()

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def openapi(request: Request) -> Response:
        return JSONResponse(schemas.get_schema(routes=request.app.routes))

    async def browser(request: Request) -> Response:
        page = resources.files(__package__).joinpath("static/index.html").read_text(encoding="utf-8")
        return HTMLResponse(page, headers=BROWSER_HEADERS)

    async def browser_script(request: Request) -> Response:
        script = resources.files(__package__).joinpath("static/browser.js").read_text(encoding="utf-8")
        return Response(script, media_type="text/javascript; charset=utf-8", headers=BROWSER_HEADERS)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with mcp.session_manager.run():
            yield

    routes = [Route("/health", health), Route("/openapi.json", openapi, include_in_schema=False),
              Route("/", browser, include_in_schema=False),
              Route("/static/browser.js", browser_script, include_in_schema=False), *build_routes(engine),
              *mcp_app.routes]  # the /mcp route itself, so unknown paths get this app's JSON 404
    middleware = [Middleware(GuardMiddleware, keys=keys,
                             limiter=RateLimiter(config.rate_per_second, config.rate_burst),
                             max_body_bytes=config.max_body_bytes, allowed_hosts=config.hosts(),
                             auth_failures=RateLimiter(config.auth_failure_rate, config.auth_failure_burst),
                             key_failures=RateLimiter(config.auth_failure_rate, config.auth_failure_burst),
                             max_json_depth=config.max_json_depth,
                             trusted_proxies=TrustedProxies(config.forwarded_allow_ips))]
    if config.cors_origins:
        middleware.insert(0, Middleware(CORSMiddleware, allow_origins=config.cors_origins,
                                        allow_methods=["GET", "POST", "PATCH", "DELETE"],
                                        allow_headers=["Authorization", "X-API-Key", "Content-Type",
                                                       "X-Memory-User", "Mcp-Session-Id"]))
    return _Service(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={Exception: _api_error, ApiError: _api_error, HTTPException: _api_error,
                                        MemoryScopeError: _api_error})
