"""Absolute event times for observations: the LLM's date checked against the rule-based parser.

The LLM is asked for both the time words ("last Friday") and the absolute date it computes from
the message date. `parse_time` (no LLM) turns the same words into an exact range relative to the
message timestamp; that range is the reference:

* both agree (the LLM's date lies inside the parsed range) -> the LLM's date, which may be more
  precise ("last week ... on Tuesday");
* they disagree -> the parsed range, unless the LLM's date is the parsed one moved by whole years
  (the parser reads a bare "3 June" as the past one; a plan means the next one);
* only one of them -> that one; neither -> no event time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..timeparse import parse_time
from ..timeparse.calendar_math import shift_years
from ..types import TimeRange

_DATE_RE = re.compile(r"^\s*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?\s*$")


@dataclass(frozen=True, slots=True)
class EventTime:
    """The resolved event range and where it came from ("rule", "llm", "rule+llm")."""

    start: datetime
    end: datetime | None
    source: str


def parse_llm_date(text: object, reference: datetime) -> TimeRange | None:
    """``"2026-05-08"`` / ``"2026-05"`` / ``"2026"`` -> the day / month / year as a half-open range in
    the timezone of ``reference``; None for anything else."""
    if not isinstance(text, str):
        return None
    match = _DATE_RE.match(text)
    if match is None:
        return None
    year = int(match.group(1))
    month, day = (int(g) if g else None for g in match.groups()[1:])
    zone = reference.tzinfo
    try:
        if month is None:
            return TimeRange(datetime(year, 1, 1, tzinfo=zone), datetime(year + 1, 1, 1, tzinfo=zone))
        if day is None:
            start = datetime(year, month, 1, tzinfo=zone)
            end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=zone)
            return TimeRange(start, end)
        start = datetime(year, month, day, tzinfo=zone)
        return TimeRange(start, start + timedelta(days=1))
    except ValueError:
        return None


def _inside(inner: TimeRange, outer: TimeRange) -> bool:
    if inner.start is None or outer.start is None:
        return False
    if inner.start < outer.start:
        return False
    if outer.end is None:
        return True
    return inner.end is not None and inner.end <= outer.end


def _shift_years(moment: datetime | None, years: int) -> datetime | None:
    return None if moment is None else shift_years(moment, years)


def _event(found: TimeRange, source: str) -> EventTime:
    # both sources have a start here: parse_llm_date always gives one, a rule range without one is dropped
    assert found.start is not None
    return EventTime(found.start, found.end, source)


def resolve_event_time(expression: object, llm_date: object, message_time: datetime) -> EventTime | None:
    """The event range for an observation said at ``message_time`` (see the module docstring)."""
    rule: TimeRange | None = None
    if isinstance(expression, str) and expression.strip():
        rule = parse_time(expression, message_time).range
        if rule is not None and rule.start is None:
            rule = None  # "before 2020": no start to store
    llm = parse_llm_date(llm_date, message_time)
    if rule is not None and llm is not None:
        if _inside(llm, rule):
            return _event(llm, "rule+llm")
        for years in (1, -1):
            shifted = TimeRange(_shift_years(rule.start, years), _shift_years(rule.end, years))
            if _inside(llm, shifted):
                return _event(llm, "llm")
        return _event(rule, "rule")
    if rule is not None:
        return _event(rule, "rule")
    if llm is not None:
        return _event(llm, "llm")
    return None
