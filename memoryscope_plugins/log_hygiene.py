"""Keep logs free of memory text, request bodies and user ids, and SDK loggers free of chatter.

The DashScope, OpenAI and HTTP client libraries log whole requests (prompts, memory text,
queries, sometimes headers) at DEBUG. Unless ``settings.log_content`` is on, their loggers are
held at INFO or at the root logger's level, whichever is higher: turning on DEBUG for the
application does not leak what users said, and an application logging warnings only (the CLI
without ``-v``) gets no INFO line from them either (psycopg's pool logs three per store call).
"""

from __future__ import annotations

import hashlib
import logging
import re

SDK_LOGGERS = ("dashscope", "openai", "httpx", "httpcore", "elastic_transport", "urllib3", "psycopg")
_held: dict[str, int] = {}  # the level this module gave each SDK logger (a level set by others is theirs)


def quiet_sdk_loggers(log_content: bool) -> None:
    """Hold the SDK loggers at max(INFO, the root's level). A logger left unset, or last set here, is
    (re)set; one set above INFO by the application is kept, one set below is raised to INFO. No-op
    when `log_content` is true."""
    if log_content:
        return
    floor = max(logging.INFO, logging.getLogger().getEffectiveLevel())
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or logger.level == _held.get(name):
            level = floor
        elif logger.level < logging.INFO:  # the application's DEBUG: still no request bodies
            level = logging.INFO
        else:
            continue
        logger.setLevel(level)
        _held[name] = level


def user_ref(user_id: str) -> str:
    """How a log line names a user: ``user#`` and 12 hex digits of the id's SHA-256, never the id itself
    (ids are often e-mail addresses). The same id always gives the same reference, so an operator can
    find a user's lines with ``user_ref("acme:anna")``; a guessable id can be confirmed that way too, so
    this keeps ids out of log stores, it does not make them secret."""
    return "user#" + hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def without_password(conninfo: str) -> str:
    """A store URL or connection string without its password (``postgresql://me:***@db/x``,
    ``password=***``), for messages and logs."""
    text = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", conninfo)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", text)
