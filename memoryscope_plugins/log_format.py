"""How the command line logs: readable text, or JSON lines for log collectors (``--log-format json``).

A JSON line is one object: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, and, on lines
written while the server handles a request, ``request_id`` (the ``X-Request-Id`` of the response). An
exception attached to a record is given as its type name (``error``), never its message or traceback,
which may hold memory text. Without ``-v`` only warnings and errors are logged, from every library.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import datetime, timezone

FORMATS = ("text", "json")
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"

# the id of the request being handled (set by the server's RequestIdMiddleware; copied into worker threads)
current_request_id: ContextVar[str | None] = ContextVar("memoryscope_request_id", default=None)


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
                "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        request_id = current_request_id.get()
        if request_id is not None:
            line["request_id"] = request_id
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(verbose: bool = False, log_format: str = "text") -> None:
    """The root logger at INFO (`verbose`) or WARNING, writing `log_format` lines to standard error."""
    if log_format not in FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
