"""Structured output the strongest way an endpoint accepts, stepping down when it refuses.

The ladder, strongest first:

* ``json_schema``: OpenAI's ``{"type": "json_schema", "json_schema": {...}}`` (OpenAI, vLLM,
  the llama.cpp server, Ollama, SGLang): the endpoint constrains decoding to the schema;
* ``json_object_schema``: ``{"type": "json_object", "schema": {...}}`` (llama-cpp-python's
  server turns the schema into a grammar);
* ``json_object``: plain JSON mode;
* ``none``: no ``response_format`` at all (the prompt still asks for JSON and the answer is parsed
  tolerantly).

A client starts at the configured rung (``llm.structured_output``; ``auto`` is the top) and, when
the endpoint rejects a request because of its ``response_format`` (HTTP 400 or 422 naming it; a
500 naming it, as llama-cpp-python's server answers),
steps down one rung for good and asks again at once. A rejection costs one quick request, once
per endpoint and model for the life of the process: what an endpoint refused is remembered per
(provider, base URL, model) (`endpoint_key`), so a second client of the same endpoint (a second
engine, a restarted worker thread) starts on the rung that worked.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Literal, NamedTuple

log = logging.getLogger(__name__)

StructuredMode = Literal["auto", "json_schema", "json_object_schema", "json_object", "none"]
LADDER: tuple[str, ...] = ("json_schema", "json_object_schema", "json_object", "none")
REJECTION_MARKERS: tuple[str, ...] = ("response_format", "response format", "json_schema", "json_object",
                                      "json mode", "schema", "guided")


class EndpointKey(NamedTuple):
    """Which endpoint and model a ladder's refusals are remembered for."""

    provider: str
    base_url: str
    model: str


def endpoint_key(provider: str, base_url: str | None, model: str) -> EndpointKey:
    """The key under which refusals are shared (trailing slashes and case of the URL ignored)."""
    return EndpointKey(provider, (base_url or "").rstrip("/").lower(), model)


# The lowest rung each endpoint has been seen to need: shared by every client of the process.
_refused_below: dict[EndpointKey, int] = {}
_refused_lock = threading.Lock()


def forget_refusals() -> None:
    """Forget every endpoint's refusals (tests; or after an endpoint was upgraded)."""
    with _refused_lock:
        _refused_below.clear()


def rejects_format(status: int | None, text: str) -> bool:
    """Whether an error answer says the endpoint does not accept the ``response_format`` sent.

    llama-cpp-python's server answers a request it cannot validate with HTTP 500 (naming
    ``response_format`` in the body), so a 500 counts when it names that field.
    """
    lowered = text.lower()
    if status == 500:
        return "response_format" in lowered
    if status not in (400, 422):
        return False
    return any(marker in lowered for marker in REJECTION_MARKERS)


class FormatLadder:
    """Where a client stands on the ladder (shared by its sync and async calls).

    With an ``endpoint`` key, a step down is remembered for every ladder of the process with the
    same key, and a new ladder starts below what that endpoint already refused.
    """

    def __init__(self, start: StructuredMode = "auto", endpoint: EndpointKey | None = None) -> None:
        if start not in ("auto",) + LADDER:
            raise ValueError(f"unknown structured output mode {start!r}")
        self._start = 0 if start == "auto" else LADDER.index(start)
        self._endpoint = endpoint
        self._lock = threading.Lock()

    @property
    def _level(self) -> int:
        if self._endpoint is None:
            return self._start
        with _refused_lock:
            return max(self._start, _refused_below.get(self._endpoint, 0))

    @property
    def mode(self) -> str:
        """The rung in use now."""
        return LADDER[self._level]

    def response_format(self, json_mode: bool, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        """The ``response_format`` to send for this call (None: send none)."""
        if not json_mode and schema is None:
            return None
        level = self._level
        if schema is None:  # JSON without a schema: the best rung that needs none
            level = max(level, LADDER.index("json_object"))
        mode = LADDER[level]
        if mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": False}}
        if mode == "json_object_schema":
            return {"type": "json_object", "schema": schema}
        if mode == "json_object":
            return {"type": "json_object"}
        return None

    def step_down(self, sent: dict[str, Any] | None) -> bool:
        """The endpoint refused ``sent``: go one rung below it. False when there is nowhere to go."""
        if sent is None:
            return False
        if sent.get("type") == "json_schema":
            refused = LADDER.index("json_schema")
        elif "schema" in sent:
            refused = LADDER.index("json_object_schema")
        else:
            refused = LADDER.index("json_object")
        with self._lock:
            self._start = max(self._start, refused + 1)
        if self._endpoint is not None:
            with _refused_lock:
                _refused_below[self._endpoint] = max(_refused_below.get(self._endpoint, 0), refused + 1)
        return True

    def refused(self, request: dict[str, Any], status: int | None, error: str, json_mode: bool,
                schema: dict[str, Any] | None, who: str = "the endpoint") -> bool:
        """Handle an error answer to ``request``: when it refuses the ``response_format`` sent,
        step down and rewrite the request for the next rung (True: send it again). False: the
        error is about something else, or there is no rung left."""
        sent = request.get("response_format")
        if sent is None or not rejects_format(status, error) or not self.step_down(sent):
            return False
        log.debug("%s rejected response_format %s; now using %s", who, sent.get("type"), self.mode)
        replacement = self.response_format(json_mode, schema)
        if replacement is None:
            del request["response_format"]
        else:
            request["response_format"] = replacement
        return True
