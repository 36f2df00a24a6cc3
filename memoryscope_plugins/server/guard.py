"""ASGI middleware in front of /v1 and /mcp: API key, rate limit and request size, before any handler runs."""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from .auth import ApiKey, KeyRing, RateLimiter

PROTECTED = ("/v1", "/mcp")
SCOPE_KEY = "memoryscope.api_key"


def key_from_headers(headers: dict[bytes, bytes] | Any) -> str | None:
    """The key from ``Authorization: Bearer <key>`` or ``X-API-Key`` (never from the URL, which logs keep)."""
    getter: Callable[[Any], Any] = headers.get
    auth = getter(b"authorization") if isinstance(headers, dict) else getter("authorization")
    if auth:
        auth = auth.decode("latin-1") if isinstance(auth, bytes) else auth
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    raw = getter(b"x-api-key") if isinstance(headers, dict) else getter("x-api-key")
    if raw:
        return raw.decode("latin-1") if isinstance(raw, bytes) else raw
    return None


def current_key(scope: Mapping[str, Any]) -> ApiKey | None:
    return scope.get(SCOPE_KEY)


async def _reply(send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    def __init__(self, app, *, keys: KeyRing, limiter: RateLimiter, max_body_bytes: int) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PROTECTED) or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        key = self.keys.lookup(key_from_headers(headers))
        if key is None:
            await _reply(send, 401, "missing or unknown API key")
            return
        if not self.limiter.allow(key.key_hash):
            await _reply(send, 429, "rate limit exceeded")
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await _reply(send, 413, "request body too large")
            return
        scope[SCOPE_KEY] = key
        limit = self.max_body_bytes
        seen = 0
        started = False

        async def counted_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _TooLarge()
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _reply(send, 413, "request body too large")


class _TooLarge(Exception):
    pass
