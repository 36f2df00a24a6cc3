"""Absolute event times: the model's date checked against the rule-based parser."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins.consolidation.event_time import parse_llm_date, resolve_event_time

WED = datetime(2026, 5, 13, 10, 0, tzinfo=timezone.utc)  # Wednesday


def day(text: str, tz=timezone.utc) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=tz)


@pytest.mark.parametrize("text, start, end", [
    ("2026-05-08", "2026-05-08", "2026-05-09"),
    ("2026-06", "2026-06-01", "2026-07-01"),
    ("2026-12", "2026-12-01", "2027-01-01"),
    ("2026", "2026-01-01", "2027-01-01"),
])
def test_llm_dates_of_each_granularity(text, start, end):
    rng = parse_llm_date(text, WED)
    assert (rng.start, rng.end) == (day(start), day(end))


@pytest.mark.parametrize("junk", [None, "", "last Friday", "2026-13-01", "2026-02-30", "05/08/2026", 20260508])
def test_junk_llm_dates_are_ignored(junk):
    assert parse_llm_date(junk, WED) is None


def test_rule_corrects_a_wrong_llm_date():
    when = resolve_event_time("last Friday", "2026-05-15", WED)
    assert (when.start, when.end, when.source) == (day("2026-05-08"), day("2026-05-09"), "rule")


def test_agreeing_dates_keep_the_more_precise_one():
    when = resolve_event_time("last week", "2026-05-06", WED)
    assert (when.start, when.end, when.source) == (day("2026-05-06"), day("2026-05-07"), "rule+llm")
    when = resolve_event_time("下个月", "2026-06", WED)
    assert (when.start, when.end, when.source) == (day("2026-06-01"), day("2026-07-01"), "rule+llm")


def test_a_plan_on_a_bare_date_may_be_next_year():
    # the parser reads a bare "3 June" as the past one; a plan said in May means this year's
    when = resolve_event_time("3 June", "2026-06-03", WED)
    assert (when.start, when.source) == (day("2026-06-03"), "llm")


def test_only_one_side_known():
    assert resolve_event_time("上周五", None, WED).start == day("2026-05-08")
    assert resolve_event_time(None, "2025", WED).source == "llm"
    assert resolve_event_time("someday", None, WED) is None
    assert resolve_event_time(None, None, WED) is None


def test_relative_times_use_the_message_timezone():
    tz = timezone(timedelta(hours=8))
    said = datetime(2026, 5, 13, 1, 0, tzinfo=tz)  # still 12 May in UTC
    when = resolve_event_time("yesterday", None, said)
    assert when.start == datetime(2026, 5, 12, tzinfo=tz)
