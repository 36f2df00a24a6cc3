"""Tool calls as `record` takes them: the checks at the entry point, and what the tool statistics
keep of a call without a model (docs/procedural.md): its normalised error text, its argument shape
and its latency bucket.

Nothing here keeps a value the caller passed to a tool. An argument shape is the top-level argument
names with their JSON types; an error is normalised (quoted strings, URLs, e-mail addresses, paths,
ids, numbers and capitalised words inside a sentence replaced by placeholders) and capped, so the
statistics an agent shares across its users carry no user's data the normalisation can recognise.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping

from .errors import ValidationError
from .types import ToolCall

TOOL_NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}")
TOOL_NAME_RULE = "1-128 characters of letters, digits, '_', '.', ':' or '-', not starting with '.', ':' or '-'"
MAX_ARGUMENT_CHARS = 65_536  # the arguments object as JSON
MAX_ARGUMENT_DEPTH = 32
MAX_DURATION_MS = 7 * 24 * 3600 * 1000.0  # a week: a longer figure is a unit mistake
STATUSES = ("ok", "error", "unknown")  # unknown: the call was made, its outcome never seen
CALL_KEYS = frozenset({"name", "arguments", "status", "result", "error", "duration_ms", "call_id"})

MAX_ERROR_CHARS = 160  # a normalised error is cut here (with "...")
# only the start of an error text is normalised (the rest could not reach the cut result): the work per
# error stays bounded whatever its length, which `max_content_chars` allows up to 100,000 characters
MAX_ERROR_INPUT_CHARS = 1_000
MAX_SHAPE_ARGS = 32  # argument names in a shape; more are counted as "+N"
# latency buckets grow by this factor: bucket k (k >= 1) holds (GROWTH**(k-1), GROWTH**k] ms, bucket 0 holds
# [0, 1] ms; a percentile is reported as its bucket's upper bound, < 4.5 % above the true value
GROWTH = 2 ** (1 / 16)


def check_tool_call(raw: Any, what: str, max_text_chars: int) -> ToolCall:
    """A `ToolCall` (or a dict of its fields) checked and normalised, or `ValidationError` naming
    the field and the rule (never quoting the values)."""
    if isinstance(raw, ToolCall):
        raw = raw.to_dict()
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{what} must be a ToolCall or a dict, not {type(raw).__name__}")
    unknown = set(raw) - CALL_KEYS
    if unknown:
        raise ValidationError(f"{what} has unknown keys {sorted(map(str, unknown))}")
    name = raw.get("name")
    if not isinstance(name, str) or TOOL_NAME_PATTERN.fullmatch(name) is None:
        raise ValidationError(f"{what} name must be a tool name ({TOOL_NAME_RULE})")
    arguments = _check_arguments(raw.get("arguments"), what)
    result = _optional_text(raw.get("result"), f"{what} result", max_text_chars)
    error = _optional_text(raw.get("error"), f"{what} error", max_text_chars)
    status = raw.get("status")
    if status is None:
        status = "error" if error is not None else "ok"
    if status not in STATUSES:
        raise ValidationError(f"{what} status must be one of {STATUSES}")
    if status == "ok" and error is not None:
        raise ValidationError(f"{what} has an error but status 'ok'")
    if status == "error" and result is not None:
        raise ValidationError(f"{what} has a result but status 'error' (give the failure as 'error')")
    if status == "unknown" and (result is not None or error is not None):
        raise ValidationError(f"{what} has status 'unknown' (no outcome seen) but a result or an error")
    return ToolCall(name=name, arguments=arguments, status=status, result=result, error=error,
                    duration_ms=check_duration(raw.get("duration_ms"), f"{what} duration_ms"),
                    call_id=_check_call_id(raw.get("call_id"), what))


def _check_arguments(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} arguments must be a JSON object (a dict), not {type(value).__name__}")
    _check_keys(value, what, 0)
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} arguments must be JSON (strings as keys, no NaN or Infinity): "
                              f"{type(exc).__name__}") from None
    if len(text) > MAX_ARGUMENT_CHARS:
        raise ValidationError(f"{what} arguments have {len(text)} characters as JSON; the limit is "
                              f"{MAX_ARGUMENT_CHARS}")
    if "\x00" in text or "\\u0000" in text:
        raise ValidationError(f"{what} arguments contain a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{what} arguments contain a lone surrogate (not valid Unicode text)") from None
    return json.loads(text)  # a normalised copy: every store keeps and returns the same value


def _check_keys(value: Any, what: str, depth: int) -> None:
    """Every object's keys are strings (JSON would turn 1 into "1": the call would not read back as
    given), at most `MAX_ARGUMENT_DEPTH` levels deep."""
    if depth > MAX_ARGUMENT_DEPTH:
        raise ValidationError(f"{what} arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep")
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise ValidationError(f"{what} arguments must be JSON (strings as keys, no NaN or Infinity): "
                                  "a key is not a string")
        for item in value.values():
            _check_keys(item, what, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_keys(item, what, depth + 1)


def _optional_text(value: Any, what: str, max_chars: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string or None, not {type(value).__name__}")
    if len(value) > max_chars:
        raise ValidationError(f"{what} has {len(value)} characters; the limit is {max_chars} "
                              "(settings.max_content_chars)")
    if "\x00" in value:
        raise ValidationError(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{what} contains a lone surrogate (not valid Unicode text)") from None
    return value


def check_duration(value: Any, what: str) -> float | None:
    """None, or a duration in milliseconds: a finite number from 0 to a week."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{what} must be a number of milliseconds or None, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0 or value > MAX_DURATION_MS:
        raise ValidationError(f"{what} must be from 0 to {MAX_DURATION_MS:.0f} milliseconds")
    return float(value)


def _check_call_id(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 256 or not value.isprintable():
        raise ValidationError(f"{what} call_id must be a printable string of 1-256 characters or None")
    return value


def message_text(call: ToolCall) -> str:
    """The text a tool call's message holds: its result or its error (empty when it has neither)."""
    return call.result if call.result is not None else (call.error or "")


# -- what the statistics keep ------------------------------------------------------------------
_PLACEHOLDERS = [
    (re.compile(r"\"[^\"]*\"|'[^'\s][^']*'|`[^`]*`|“[^”]*”|‘[^’]*’|«[^»]*»"), "<str>"),
    (re.compile(r"[\"`“«][^\"`”»]*\Z"), "<str>"),  # a quote still open where the text (or its start) ends
    (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE), "<url>"),
    (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), "<email>"),
    (re.compile(r"(?:\b[A-Za-z]:)?(?:[\\/][\w.@%+~-]+){2,}[\\/]?|~[\\/]\S*"), "<path>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b(?=[0-9a-z_-]*\d)(?=[0-9a-z_-]*[a-z])[0-9a-z_-]{8,}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"(?<!\w)[-+]?\d+(?:[.,:/-]\d+)*\b"), "<n>"),  # 12, -3.5, 2026-05-08, 10:30
]
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_CLAUSE_START = re.compile(r"(?:^|[:.!?;]\s+|\(\s*|\n)$")


def normalise_error(text: str | None, arguments: Mapping[str, Any] | None = None) -> str:
    """An error text with what names a thing replaced by placeholders, whitespace collapsed and cut
    to `MAX_ERROR_CHARS`: "Contact 'Ann Lee' not found (id 4411)" -> "Contact <str> not found (id <n>)".

    A capitalised word inside a clause ("no route to Leeds") becomes ``<name>``; the clause's first
    word and words in capitals ("HTTP", "ValueError: Invalid") stay. With the call's `arguments`, the
    text values it was given (two characters or more, at any depth) become ``<str>`` first, wherever
    the error repeats them unquoted ("未知的城市编码：成都", "no flights to oslo"). Empty: "<no message>"."""
    if text is None or not text.strip():
        return "<no message>"
    out = " ".join(text[:MAX_ERROR_INPUT_CHARS].split())
    if arguments:
        out = _without_values(out, arguments)
    for pattern, placeholder in _PLACEHOLDERS:
        out = pattern.sub(placeholder, out)
    out = _replace_names(out)
    if len(out) > MAX_ERROR_CHARS:
        out = out[:MAX_ERROR_CHARS - 3].rstrip() + "..."
    return out


_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
MAX_VALUES_MASKED = 64  # a call's text values looked for in its error, at most (the longest first)


def _without_values(text: str, arguments: Mapping[str, Any]) -> str:
    """`text` with each text value of `arguments` replaced by ``<str>``: as a whole word, or anywhere
    for a value in CJK script (which has no spaces between words)."""
    values = sorted({v for v in _text_values(arguments, MAX_ARGUMENT_DEPTH) if len(v.strip()) >= 2},
                    key=len, reverse=True)[:MAX_VALUES_MASKED]
    for value in values:
        value = " ".join(value.split())
        if value in text:
            text = _value_pattern(value).sub("<str>", text)
    return text


def mentions(text: str, value: str) -> bool:
    """Whether `text` holds `value` as a whole word or number ("de" is not in "code"), or anywhere
    for a value in CJK script (which has no spaces between words)."""
    return value in text and _value_pattern(value).search(text) is not None


def _value_pattern(value: str) -> re.Pattern[str]:
    if _CJK_CHAR.search(value):
        return re.compile(re.escape(value))
    return re.compile(rf"(?<![\w<]){re.escape(value)}(?![\w>])")  # never inside a placeholder


def _text_values(value: Any, depth: int) -> list[str]:
    if isinstance(value, str):
        return [value]
    if depth <= 0:
        return []
    if isinstance(value, Mapping):
        return [t for item in value.values() for t in _text_values(item, depth - 1)]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _text_values(item, depth - 1)]
    return []


def _replace_names(text: str) -> str:
    parts: list[str] = []
    last = 0
    for match in _WORD.finditer(text):
        word = match.group()
        before = text[:match.start()]
        starts_clause = _CLAUSE_START.search(before) is not None or before.endswith("<")
        named = (word[0].isupper() and not word.isupper() and not starts_clause
                 and not _is_code_name(word) and not before.endswith(("<", "_")))
        if named:
            parts.append(text[last:match.start()])
            parts.append("<name>")
            last = match.end()
    parts.append(text[last:])
    return "".join(parts)


def _is_code_name(word: str) -> bool:
    """An exception or class name ("KeyError", "TimeoutException") rather than a person's."""
    return word.endswith(("Error", "Exception", "Warning", "Timeout")) or sum(c.isupper() for c in word) > 1


_JSON_TYPES = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "object"))
_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


def argument_shape(arguments: Mapping[str, Any]) -> str:
    """The shape of a call's arguments: its top-level names, sorted, each with its JSON type
    (``{city:str,days:int}``); a name that is not identifier-like counts as ``<key>`` (a map keyed by
    data), nested objects and lists are only their type, values never appear."""
    if not arguments:
        return "{}"
    fields = sorted(f"{_shape_name(name)}:{_json_type(value)}" for name, value in arguments.items())
    extra = len(fields) - MAX_SHAPE_ARGS
    shown = fields[:MAX_SHAPE_ARGS] + ([f"+{extra}"] if extra > 0 else [])
    return "{" + ",".join(shown) + "}"


def _shape_name(name: str) -> str:
    return name if _ARG_NAME.fullmatch(name) else "<key>"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, label in _JSON_TYPES:
        if isinstance(value, kind):
            return label
    return "unknown"


def latency_bucket(duration_ms: float) -> int:
    """The latency bucket of a duration (see `GROWTH`)."""
    if duration_ms <= 1.0:
        return 0
    bucket = math.ceil(math.log(duration_ms) / math.log(GROWTH))
    # floating point: make sure GROWTH**(bucket-1) < duration <= GROWTH**bucket
    while bucket > 0 and bucket_bound(bucket - 1) >= duration_ms:
        bucket -= 1
    while bucket_bound(bucket) < duration_ms:
        bucket += 1
    return bucket


def bucket_bound(bucket: int) -> float:
    """The upper bound (ms) of a latency bucket: what a percentile in it is reported as."""
    return 1.0 if bucket <= 0 else round(GROWTH ** bucket, 3)


def latency_bound(duration_ms: float) -> float:
    """The value a percentile whose true value is `duration_ms` is reported as."""
    return bucket_bound(latency_bucket(duration_ms))
