"""The HTTP API (Starlette): JSON routes over one `MemoryScope`, scoped per tenant, plus MCP and the browser.

Users of a tenant live in the store as ``"<tenant>:<user>"``, the default tenant's as the store's own
``"<user>"`` (`tenancy`); tenant names and default users never contain ":", so a key of one tenant can never
name another tenant's user. The process keeps no state besides
the engine, so any number of instances can serve one PostgreSQL or Elasticsearch store.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route

from ..engine import MemoryScope
from ..errors import MemoryScopeError
from . import safe_json
from .auth import KeyRing, RateLimiter
from .guard import GuardMiddleware, default_allowed_hosts
from .mcp_tools import build_mcp, mcp_security
from .metrics import RequestMetricsMiddleware, metrics_route
from .peers import TrustedProxies
from .pipeline import RequestIdMiddleware
from .route_support import ApiError, api_error
from .routes_agents import agent_routes
from .routes_browser import browser_routes
from .routes_conversation import conversation_routes
from .routes_entities import entity_routes
from .routes_health import health_routes
from .routes_memories import memory_routes
from .routes_users import user_routes
from .tenancy import migrate_legacy_users


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


def build_routes(engine: MemoryScope) -> list[Route]:
    """The /v1 routes: the tenant's users, a user's memories, the conversation cycle, a user's entities
    and profile, and the tenant's agents' procedures."""
    base = "/v1/users"
    return [*user_routes(engine, base), *memory_routes(engine, base), *conversation_routes(engine, base),
            *entity_routes(engine, base), *agent_routes(engine, "/v1/agents")]


class _Service(Starlette):
    """Starlette with `RequestIdMiddleware` outside everything (outside even its ServerErrorMiddleware,
    which re-raises what it handled), and the request metrics outside that (they see its 500s)."""

    def build_middleware_stack(self):
        return RequestMetricsMiddleware(RequestIdMiddleware(super().build_middleware_stack()), self.routes)


def create_app(engine: MemoryScope, keys: KeyRing, config: ServerConfig | None = None) -> Starlette:
    """The whole service as one ASGI app: /v1 JSON API, /mcp (MCP streamable HTTP), / (the browser),
    /health, /metrics (Prometheus, admin key) and /openapi.json. Every /v1, /mcp and /metrics request
    needs a key (``Authorization: Bearer`` or ``X-API-Key``). Users stored in the layout of older
    versions are renamed first (`tenancy.migrate_legacy_users`)."""
    config = config or ServerConfig()
    migrate_legacy_users(engine)  # users of older layouts ("<tenant>/<user>", "default:<user>") -> current ids
    mcp = build_mcp(engine, keys=keys, security=mcp_security(config.hosts()))
    mcp_app = mcp.streamable_http_app()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with mcp.session_manager.run():
            yield

    routes = [*health_routes(), metrics_route(engine.store), *browser_routes(), *build_routes(engine),
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
                                        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                                        allow_headers=["Authorization", "X-API-Key", "Content-Type",
                                                       "X-Memory-User", "Mcp-Session-Id"]))
    return _Service(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={Exception: api_error, ApiError: api_error, HTTPException: api_error,
                                        MemoryScopeError: api_error})
