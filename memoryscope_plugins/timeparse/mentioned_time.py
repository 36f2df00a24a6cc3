"""The time a message talks about, read from its own words when it is recorded (no LLM).

"十月三号我去三岔湖钓鱼" said on 20 October is about 3 October; "I went hiking yesterday" said on
a Monday is about the Sunday. A recorded turn keeps the time it was said (`created_at`) and gets
the time it mentions as its event range, so a question about that time ("国庆假期做了什么？",
"what did I do last weekend?") finds it even when it was said days later. Consolidation later
writes observations with LLM-checked event times (`consolidation/event_time.py`); this is the
rule-based part of the same idea, applied to every turn at once.

A date without a year ("10月1号", "3 June") is read as its nearer occurrence: said in August,
"10月1号出发" is this October, not last; said on 20 October, "十月三号" is this October's past
day. Queries read such dates as the latest one; a conversation talks of the weeks around it.

Only precise mentions count: a range longer than `MAX_MENTIONED_DAYS` ("2022年", "this year")
would meet almost any question about that year, and a habit ("every Monday", "每周一") names no
single time.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from ..types import TimeRange, as_aware
from .calendar_math import shift_years
from .parser import parse_time

MAX_MENTIONED_DAYS = 92  # a season or a quarter; a year is too broad to point at one event

_RECURRING = re.compile(
    r"\b(every|each|always|usually|weekly|daily|monthly|yearly|annually)\b|"
    r"\bon\s+(mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends)\b|"
    r"每|逢|常常|经常|总是",
    re.IGNORECASE,
)

# time words tied to a year or to the moment of speaking ("2024年", "去年", "last June", "上周六",
# "yesterday"): their range is already the right one
_ANCHORED = re.compile(
    r"\d{4}|\b(last|next|this|ago|yesterday|tomorrow|tonight|year|week|weekend|today|now)\b|"
    r"[上下去今明前后昨本这年周]",
    re.IGNORECASE,
)


def is_recurring(text: str | None) -> bool:
    """Whether time words name a repeating time ("every Easter", "on Tuesdays", "每周一")."""
    return bool(text and _RECURRING.search(text))


def mentioned_range(text: str, said_at: datetime) -> TimeRange | None:
    """The closed-open range `text` mentions, relative to when it was said; None when it names no
    precise time, only a habit, or only the day it was said ("today", "现在")."""
    if is_recurring(text):
        return None
    try:
        parsed = parse_time(text, said_at)
    except (OverflowError, ValueError):  # a range past datetime's span: no event time
        return None
    found = parsed.range
    if found is None or found.start is None or found.end is None:
        return None
    if found.end - found.start > timedelta(days=MAX_MENTIONED_DAYS):
        return None
    said = as_aware(said_at)
    if as_aware(found.start) <= said < as_aware(found.end) and found.end - found.start <= timedelta(days=1):
        return None  # "today", "now": the message time already says it
    return nearer_if_yearless(found, parsed.expressions, said)


def nearer_if_yearless(found: TimeRange, expressions: tuple[str, ...] | list[str], said: datetime) -> TimeRange:
    """`found` for expressions said at `said`: when none is tied to a year or to the moment of
    speaking ("10月1号", "国庆", "3 June"), the nearer occurrence (a conversation talks of the weeks
    around it); else `found` as it is."""
    if any(_ANCHORED.search(expression) for expression in expressions):
        return found
    return _nearer_occurrence(found, as_aware(said))


def _nearer_occurrence(found: TimeRange, said: datetime) -> TimeRange:
    """A yearless date's next occurrence when that lies nearer to when it was said."""
    assert found.start is not None and found.end is not None
    try:
        later = TimeRange(shift_years(found.start, 1), shift_years(found.end, 1))
    except ValueError:  # past year 9999
        return found
    assert later.start is not None
    if abs(as_aware(later.start) - said) < abs(said - as_aware(found.start)):
        return later
    return found
