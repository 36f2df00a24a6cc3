"""Robust structured (JSON) output from any `ChatModel`, and a per-user token meter.

`chat_json` asks with ``json_mode=True`` (and a JSON schema, sent the strongest way the endpoint
accepts, when the model takes ``schema=``), parses the answer tolerantly (code fences, prose around
the JSON, ``<think>`` blocks, trailing commas, single-quoted strings, Python literals), checks
required keys, and re-asks up to ``max_repairs`` times with the error appended. Broken JSON is
never "repaired" by guessing (a cut-off answer would become a cut-off memory). An answer that
stopped at the token cap raises `IncompleteAnswerError` at once, with its text: asking again with
the same cap would only cut it off again, so the caller decides (a smaller request, a higher cap).
"""

from __future__ import annotations

import inspect
import json
import re
import threading
from typing import Any, Sequence

from ..errors import ModelError
from .base import ChatCompleter, ChatMessages, ChatResult, JsonSchema, TokenUsage

JsonValue = dict | list

_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\n?(.*?)```", re.DOTALL)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_JSON_HINT = ("Respond with a single JSON object only, no prose and no code fences.")


class JsonParseError(ValueError):
    """The text holds no JSON value this module can recover."""


class IncompleteAnswerError(ModelError):
    """The model stopped at the token cap (``finish_reason`` "length"): its text is incomplete.

    ``text`` is what it wrote, for a caller that can use the complete part of it.
    """

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.text = text


# ---------------------------------------------------------------------------------------------
# Tolerant parsing


def parse_json_loose(text: str) -> JsonValue:
    """Parse the JSON object or array in ``text``, tolerating common LLM formatting slips.

    Raises:
        JsonParseError: with a short reason when nothing usable is found.
    """
    if not isinstance(text, str) or not text.strip():
        raise JsonParseError("the answer was empty")
    cleaned = _THINK_RE.sub("", text).strip()
    candidates = [match.group(1).strip() for match in _FENCE_RE.finditer(cleaned)]
    candidates.append(cleaned)
    first_error = ""
    for candidate in candidates:
        for span in _json_spans(candidate):
            try:
                return _loads_lenient(span)
            except ValueError as exc:
                first_error = first_error or str(exc)
    raise JsonParseError(first_error or "no JSON object or array found in the answer")


def _json_spans(text: str) -> list[str]:
    """The whole text if it is JSON-shaped, else each balanced ``{...}`` / ``[...]`` in it."""
    stripped = text.strip()
    spans = []
    if stripped[:1] in "{[" and stripped[-1:] in "}]":
        spans.append(stripped)
    start = 0
    while True:
        positions = [p for p in (stripped.find("{", start), stripped.find("[", start)) if p >= 0]
        if not positions:
            break
        begin = min(positions)
        end = _matching_close(stripped, begin)
        if end is None:
            spans.append(stripped[begin:])  # unclosed: let the parser report why
            break
        span = stripped[begin:end + 1]
        if span not in spans:
            spans.append(span)
        start = end + 1
    return spans


def _matching_close(text: str, begin: int) -> int | None:
    """Index of the bracket closing the one at ``begin`` (string-aware), or None."""
    depth = 0
    quote: str | None = None
    escaped = False
    for index in range(begin, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char if char == '"' or _opens_single_quote(text, index) else None
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index
    return None


def _opens_single_quote(text: str, index: int) -> bool:
    """A ``'`` starts a string only where a JSON value or key could start."""
    before = text[:index].rstrip()
    return bool(before) and before[-1] in "{[,:"


def _loads_lenient(span: str) -> JsonValue:
    try:
        value = json.loads(span)
    except json.JSONDecodeError:
        value = json.loads(_normalise(span))
    if not isinstance(value, (dict, list)):
        raise JsonParseError("expected a JSON object or array")
    return value


def _normalise(span: str) -> str:
    """Rewrite single-quoted strings, drop trailing commas, map Python literals (string-aware)."""
    out: list[str] = []
    index, length = 0, len(span)
    while index < length:
        char = span[index]
        if char == '"':
            end = _string_end(span, index, '"')
            out.append(span[index:end + 1])
            index = end + 1
        elif char == "'" and _opens_single_quote(span, index):
            end = _string_end(span, index, "'")
            out.append(json.dumps(_unescape_single(span[index + 1:end])))
            index = end + 1
        elif char == ",":
            rest = span[index + 1:].lstrip()
            if not rest or rest[0] in "}]":
                index += 1  # trailing comma
            else:
                out.append(char)
                index += 1
        elif char.isalpha() and (word_match := re.match(r"[A-Za-z_]+", span[index:])) is not None:
            word = word_match.group(0)
            out.append(_PY_LITERALS.get(word, word))
            index += len(word)
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _string_end(text: str, begin: int, quote: str) -> int:
    escaped = False
    for index in range(begin + 1, len(text)):
        char = text[index]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == quote:
            return index
    raise JsonParseError("unterminated string")


def _unescape_single(body: str) -> str:
    try:
        return json.loads('"' + body.replace('"', '\\"').replace("\\'", "'") + '"')
    except json.JSONDecodeError:
        return body.replace("\\'", "'")


def missing_keys(value: JsonValue, required_keys: Sequence[str]) -> list[str]:
    """Required keys absent from ``value`` (all of them if it is not an object)."""
    if not required_keys:
        return []
    if not isinstance(value, dict):
        return list(required_keys)
    return [key for key in required_keys if key not in value]


# ---------------------------------------------------------------------------------------------
# chat_json / achat_json


def chat_json(model: ChatCompleter, messages: ChatMessages, *, required_keys: Sequence[str] = (),
              max_repairs: int = 1, temperature: float | None = None,
              max_tokens: int | None = None, schema: JsonSchema | None = None) -> tuple[JsonValue, TokenUsage]:
    """Ask ``model`` for JSON and return ``(value, usage summed over all attempts)``.

    Raises:
        IncompleteAnswerError: the answer stopped at the token cap.
        ModelError: the answer is still not valid JSON (or lacks ``required_keys``) after
            ``max_repairs`` re-asks, or the model call itself failed.
    """
    conversation = _with_json_hint(messages)
    options = _options(model, temperature, max_tokens, schema)
    usage = TokenUsage()
    problem: str | None = None
    for _ in range(max(0, max_repairs) + 1):
        result = model.chat(conversation, json_mode=True, **options)
        usage += result.usage
        outcome = _evaluate(_complete(model, result), required_keys)
        if not isinstance(outcome, str):
            return outcome, usage
        problem = outcome
        conversation = _repair_request(conversation, result.text, problem)
    raise _give_up(model, problem, max_repairs)


async def achat_json(model: ChatCompleter, messages: ChatMessages, *,
                     required_keys: Sequence[str] = (), max_repairs: int = 1,
                     temperature: float | None = None,
                     max_tokens: int | None = None, schema: JsonSchema | None = None) -> tuple[JsonValue, TokenUsage]:
    """Async twin of `chat_json`."""
    conversation = _with_json_hint(messages)
    options = _options(model, temperature, max_tokens, schema)
    usage = TokenUsage()
    problem: str | None = None
    for _ in range(max(0, max_repairs) + 1):
        result = await model.achat(conversation, json_mode=True, **options)
        usage += result.usage
        outcome = _evaluate(_complete(model, result), required_keys)
        if not isinstance(outcome, str):
            return outcome, usage
        problem = outcome
        conversation = _repair_request(conversation, result.text, problem)
    raise _give_up(model, problem, max_repairs)


def takes_schema(model: ChatCompleter) -> bool:
    """Whether ``model.chat`` accepts ``schema=`` (our clients do; a user's own model may not)."""
    try:
        parameters = inspect.signature(model.chat).parameters
    except (TypeError, ValueError):
        return False
    return "schema" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def _options(model: ChatCompleter, temperature: float | None, max_tokens: int | None,
             schema: JsonSchema | None) -> dict[str, Any]:
    options: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    if schema is not None and takes_schema(model):
        options["schema"] = schema
    return options


def _complete(model: ChatCompleter, result: ChatResult) -> str:
    """The answer's text, or `IncompleteAnswerError` when it stopped at the token cap."""
    if getattr(result, "truncated", False):
        name = getattr(model, "name", type(model).__name__)
        raise IncompleteAnswerError(f"chat model '{name}' stopped at the token cap "
                                    f"({result.usage.completion_tokens} tokens): the answer is incomplete",
                                    result.text)
    return result.text


def _with_json_hint(messages: ChatMessages) -> list[dict]:
    """The messages, plus a system hint if none of them mentions JSON.

    (OpenAI's json mode requires the word "JSON" in the prompt, and it helps every model.)
    """
    conversation = [dict(message) for message in messages]
    if not any("json" in str(message.get("content", "")).lower() for message in conversation):
        conversation.insert(0, {"role": "system", "content": _JSON_HINT})
    return conversation


def _evaluate(text: str, required_keys: Sequence[str]) -> JsonValue | str:
    """The value when usable, else what is wrong with the answer (a string)."""
    try:
        value = parse_json_loose(text)
    except JsonParseError as exc:
        return f"Your previous answer was not valid JSON: {exc}"
    absent = missing_keys(value, required_keys)
    if absent:
        return "Your previous answer was missing the required keys: " + ", ".join(absent)
    return value


def _repair_request(conversation: list[dict], answer: str, problem: str) -> list[dict]:
    return conversation + [
        {"role": "assistant", "content": answer},
        {"role": "user", "content": f"{problem}; answer with only the JSON object"},
    ]


def _give_up(model: ChatCompleter, problem: str | None, max_repairs: int) -> ModelError:
    name = getattr(model, "name", type(model).__name__)
    reason = (problem or "").replace("Your previous answer was ", "the answer was ")
    return ModelError(f"chat model '{name}' gave no usable JSON after {max_repairs + 1} "
                      f"attempt(s): {reason}")


# ---------------------------------------------------------------------------------------------
# Usage metering


class UsageMeter:
    """Thread-safe token counters per ``(user_id, operation)``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], TokenUsage] = {}

    def add(self, user_id: str, operation: str, usage: TokenUsage) -> None:
        """Add ``usage`` to the counter of ``(user_id, operation)``."""
        with self._lock:
            counter = self._counts.setdefault((user_id, operation), TokenUsage())
            counter += usage

    def get(self, user_id: str | None = None, operation: str | None = None) -> TokenUsage:
        """Sum over the counters matching ``user_id`` and ``operation`` (None matches all)."""
        total = TokenUsage()
        with self._lock:
            for (user, op), counter in self._counts.items():
                if (user_id is None or user == user_id) and (operation is None or op == operation):
                    total += counter
        return total

    def snapshot(self) -> dict[str, dict[str, dict[str, int]]]:
        """``{user_id: {operation: {"prompt_tokens", "completion_tokens", "total_tokens"}}}``."""
        with self._lock:
            items = [(key, TokenUsage(c.prompt_tokens, c.completion_tokens))
                     for key, c in self._counts.items()]
        result: dict[str, dict[str, dict[str, int]]] = {}
        for (user, op), counter in items:
            result.setdefault(user, {})[op] = {
                "prompt_tokens": counter.prompt_tokens,
                "completion_tokens": counter.completion_tokens,
                "total_tokens": counter.total_tokens,
            }
        return result

    def reset(self) -> None:
        """Forget every counter."""
        with self._lock:
            self._counts.clear()
