"""Input checks for every public entry point, in one place.

The engine's methods, import lines, settings loading and the CLI all call these, so one rule holds
everywhere: a value that passes can be stored, searched, formatted and exported by every backend
(SQLite, PostgreSQL, Elasticsearch) without failing later; a value that does not raises
`ValidationError` saying which argument was wrong and why. Messages never quote the text itself
(it may be memory content or a key); they name the argument and the rule.
"""

from __future__ import annotations

import json
import math
import os
import re
import unicodedata
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping

from .errors import ValidationError
from .types import Memory, MemoryStatus, MemoryType, TimeRange, as_aware

MAX_ID_CHARS = 256
MAX_NAME_CHARS = 256  # speaker names, roles, model names: short labels shown on every line
MAX_METADATA_CHARS = 65_536  # the metadata object as JSON
MAX_METADATA_DEPTH = 32
MAX_SOURCE_IDS = 10_000
MAX_OFFSET = 10**9
MAX_LIMIT = 10_000
ROLES = ("user", "assistant", "system", "tool")
# Every stored time, in UTC, lies in these years: formatting a time in any offset (±24 h) and the
# time arithmetic of retrieval (weeks, months, fuzzy margins) then stay inside datetime's range.
MIN_TIME = datetime(2, 1, 1, tzinfo=timezone.utc)
MAX_TIME = datetime(9998, 12, 31, tzinfo=timezone.utc)


def _type_name(value: Any) -> str:
    return type(value).__name__


def _check_encodable(value: str, what: str) -> None:
    if "\x00" in value:  # no store keeps NUL characters (PostgreSQL refuses them)
        raise ValidationError(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{what} contains a lone surrogate (not valid Unicode text)") from None


def _non_blank(value: Any, what: str, max_chars: int, too_long: str) -> str:
    """A non-blank string of at most `max_chars` characters, valid Unicode (`too_long`: the message)."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, not {_type_name(value)}")
    if not value.strip():
        raise ValidationError(f"{what} must not be empty")
    if len(value) > max_chars:
        raise ValidationError(too_long)
    _check_encodable(value, what)
    return value


# -- identifiers ----------------------------------------------------------------------------------
# One rule for every id the engine stores (user, agent, session and memory ids, and what the server
# builds from tenant names): it must be safe as one URL path segment once percent-encoded, as a file
# name part, in a log line and in an HTTP header.
ID_RULE = (f"1 to {MAX_ID_CHARS} characters, not blank, without '/' or '\\', not '.' or '..', and without "
           "control, format or line/paragraph separator characters")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls (CR, LF, NUL, ...), format (bidi,
# zero-width), surrogates, U+2028/U+2029
TENANT_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
TENANT_RULE = "1-64 characters of letters, digits, '_', '-' or '.', and not '.' or '..'"


def id_problem(value: Any) -> str | None:
    """Why `value` breaks the identifier rule (a phrase), or None when it is a safe id."""
    if not isinstance(value, str):
        return f"must be a string, not {_type_name(value)}"
    if not value.strip():
        return "must not be empty or blank"
    if len(value) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    if "/" in value or "\\" in value:
        return "must not contain '/' or '\\'"
    if value in (".", ".."):
        return "must not be '.' or '..'"
    if any("\ud800" <= char <= "\udfff" for char in value):
        return "contains a lone surrogate (not valid Unicode text)"
    if any(unicodedata.category(char) in _UNSAFE_CATEGORIES for char in value):
        return "must not contain control, format or line separator characters"
    return None


def is_safe_id(value: Any) -> bool:
    return id_problem(value) is None


def check_id(value: Any, what: str) -> str:
    """A user, agent, session or memory id that follows the identifier rule (`ID_RULE`).

    Every call that stores an id checks it here, so no entry point (engine, import, HTTP, MCP, CLI)
    can store an id that is unsafe in a URL path, a file name, a header or a log line."""
    problem = id_problem(value)
    if problem is not None:
        raise ValidationError(f"{what} {problem} (an id is {ID_RULE})")
    _refuse_reserved(value, what)
    return value


# the store keeps an agent's procedures under a user id of this form (consolidation.procedure_scope): no
# person's id may take it, so no user's list, retrieve or export can reach them
RESERVED_USER_PREFIX = "~procedures~"


def _refuse_reserved(value: str, what: str) -> None:
    if "user" in what and value.startswith(RESERVED_USER_PREFIX):
        raise ValidationError(f"{what} must not start with {RESERVED_USER_PREFIX!r} (reserved for agents' procedures)")


def check_stored_id(value: Any, what: str) -> str:
    """An id to look up, export or delete: any id a store may hold, including one written before
    the identifier rule (a non-blank string of at most 256 characters without NUL). Nothing is
    ever stored under an id that passes only this check."""
    checked = _non_blank(value, what, MAX_ID_CHARS, f"{what} is longer than {MAX_ID_CHARS} characters")
    _refuse_reserved(checked, what)
    return checked


def check_tenant(value: Any, what: str = "tenant") -> str:
    """A tenant name (`TENANT_RULE`): a strict slug, so it never contains the server's separator."""
    if not isinstance(value, str) or not TENANT_PATTERN.fullmatch(value) or value in (".", ".."):
        raise ValidationError(f"{what} must be {TENANT_RULE}")
    return value


def check_optional_id(value: Any, what: str) -> str | None:
    return None if value is None else check_id(value, what)


def check_text(value: Any, what: str, max_chars: int) -> str:
    """Content or a query: a non-blank string of at most `max_chars` characters, valid Unicode."""
    length = len(value) if isinstance(value, str) else 0
    return _non_blank(value, what, max_chars, f"{what} has {length} characters; the limit is {max_chars} "
                      "(settings.max_content_chars)")


def check_optional_text(value: Any, what: str, max_chars: int) -> str | None:
    """An optional text field (a speaker name, a stored context): None, or a string within limits."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string or None, not {_type_name(value)}")
    if len(value) > max_chars:
        raise ValidationError(f"{what} has {len(value)} characters; the limit is {max_chars}")
    _check_encodable(value, what)
    return value


def check_name(value: Any, what: str) -> str | None:
    """A speaker name: None, or a non-blank label of at most 256 characters."""
    if value is None:
        return None
    name = check_optional_text(value, what, MAX_NAME_CHARS)
    if name is None or not name.strip():
        raise ValidationError(f"{what} must not be blank")
    return name


def check_metadata(value: Any, what: str = "metadata", max_chars: int = MAX_METADATA_CHARS) -> dict[str, Any]:
    """A JSON object of at most `max_chars` characters (as JSON), returned as a normalised copy.

    Normalising through JSON (tuples become lists, no shared references) means every backend
    stores and returns the same value. Keys must be strings; NaN/Infinity, NUL characters and lone
    surrogates are refused because some backend cannot keep them.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} must be a mapping (a JSON object), not {_type_name(value)}")
    _check_json(value, what, 0)
    try:
        text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        raise ValidationError(f"{what} is not JSON-serialisable") from None
    if len(text) > max_chars:
        raise ValidationError(f"{what} is {len(text)} characters as JSON; the limit is {max_chars}")
    return json.loads(text)


def _check_json(value: Any, what: str, depth: int) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise ValidationError(f"{what} is nested more than {MAX_METADATA_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{what} holds a NaN or infinite number (not JSON)")
        return
    if isinstance(value, str):
        _check_encodable(value, what)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{what} keys must be strings, not {_type_name(key)}")
            _check_encodable(key, f"a key of {what}")
            _check_json(item, what, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_json(item, what, depth + 1)
        return
    raise ValidationError(f"{what} holds a {_type_name(value)}, which is not a JSON value")


def check_time(value: Any, what: str) -> datetime | None:
    """None, an aware or naive (taken as UTC) datetime, or an ISO 8601 string; within years 2..9998."""
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = as_aware(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 64:
            raise ValidationError(f"{what} must be an ISO 8601 time")
        try:
            moment = as_aware(datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            raise ValidationError(f"{what} must be an ISO 8601 time such as 2024-05-01T14:30:00+02:00") from None
    else:
        raise ValidationError(f"{what} must be a datetime or an ISO 8601 string, not {_type_name(value)}")
    try:
        utc = moment.astimezone(timezone.utc)
        moment.utcoffset()
    except (OverflowError, ValueError):
        raise ValidationError(f"{what} is out of range (years 2 to 9998)") from None
    if not MIN_TIME <= utc <= MAX_TIME:
        raise ValidationError(f"{what} is out of range (years 2 to 9998)")
    offset = moment.utcoffset()
    if offset is not None and abs(offset) >= timedelta(days=1):
        raise ValidationError(f"{what} has a UTC offset of a day or more")
    return moment


def check_range(value: Any) -> TimeRange | None:
    """None, a `TimeRange`, or a (start, end) pair of times (either may be None)."""
    if value is None:
        return None
    if isinstance(value, TimeRange):
        start, end = value.start, value.end
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        start, end = value
    else:
        raise ValidationError("time_range must be a TimeRange or a (start, end) pair")
    start, end = check_time(start, "time_range start"), check_time(end, "time_range end")
    if start is not None and end is not None and end < start:
        raise ValidationError("time_range ends before it starts")
    return TimeRange(start, end)


def check_int(value: Any, what: str, low: int, high: int) -> int:
    """An int (not a bool) in [low, high]."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(f"{what} must be an integer, not {_type_name(value)}")
    if not low <= value <= high:
        raise ValidationError(f"{what} must be between {low} and {high}")
    return value


MAX_TOP_K = 1000


def check_top_k(value: Any, what: str = "top_k") -> int:
    """How many memories a retrieval returns: an int in [1, MAX_TOP_K], the rule of every entry point."""
    return check_int(value, what, 1, MAX_TOP_K)


def check_min_relevance(value: Any, what: str = "min_relevance") -> float:
    """A relevance floor: a number (not a bool) in [-1, 1], the rule of every entry point."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
        raise ValidationError(f"{what} must be a number between -1 and 1")
    return float(value)


def check_timeout(value: Any, what: str = "timeout") -> float | None:
    """A wait in seconds: None (no limit) or a number (not a bool) from 0 up, not NaN or infinite."""
    if value is None:
        return None
    try:
        seconds = None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)
    except OverflowError:  # an int too large for a float
        seconds = None
    if seconds is None or not 0 <= seconds < float("inf"):
        raise ValidationError(f"{what} must be None or a number of seconds from 0 up")
    return seconds


def check_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{what} must be True or False, not {_type_name(value)}")
    return value


def check_optional_bool(value: Any, what: str) -> bool | None:
    return None if value is None else check_bool(value, what)


def check_type(value: Any, what: str = "type") -> MemoryType:
    try:
        return MemoryType(value)
    except (ValueError, TypeError):
        raise ValidationError(f"{what} must be one of {[t.value for t in MemoryType]}") from None


def check_status(value: Any, what: str = "status") -> MemoryStatus:
    try:
        return MemoryStatus(value)
    except (ValueError, TypeError):
        raise ValidationError(f"{what} must be one of {[s.value for s in MemoryStatus]}") from None


def check_types(value: Any) -> tuple[MemoryType, ...] | None:
    """None or an empty list (every type), one type, or an iterable of types. A single string is
    one type, not its letters."""
    if value is None:
        return None
    if isinstance(value, (str, MemoryType)):
        return (check_type(value, "types"),)
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValidationError(f"types must be a memory type or a list of them, not {_type_name(value)}")
    found = tuple(check_type(item, "types") for item in value)
    return found or None  # an empty list restricts nothing, as before


def check_role(value: Any, what: str) -> str:
    if value not in ROLES:
        raise ValidationError(f"{what} must be one of {ROLES}")
    return value


def check_language(value: Any) -> str | None:
    if value is None:
        return None
    if value not in ("en", "zh"):
        raise ValidationError("language must be 'en', 'zh' or None")
    return value


def check_source_ids(value: Any, what: str = "source_ids") -> list[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ValidationError(f"{what} must be a list of ids, not {_type_name(value)}")
    if len(value) > MAX_SOURCE_IDS:
        raise ValidationError(f"{what} has more than {MAX_SOURCE_IDS} ids")
    return [check_id(item, f"an id in {what}") for item in value]


# -- import lines ---------------------------------------------------------------------------------

_MEMORY_FIELDS = frozenset(Memory.__slots__)


def memory_from_record(data: Any, *, user_id: str, max_content_chars: int,
                       max_metadata_chars: int = MAX_METADATA_CHARS) -> Memory:
    """A `Memory` from one decoded import line, every field checked as the engine checks its
    arguments. ``user_id`` replaces the line's user; ``embedding_model`` is ignored (the store
    re-embeds)."""
    if not isinstance(data, Mapping):
        raise ValidationError("not a JSON object")
    unknown = set(data) - _MEMORY_FIELDS
    if unknown:
        raise ValidationError(f"unknown memory fields: {sorted(str(k)[:40] for k in unknown)}")
    if "id" not in data or "content" not in data:
        raise ValidationError("a memory needs at least 'id' and 'content'")
    created = check_time(data.get("created_at"), "created_at")
    updated = check_time(data.get("updated_at"), "updated_at")
    memory = Memory(
        id=check_id(data["id"], "id"), user_id=user_id,
        agent_id=check_id(data.get("agent_id", "assistant"), "agent_id"),
        content=check_text(data["content"], "content", max_content_chars),
        type=check_type(data.get("type", MemoryType.TURN.value)),
        status=check_status(data.get("status", MemoryStatus.ACTIVE.value)),
        event_start=check_time(data.get("event_start"), "event_start"),
        event_end=check_time(data.get("event_end"), "event_end"),
        speaker=check_name(data.get("speaker"), "speaker"),
        role=None if data.get("role") is None else check_role(data.get("role"), "role"),
        session_id=check_optional_id(data.get("session_id"), "session_id"),
        previous_id=check_optional_id(data.get("previous_id"), "previous_id"),
        context=check_optional_text(data.get("context"), "context", max_content_chars + MAX_NAME_CHARS + 2),
        superseded_by=check_optional_id(data.get("superseded_by"), "superseded_by"),
        source_ids=check_source_ids(data.get("source_ids")),
        metadata=check_metadata(data.get("metadata"), "metadata", max_metadata_chars),
    )
    if created is not None:
        memory.created_at = created
    if updated is not None:
        memory.updated_at = updated
    return memory


# -- settings -------------------------------------------------------------------------------------

def check_settings(settings: Any) -> None:
    """What pydantic cannot see in a `Settings`: a store path the OS can open."""
    from .errors import ConfigError
    path = settings.store.path
    if path is not None:
        text = str(path)
        if "\x00" in text:
            raise ConfigError("store.path contains a NUL character")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError("store.path is not valid Unicode") from None
        if settings.store.backend == "sqlite" and os.path.isdir(text):
            raise ConfigError(f"store.path {text} is a folder; name the database file (e.g. {text}/memory.db)")
