"""Relative times in a memory's words, resolved to dates for the model that reads the context.

"I went to a support group yesterday", said on Monday 8 May 2023, reads to a small model as if it
happened on 8 May: it copies the line's date instead of subtracting a day. The context therefore
writes each relative time's date right after it: "yesterday (= 2023-05-07 Sun)",
"昨天（= 2023年5月7日 周日）". Every expression is resolved on its own against the moment the
memory was said (the same rule-based parser the query and `mentioned_time` use, a yearless date
read as its nearer occurrence as there), so "last year" becomes "2022" even though it is too
broad to be the turn's event time. Absolute dates ("3 June 2023", "2023年6月3日"), habits
("every Monday") and the day itself ("today", "now") get nothing.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from ..types import TimeRange, as_aware
from .formatting import format_memory_time, format_time_span
from .mentioned_time import is_recurring, nearer_if_yearless
from .parser import parse_time

# a memory worth parsing names a time word or a number; most do not, and skipping them keeps the
# context cheap (parse_time costs ~0.1 ms a line)
_MAY_NAME_TIME = re.compile(
    r"\d|yesterday|tomorrow|tonight|today|ago|last|next|this|week|month|year|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|weekend|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|spring|summer|autumn|fall|winter|christmas|easter|"
    r"[昨今明前后去上下本这周年月日号天礼拜春夏秋冬节一二三四五六七八九十两]",
    re.IGNORECASE,
)
# already absolute: a year, a date with its year ("3 June 2023", "June 3, 2023", "2023年6月3日")
_ABSOLUTE = re.compile(
    r"^\s*(?:(?:in|on|of)\s+)?(?:\d{4}|\d{4}-\d{1,2}(?:-\d{1,2})?|"
    r"(?:\d{1,2}(?:st|nd|rd|th)?\s+)?[A-Za-z]+\.?,?\s+(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?\d{4}|"
    r"\d{4}年(?:\d{1,2}月(?:\d{1,2}[日号])?)?)\s*$",
    re.IGNORECASE,
)
_TRAILING = ".,;:!?。，；：！？、"
_MAX_EXPRESSIONS = 3  # a line with more time words than this names a schedule; the first three suffice


MENTIONS_KEY = "time_mentions"  # metadata of a recorded turn: its relative times, resolved when recorded


def time_mentions(text: str, said_at: datetime) -> list[dict[str, str]]:
    """The relative times in `text` said at `said_at`, each resolved on its own:
    ``[{"text": "yesterday", "start": "2023-05-07T00:00:00+00:00", "end": "2023-05-08T00:00:00+00:00"}]``.

    `record` stores this in a turn's metadata (``time_mentions``) so the context need not parse
    the words again at every retrieval (parsing costs ~0.2 ms a line).
    """
    if not isinstance(text, str) or not text or not _MAY_NAME_TIME.search(text):
        return []
    try:
        parsed = parse_time(text, said_at)
    except (OverflowError, ValueError):
        return []
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for raw in parsed.expressions:
        if len(out) >= _MAX_EXPRESSIONS:
            break
        expression = raw.strip().rstrip(_TRAILING)  # "on 2 August." -> "on 2 August"
        key = expression.lower()
        if not key or key in seen or _ABSOLUTE.match(expression) or is_recurring(expression):
            continue
        seen.add(key)
        try:
            found = parse_time(expression, said_at).range
        except (OverflowError, ValueError):
            continue
        if found is None or found.start is None or found.end is None:
            continue
        found = nearer_if_yearless(found, [expression], said_at)
        assert found.start is not None and found.end is not None
        if _is_the_day_itself(found, said_at):
            continue
        out.append({"text": expression, "start": found.start.isoformat(), "end": found.end.isoformat()})
    return out


def resolved_times(text: str, said_at: datetime, language: str = "en", *,
                   mentions: object = None) -> list[tuple[str, str]]:
    """(expression, resolved date text) for each relative time in `text` said at `said_at`; from
    `mentions` (what `time_mentions` stored) when given, else parsed now.

    >>> resolved_times("I went there yesterday", datetime(2023, 5, 8))
    [('yesterday', '2023-05-07 Sun')]
    """
    entries = time_mentions(text, said_at) if mentions is None else mentions
    out: list[tuple[str, str]] = []
    if not isinstance(entries, list):
        return out
    for entry in entries:  # stored metadata: skip what does not have the shape time_mentions writes
        try:
            found = TimeRange(datetime.fromisoformat(entry["start"]), datetime.fromisoformat(entry["end"]))
            expression = str(entry["text"])
        except (KeyError, TypeError, ValueError):
            continue
        assert found.start is not None and found.end is not None
        if found.end > found.start and expression:
            out.append((expression, describe_range(found, language)))
    return out


def _is_the_day_itself(found: TimeRange, said_at: datetime) -> bool:
    assert found.start is not None and found.end is not None
    said = as_aware(said_at)
    return as_aware(found.start) <= said < as_aware(found.end) and found.end - found.start <= timedelta(days=1)


def describe_range(found: TimeRange, language: str = "en") -> str:
    """A range as a reader names it: "2022" for a whole year, "June 2023" ("2023年6月") for a whole
    month, else a day or a span of days ("2023-05-01 Mon – 2023-05-07 Sun")."""
    assert found.start is not None and found.end is not None
    start, end = found.start, found.end
    zh = language.lower().startswith("zh")
    midnight = start.time() == end.time() == datetime.min.time()
    if midnight and start.day == 1 and end.day == 1:
        if start.month == 1 and end.month == 1 and end.year == start.year + 1:
            return f"{start.year}年" if zh else str(start.year)
        next_month = (start.year + start.month // 12, start.month % 12 + 1)
        if (end.year, end.month) == next_month:
            return f"{start.year}年{start.month}月" if zh else start.strftime("%B %Y")
    if midnight and end - start == timedelta(days=1):
        return format_memory_time(start, language)
    return format_time_span(start, end, language)


def with_resolved_times(text: str, pairs: list[tuple[str, str]], language: str = "en") -> str:
    """`text` with each resolved time written right after its expression: "I went there yesterday
    (= 2023-05-07 Sun) and ...", "我昨天（= 2023年5月7日 周日）去了..." (a model that copies the words
    copies the date with them). An expression not found in `text` is noted at its end."""
    zh = language.lower().startswith("zh")
    out, position, missing = text, 0, []
    for expression, when in pairs:
        note = f"（= {when}）" if zh else f" (= {when})"
        at = out.find(expression, position)
        if at < 0:
            missing.append(f"{expression} = {when}")
            continue
        end = at + len(expression)
        out = out[:end] + note + out[end:]
        position = end + len(note)
    if missing:
        out += ("（" + "；".join(missing) + "）") if zh else (" (" + "; ".join(missing) + ")")
    return out
