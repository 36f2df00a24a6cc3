"""ASGI middleware in front of the service: Host allow-list on every route; for /v1 and /mcp also the
API key (one credential header, failed attempts limited per client address), the per-key rate limit, the
body size (declared or streamed: the body is read here, whole, before any handler runs) and the JSON
nesting depth."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .auth import ApiKey, KeyRing, RateLimiter
from .safe_json import MAX_DEPTH, TooDeep, check_depth

PROTECTED = ("/v1", "/mcp")
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
                 max_json_depth: int = MAX_DEPTH) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = allowed_hosts if allowed_hosts is not None else default_allowed_hosts()
        self.auth_failures = auth_failures or RateLimiter(1.0, 20)
        self.max_json_depth = max_json_depth

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
        client = (scope.get("client") or ("unknown", 0))[0]
        blocked = self.auth_failures.wait(client)
        if blocked:
            await reply(send, scope, 429, "too many failed authentications from this address",
                        _retry_after(blocked))
            return
        try:
            key = self.keys.lookup(key_from_headers(scope["headers"]))
        except AmbiguousCredentials as exc:
            self.auth_failures.take(client)
            await reply(send, scope, 400, str(exc))
            return
        if key is None:
            self.auth_failures.take(client)
            await reply(send, scope, 401, "missing or unknown API key")
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
