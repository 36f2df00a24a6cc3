"""The agent's tool calls of a turn as the messages `MemoryScope.record` takes, framework-free.

Every adapter reads its framework's calls and results (each in its own types) and hands them
here as `CallSeen` / `ResultSeen`; `tool_messages` pairs a call with its result by call id and
turns each pair into one ``{"role": "tool", "tool_call": {...}}`` message the engine accepts as
it is: a call always records, whatever the model or the tool produced.

- Arguments are the JSON object the model produced. Arguments that are not a JSON object
  (text that is not JSON, a list, a value JSON cannot hold, too large or too deep) are kept as
  their text under ``"_unparsed"`` (cut to the engine's limit), never dropped, never a crash.
- A tool name the engine refuses (spaces, slashes...) has those characters replaced by ``_``.
- A result or error longer than the engine's text limit is cut to it (with a marker); NUL
  characters and lone surrogates are replaced.
- A call with no result is not recorded while its turn goes on or ended normally (a client-side
  tool's result comes back later); in a turn the framework raised out of, an adapter asks for it
  (``keep_unanswered=True``) and it is recorded with status ``unknown``: made, its outcome never seen.
  `unanswered` counts the ones left out for the adapter's debug log.

This module imports no agent framework and logs no argument, result or error text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.tool_calls import MAX_ARGUMENT_CHARS, TOOL_NAME_PATTERN, check_tool_call

UNPARSED = "_unparsed"  # the key arguments that are not a JSON object are kept under
CUT = " [...]"  # ends a result or error text cut to the engine's limit
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.:-]")


@dataclass(frozen=True)
class CallSeen:
    """A tool call the agent's model made: its tool, its arguments (a mapping, or the model's
    text) and the framework's id of the call, when it has one."""

    name: str
    arguments: Any
    call_id: str | None = None


@dataclass(frozen=True)
class ResultSeen:
    """What came back for a call: its text, whether the framework says it failed, how long it
    took (milliseconds, when the framework tells)."""

    call_id: str | None
    text: str
    failed: bool = False
    duration_ms: float | None = None
    name: str | None = None


def tool_messages(calls: Iterable[CallSeen], results: Iterable[ResultSeen], *, max_chars: int,
                  durations: Mapping[str, float] | None = None, keep_unanswered: bool = False) -> list[dict[str, Any]]:
    """One tool message per call that has a result (with `keep_unanswered`, per call: one without a
    result has status ``unknown``), in the calls' order.

    A result goes with the call of its id; a result without an id goes with the first call of
    its tool name not answered yet. `durations` (call id -> milliseconds) fills the duration a
    result does not carry (an adapter timing the tool itself)."""
    calls = list(calls)
    by_id: dict[str, ResultSeen] = {}
    unnamed: list[ResultSeen] = []
    for seen in results:
        if seen.call_id is not None and seen.call_id not in by_id:
            by_id[seen.call_id] = seen
        elif seen.call_id is None:
            unnamed.append(seen)
    messages = []
    for call in calls:
        result: ResultSeen | None = by_id.get(call.call_id) if call.call_id is not None else None
        if result is None:
            result = next((r for r in unnamed if r.name == call.name), None)
            if result is not None:
                unnamed.remove(result)
        if result is None:
            if keep_unanswered:
                messages.append(unknown_message(call, max_chars=max_chars))
            continue
        duration = result.duration_ms
        if duration is None and durations is not None and call.call_id is not None:
            duration = durations.get(call.call_id)
        messages.append(tool_message(call, result, max_chars=max_chars, duration_ms=duration))
    return messages


def unanswered(calls: Sequence[CallSeen], messages: Sequence[Mapping[str, Any]]) -> int:
    """How many of `calls` got no message (no result seen)."""
    return max(0, len(calls) - len(messages))


def tool_message(call: CallSeen, result: ResultSeen, *, max_chars: int,
                 duration_ms: float | None = None) -> dict[str, Any]:
    """The message recording `call` with its `result` (always one the engine accepts)."""
    text = safe_text(result.text, max_chars)
    fields: dict[str, Any] = {
        "name": tool_name(call.name), "arguments": arguments_of(call.arguments, max_chars),
        "status": "error" if result.failed else "ok", "call_id": _call_id(call.call_id),
        "duration_ms": _duration(duration_ms),
    }
    fields["error" if result.failed else "result"] = text
    try:
        check_tool_call(fields, "tool call", max_chars)
    except ValidationError:  # a case the steps above missed: the call still counts, without its arguments
        fields["arguments"] = {}
    return {"role": "tool", "content": "", "tool_call": fields}


def unknown_message(call: CallSeen, *, max_chars: int) -> dict[str, Any]:
    """The message recording `call` made with its outcome never seen (status ``unknown``)."""
    fields: dict[str, Any] = {"name": tool_name(call.name), "arguments": arguments_of(call.arguments, max_chars),
                              "status": "unknown", "call_id": _call_id(call.call_id)}
    try:
        check_tool_call(fields, "tool call", max_chars)
    except ValidationError:  # as in `tool_message`: the call still counts, without its arguments
        fields["arguments"] = {}
    return {"role": "tool", "content": "", "tool_call": fields}


def tool_name(name: Any) -> str:
    """`name` as a tool name the engine accepts (other characters become ``_``)."""
    text = name if isinstance(name, str) else str(name)
    if TOOL_NAME_PATTERN.fullmatch(text):
        return text
    cleaned = _NOT_NAME.sub("_", text)[:128]
    if not cleaned or not TOOL_NAME_PATTERN.fullmatch(cleaned):
        cleaned = ("_" + cleaned)[:128] if cleaned else "unnamed_tool"
    return cleaned


def arguments_of(raw: Any, max_chars: int) -> dict[str, Any]:
    """The call's arguments as a JSON object (see the module docstring for what else becomes)."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, (str, bytes, bytearray)):
        text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
        try:
            value = json.loads(text)
        except ValueError:
            return _unparsed(text, max_chars)
        return _as_object(value, text, max_chars)
    if isinstance(raw, Mapping):
        try:
            text = json.dumps(raw, allow_nan=False, ensure_ascii=False, default=str)
        except (TypeError, ValueError):  # keys that are not strings, NaN...
            return _unparsed(repr(dict(raw)), max_chars)
        return _as_object(json.loads(text), text, max_chars)
    return _unparsed(repr(raw), max_chars)


def _as_object(value: Any, text: str, max_chars: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        return _unparsed(text, max_chars)
    try:
        check_tool_call({"name": "t", "arguments": value}, "arguments", max_chars)
    except ValidationError:  # too large, too deep, NUL, surrogates
        return _unparsed(text, max_chars)
    return value


def _unparsed(text: str, max_chars: int) -> dict[str, Any]:
    return {UNPARSED: safe_text(text, min(max_chars, MAX_ARGUMENT_CHARS // 2))}


def safe_text(text: Any, max_chars: int) -> str:
    """`text` as text the engine takes: NULs and lone surrogates replaced, cut to `max_chars`."""
    value = text if isinstance(text, str) else ("" if text is None else str(text))
    value = value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    if len(value) > max_chars:
        value = value[:max_chars - len(CUT)] + CUT
    return value


def _call_id(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text or len(text) > 256 or not text.isprintable():
        return None
    return text


def _duration(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value <= 7 * 24 * 3600 * 1000.0 else None


__all__ = ["CUT", "CallSeen", "ResultSeen", "UNPARSED", "arguments_of", "safe_text", "tool_message", "tool_messages",
           "tool_name", "unanswered", "unknown_message"]
