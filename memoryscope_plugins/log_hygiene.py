"""Keep third-party SDK loggers from printing memory text or request bodies.

The DashScope, OpenAI and HTTP client libraries log whole requests (prompts, memory text,
queries, sometimes headers) at DEBUG. Unless ``settings.log_content`` is on, their loggers are
held at INFO, so turning on DEBUG for the application does not leak what users said.
"""

from __future__ import annotations

import logging

SDK_LOGGERS = ("dashscope", "openai", "httpx", "httpcore", "elastic_transport", "urllib3", "psycopg")


def quiet_sdk_loggers(log_content: bool) -> None:
    """Raise the SDK loggers to INFO (a level the user set above INFO is kept); no-op when
    `log_content` is true."""
    if log_content:
        return
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.INFO:  # NOTSET (0) inherits the root's DEBUG
            logger.setLevel(logging.INFO)
