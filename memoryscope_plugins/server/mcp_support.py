"""What every module of MCP tools shares: whom a call acts for, and what a tool may tell its caller when it
fails."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from mcp.server.fastmcp import Context

from ..errors import MemoryScopeError, NotFoundError, StoreError, ValidationError
from .guard import request_id

log = logging.getLogger("memoryscope_plugins.server.mcp_tools")

Resolve = Callable[[Context], tuple[str, str]]  # a tool call's context -> (the store's user id, the tenant)
ResolveTeam = Callable[[Context], str]  # a tool call's context -> the team whose agents' procedures it manages


def tool_errors(tool: Callable[..., Any]) -> Callable[..., Any]:
    """What a tool may tell its caller: the engine's validation message, "not found", or (for anything
    else) that it failed, with the request id; the log gets the exception type and the request id."""
    @functools.wraps(tool)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return tool(*args, **kwargs)
        except ValidationError:
            raise
        except NotFoundError:
            raise ValidationError("not found") from None
        except Exception as exc:
            ctx = kwargs.get("ctx")
            request = getattr(getattr(ctx, "request_context", None), "request", None)
            rid = request_id(request.scope) if request is not None else "-"
            log.error("MCP tool %s failed in request %s (%s)", tool.__name__, rid, type(exc).__name__)
            what = "the memory store is not available; retry later" if isinstance(exc, StoreError) else \
                "internal error" if not isinstance(exc, MemoryScopeError) else "the request failed"
            raise RuntimeError(f"{what} (request id {rid})") from None
    return wrapper
