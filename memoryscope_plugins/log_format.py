"""How the command line logs: readable text, or JSON lines for log collectors (``--log-format json``).

A JSON line is one object: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, and, on lines
written while the server handles a request, ``request_id`` (the ``X-Request-Id`` of the response). An
exception attached to a record is given as its type name (``error``), never its message or traceback,
which may hold memory text. Without ``-v`` only warnings and errors are logged, a text line too names an
attached exception by its type only (the traceback comes with ``-v``), and the client libraries of
`log_hygiene.SDK_LOGGERS` log errors only: their retries and reconnects are not a command's story, whose
failure its own ``error:`` line tells.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import datetime, timezone

from .log_hygiene import SDK_LOGGERS

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


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT` lines; an attached exception's traceback only with `tracebacks`, else its type name at
    the end of the one line (``WARNING x: retrying (ConnectionError)``)."""

    def __init__(self, *, tracebacks: bool) -> None:
        super().__init__(TEXT_FORMAT)
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self.tracebacks or not record.exc_info or record.exc_info[0] is None:
            return super().format(record)
        record.message = record.getMessage()
        return f"{self.formatMessage(record)} ({record.exc_info[0].__name__})"


def configure_logging(verbose: bool = False, log_format: str = "text") -> None:
    """The root logger at INFO (`verbose`) or WARNING, writing `log_format` lines to standard error;
    without `verbose`, no traceback and only errors from the client libraries (see the module docstring)."""
    if log_format not in FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter(tracebacks=verbose))
    if not verbose:
        handler.addFilter(library_errors_only)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def library_errors_only(record: logging.LogRecord) -> bool:
    """A handler filter: every record of ours, only errors of the client libraries (`SDK_LOGGERS`)."""
    if record.levelno >= logging.ERROR:
        return True
    return not any(record.name == name or record.name.startswith(name + ".") for name in SDK_LOGGERS)
