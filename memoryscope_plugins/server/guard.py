"""ASGI middleware in front of the service: Host allow-list on every route; for /mcp the browser's Origin
(this server's own only); for /v1, /mcp and /metrics the API key (one credential header), the per-key rate limit,
the body size (declared or streamed: the body is read here, whole, before any handler runs) and the JSON
nesting depth.

Failed authentications are limited per client address (`peers.client_address`: behind trusted proxies,
the forwarded one) and per presented key, but the key is looked up first and a valid key never meets that
limit: others' failures, from the same address or proxy, cannot lock a good key out. Only further failed
attempts are held back (429), which keeps guessing slow; keys are 256-bit random tokens."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .auth import ApiKey, KeyRing, RateLimiter, hash_key
from .peers import TrustedProxies, client_address, same_origin
from .safe_json import MAX_DEPTH, TooDeep, check_depth

PROTECTED = ("/v1", "/mcp", "/metrics")
SCOPE_KEY = "memoryscope.api_key"
REQUEST_ID = "memoryscope.request_id"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
CREDENTIAL_HEADERS = (b"authorization", b"x-api-key")


class AmbiguousCredentials(ValueError):
    """More than one credential header (two Authorization headers, or Authorization and X-API-Key)."""


def key_from_headers(headers: Any) -> str | None:
    """The key from ``Authorization: Bearer <key>`` or ``X-API-Key`` (never from the URL, which logs keep).

    `headers` is an ASGI header list, a Starlette `Headers`, or a dict. One rule everywhere: more than one
    credential header raises `AmbiguousCredentials` (HTTP routes answer 400, MCP tools an error)."""
    values = _credential_headers(headers)
    if len(values) > 1:
        raise AmbiguousCredentials("send one credential: a single Authorization or X-API-Key header")
    if not values:
        return None
    name, value = values[0]
    if name == b"x-api-key":
        return value.strip() or None
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def _credential_headers(headers: Any) -> list[tuple[bytes, str]]:
    if hasattr(headers, "raw"):  # starlette Headers
        headers = headers.raw
    if isinstance(headers, dict):
        headers = list(headers.items())
    out = []
    for name, value in headers:
        name = name.lower() if isinstance(name, bytes) else name.lower().encode("latin-1")
        if name in CREDENTIAL_HEADERS:
            out.append((name, value.decode("latin-1") if isinstance(value, bytes) else value))
    return out


def current_key(scope: Mapping[str, Any]) -> ApiKey | None:
    return scope.get(SCOPE_KEY)


def request_id(scope: Mapping[str, Any]) -> str:
    return scope.get(REQUEST_ID, "-")


def default_allowed_hosts(bind_host: str | None = None) -> list[str]:
    """Loopback names plus the bound address (unless it is a wildcard such as 0.0.0.0)."""
    hosts = list(LOOPBACK_HOSTS)
    if bind_host and bind_host not in ("0.0.0.0", "::", ""):
        name = f"[{bind_host}]" if ":" in bind_host and not bind_host.startswith("[") else bind_host
        if name.lower() not in hosts:
            hosts.append(name.lower())
    return hosts


def _split_host(value: str) -> tuple[str, str | None]:
    """("name", "port" or None) of a Host header value or an allow-list entry; ("", None) if malformed."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return "", None
        name, rest = value[:end + 1], value[end + 1:]
        if not rest:
            return name, None
        return (name, rest[1:]) if rest.startswith(":") else ("", None)
    name, colon, port = value.partition(":")
    return (name, port if colon else None) if ":" not in port else ("", None)


def host_allowed(host: str | None, allowed: list[str]) -> bool:
    """Whether a Host header value is on the allow-list. An entry ``name`` allows any port, ``name:8080``
    that port only, ``name:*`` any port; ``*`` allows every host (a proxy in front checks it)."""
    if "*" in allowed:
        return True
    if not host:
        return False
    name, port = _split_host(host.strip().lower())
    if not name or (port is not None and not port.isdigit()):
        return False
    for entry in allowed:
        entry_name, entry_port = _split_host(entry.lower())
        if entry_name == name and (entry_port in (None, "*") or entry_port == port):
            return True
    return False


async def reply(send, scope: Mapping[str, Any], status: int, message: str,
                headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """A JSON error response naming the request id."""
    body = json.dumps({"error": message, "request_id": request_id(scope)}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def _retry_after(wait_s: float) -> list[tuple[bytes, bytes]]:
    return [(b"retry-after", str(max(1, math.ceil(wait_s))).encode())]


class GuardMiddleware:
    def __init__(self, app, *, keys: KeyRing, limiter: RateLimiter, max_body_bytes: int,
                 allowed_hosts: list[str] | None = None, auth_failures: RateLimiter | None = None,
                 key_failures: RateLimiter | None = None, max_json_depth: int = MAX_DEPTH,
                 trusted_proxies: TrustedProxies | None = None) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = allowed_hosts if allowed_hosts is not None else default_allowed_hosts()
        self.auth_failures = auth_failures or RateLimiter(1.0, 20)  # per client address
        self.key_failures = key_failures or RateLimiter(1.0, 20)  # per presented (unknown) key
        self.max_json_depth = max_json_depth
        self.trusted_proxies = trusted_proxies or TrustedProxies()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if not host_allowed(host, self.allowed_hosts):
            await reply(send, scope, 421, "this Host is not served here (see --allowed-host)")
            return
        if not scope["path"].startswith(PROTECTED) or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith("/mcp") and not self._origin_allowed(scope):
            await reply(send, scope, 403, "this Origin is not this server's (MCP takes same-origin browser calls)")
            return
        try:
            presented = key_from_headers(scope["headers"])
        except AmbiguousCredentials as exc:
            await self._failed(scope, send, None, 400, str(exc))
            return
        key = self.keys.lookup(presented)
        if key is None:
            await self._failed(scope, send, presented, 401, "missing or unknown API key")
            return
        wait = self.limiter.take(key.key_hash)
        if wait:
            await reply(send, scope, 429, "rate limit exceeded", _retry_after(wait))
            return
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await reply(send, scope, 413, "request body too large")
            return
        body = await self._read_body(receive)
        if body is _GONE:
            return  # the client left mid-body: nobody to answer
        if body is None:
            await reply(send, scope, 413, "request body too large")
            return
        if body:
            try:
                check_depth(body, self.max_json_depth)
            except TooDeep as exc:
                await reply(send, scope, 400, str(exc))
                return
        scope[SCOPE_KEY] = key
        await self.app(scope, _replay(body, receive), send)

    def _origin_allowed(self, scope) -> bool:
        origins = [v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"]
        if not origins:
            return True  # not a browser: nothing to rebind
        return len(origins) == 1 and same_origin(origins[0], scope, self.trusted_proxies)

    async def _failed(self, scope, send, presented: str | None, status: int, message: str) -> None:
        """Answer a failed authentication: 429 while its address or its key is over the failure limit
        (nothing more is counted then), else `status`, counting the failure against both."""
        client = "addr:" + client_address(scope, self.trusted_proxies)
        presented_key = "key:" + hash_key(presented)[:32] if presented else None
        blocked = max(self.auth_failures.wait(client),
                      self.key_failures.wait(presented_key) if presented_key else 0.0)
        if blocked:
            await reply(send, scope, 429, "too many failed authentications", _retry_after(blocked))
            return
        self.auth_failures.take(client)
        if presented_key:
            self.key_failures.take(presented_key)
        await reply(send, scope, status, message)

    async def _read_body(self, receive) -> bytes | None:
        """The whole body (None when it passes the limit; _GONE when the client left)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return _GONE
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


_GONE = b"<gone>"  # compared by identity


def _replay(body: bytes, receive):
    sent = False

    async def replayed() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: wait for the disconnect, as the server would
    return replayed
