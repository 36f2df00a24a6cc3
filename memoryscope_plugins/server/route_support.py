"""What every /v1 route module shares: the request's key, its body and query parsed, a memory as the
API shows it, and every error as JSON."""

from __future__ import annotations

import logging
from dataclasses import asdict, is_dataclass
from typing import Any
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import metrics
from ..errors import ConfigError, MemoryScopeError, ModelError, NotFoundError, StoreError, ValidationError
from ..timeparse import when_label
from . import safe_json
from .auth import ApiKey
from .guard import current_key, request_id
from .tenancy import public_user_id, store_user_id, strip_tenant

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An answer with this status and message, raised by a route (400, 401, 403)."""

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
    """A memory as the API shows it: the tenant's prefix taken off its user and speaker."""
    data = memory.to_dict()
    data["user_id"] = public_user_id(data["user_id"], tenant) or data["user_id"]
    if isinstance(data.get("speaker"), str):
        data["speaker"] = strip_tenant(data["speaker"], tenant)
    data.pop("context", None)
    if listing:  # not in an export: `import` takes the stored fields only
        data["when"] = when_label(memory)  # "said 2026-11-25 Wed · event 2026-10": what a listing shows
    return data


def request_key(request: Request) -> ApiKey:
    """The key the guard authenticated for this request."""
    key = current_key(request.scope)
    if key is None:  # the guard lets no request through without one; this is belt and braces
        raise ApiError(401, "missing API key")
    return key


def admin_key(request: Request) -> ApiKey:
    """The request's key, which must be an admin key (403 otherwise)."""
    key = request_key(request)
    if not key.admin:
        raise ApiError(403, "this operation needs an admin key")
    return key


async def json_body(request: Request, allowed: set[str]) -> dict[str, Any]:
    """The body as a JSON object with no field outside `allowed` (400 otherwise)."""
    try:
        body = safe_json.loads(await request.body())
    except safe_json.TooDeep as exc:
        raise ApiError(400, str(exc)) from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ApiError(400, "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(400, f"unknown fields: {', '.join(unknown)}")
    return body


def given(body: dict[str, Any], name: str) -> Any:
    """A body field as sent (None when absent), for the engine to check."""
    return body.get(name)


def int_param(request: Request, name: str, default: int) -> int:
    """A query parameter as an int (400 when it is not one); its range is the engine's to check."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None


def content_disposition(filename: str) -> str:
    """``attachment`` with an ASCII fallback name (letters, digits, '.', '-', '_' only) and the exact name
    percent-encoded as RFC 6266 ``filename*``: no byte of a user id reaches the header unescaped."""
    fallback = "".join(c if c.isascii() and (c.isalnum() or c in ".-_") else "_" for c in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def report_dict(report) -> dict[str, Any]:
    """A consolidation or reflection report as JSON."""
    if hasattr(report, "to_dict"):
        return report.to_dict()
    return asdict(report) if is_dataclass(report) and not isinstance(report, type) else {"report": str(report)}


# seconds a client is told to wait when the store is away (PostgreSQL restarting, SQLite locked)
STORE_RETRY_AFTER_S = 2


def _error(request: Request, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message, "request_id": request_id(request.scope)}, status_code=status,
                        headers=headers)


async def api_error(request: Request, exc: Exception) -> Response:
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
            metrics.recorder().store_error("api", type(exc).__name__)
            return _error(request, 503, "the memory store is not available; retry later",
                          {"Retry-After": str(STORE_RETRY_AFTER_S)})
        if isinstance(exc, ModelError):
            return _error(request, 502, "the model service failed")
    return _error(request, 500, "internal error")
