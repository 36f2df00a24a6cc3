"""The outermost layer of the service: a request id on every request and response, and no exception that
gets out of the app as a traceback, a plain-text 500 or a dropped connection.

Every response carries ``X-Request-Id``; error bodies name it too. An exception that reaches this layer is
logged as its type and the request id only (never its message, which may hold user text), and becomes a
JSON 500 when no response has started. `scrub_log_records` makes the whole process log that way.
"""

from __future__ import annotations

import json
import logging
import secrets

from ..log_format import current_request_id
from .guard import REQUEST_ID

log = logging.getLogger(__name__)


def new_request_id() -> str:
    return secrets.token_hex(8)


class RequestIdMiddleware:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = new_request_id()
        scope[REQUEST_ID] = rid
        token = current_request_id.set(rid)  # log lines written for this request carry its id (--log-format json)
        started = False

        async def send_with_id(message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:  # the last line of defence: see the module docstring
            log.error("request %s failed (%s)", rid, type(exc).__name__)
            if started:
                return  # the status is out; the server ends the response
            body = json.dumps({"error": "internal error", "request_id": rid}).encode()
            try:
                await send({"type": "http.response.start", "status": 500,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode()),
                                        (b"x-request-id", rid.encode())]})
                await send({"type": "http.response.body", "body": body})
            except Exception:  # the connection is gone
                pass
        finally:
            current_request_id.reset(token)


# C0 and C1 controls, DEL and the Unicode line/paragraph separators: what can fake or break a log line
_UNSAFE = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}
_UNSAFE.update({0x2028: "\\u2028", 0x2029: "\\u2029"})


def escape_for_log(text: str) -> str:
    """`text` with every control character and line separator written as an escape: one log line stays one."""
    return text.translate(_UNSAFE)


_installed = False


def scrub_log_records() -> None:
    """Make every log record of this process traceback-free and single-line: an attached exception is
    reduced to its type name, and control characters in the message are escaped. For the ``serve``
    process, where third-party code (uvicorn's invalid-request warning, the MCP SDK) logs tracebacks."""
    global _installed
    if _installed:
        return
    _installed = True
    make_record = logging.getLogRecordFactory()

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception as exc:  # a bad format string in someone's log call
            message = f"{record.msg!r} (unformattable: {type(exc).__name__})"
        if record.exc_info and record.exc_info[0] is not None:
            message = f"{message} ({record.exc_info[0].__name__})"
        record.msg, record.args = escape_for_log(message), ()
        record.exc_info = record.exc_text = record.stack_info = None
        return record

    logging.setLogRecordFactory(factory)
