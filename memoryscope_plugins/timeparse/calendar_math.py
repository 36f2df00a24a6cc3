"""Calendar arithmetic for the time parser. All spans are half-open [start, end)."""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

DaySpan = tuple[date, date]
Span = tuple[datetime | None, datetime | None]

ONE_DAY = timedelta(days=1)

# Hours (start, end) of the parts of a day; an end past 24 runs into the next day.
# why: "night" runs to 06:00 next day so "last night" covers sleep; "evening" stops at midnight.
DAY_PARTS: dict[str, tuple[int, int]] = {
    "early_morning": (0, 6),
    "morning": (5, 12),
    "noon": (11, 14),
    "afternoon": (12, 18),
    "dusk": (17, 20),
    "evening": (18, 24),
    "night": (18, 30),
    "midnight": (22, 27),
}


@dataclass(frozen=True, slots=True)
class Context:
    """The reference moment of a parse, naive (tzinfo is put back at the end)."""

    now: datetime
    today: date


def to_span(first: date, end: date) -> Span:
    """Day span [first 00:00, end 00:00) as datetimes."""
    return datetime.combine(first, time()), datetime.combine(end, time())


def day_span(day: date) -> Span:
    """The whole calendar day."""
    return to_span(day, day + ONE_DAY)


def safe_date(year: int, month: int, day: int) -> date | None:
    """date(...) or None when the day does not exist (Feb 30) or the year is out of range."""
    if not (1 <= year <= 9998 and 1 <= month <= 12 and 1 <= day <= 31):
        return None
    if day > calendar.monthrange(year, month)[1]:
        return None
    return date(year, month, day)


def shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    """(year, month) moved by `delta` months."""
    carry, index = divmod(month - 1 + delta, 12)
    return year + carry, index + 1


def add_months(day: date, delta: int) -> date:
    """Same day-of-month `delta` months away, clamped to the month's length."""
    year, month = shift_month(day.year, day.month, delta)
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def add_years(day: date, delta: int) -> date:
    """Same date `delta` years away (Feb 29 -> Feb 28)."""
    return add_months(day, 12 * delta)


def shift_years(moment: datetime, delta: int) -> datetime:
    """The same moment `delta` years away (29 February -> 28 February); ValueError past year 9999."""
    try:
        return moment.replace(year=moment.year + delta)
    except ValueError:
        return moment.replace(year=moment.year + delta, day=28)


def month_days(year: int, month: int) -> DaySpan:
    """The calendar month as a day span."""
    next_year, next_month = shift_month(year, month, 1)
    return date(year, month, 1), date(next_year, next_month, 1)


def month_part(year: int, month: int, part: str) -> DaySpan:
    """Early (1-10), mid (11-20) or late (21-end) part of a month."""
    first, end = month_days(year, month)
    if part == "early":
        return first, date(year, month, 11)
    if part == "mid":
        return date(year, month, 11), date(year, month, 21)
    return date(year, month, 21), end


def year_days(year: int) -> DaySpan:
    """The calendar year as a day span."""
    return date(year, 1, 1), date(year + 1, 1, 1)


def year_part(year: int, part: str) -> DaySpan:
    """Early (Jan-Apr), mid (May-Aug) or late (Sep-Dec) third of a year."""
    starts = {"early": 1, "mid": 5, "late": 9}
    first_month = starts[part]
    return date(year, first_month, 1), month_days(year, first_month + 3)[1]


def monday_of(day: date) -> date:
    """Monday of the week containing `day` (weeks start on Monday)."""
    return day - timedelta(days=day.weekday())


def week_days(day: date, offset: int = 0) -> DaySpan:
    """Monday-Sunday week containing `day`, moved by `offset` weeks."""
    monday = monday_of(day) + timedelta(weeks=offset)
    return monday, monday + timedelta(days=7)


def weekend_days(day: date, offset: int = 0) -> DaySpan:
    """Saturday-Sunday of the week containing `day`, moved by `offset` weeks."""
    monday = monday_of(day) + timedelta(weeks=offset)
    return monday + timedelta(days=5), monday + timedelta(days=7)


def weekday_in_week(day: date, weekday: int, offset: int = 0) -> date:
    """The given weekday (Monday=0) of the week containing `day`, moved by `offset` weeks."""
    return monday_of(day) + timedelta(weeks=offset, days=weekday)


def weekday_on_or_before(day: date, weekday: int) -> date:
    """Most recent given weekday on or before `day`."""
    return day - timedelta(days=(day.weekday() - weekday) % 7)


def weekday_after(day: date, weekday: int) -> date:
    """First given weekday strictly after `day`."""
    return day + timedelta(days=(weekday - day.weekday() - 1) % 7 + 1)


def season_days(year: int, season: str) -> DaySpan:
    """Meteorological season: spring Mar-May, summer Jun-Aug, autumn Sep-Nov, winter Dec-Feb.

    Winter of `year` starts in December of `year` and ends with February of `year + 1`.
    """
    first_month = {"spring": 3, "summer": 6, "autumn": 9, "winter": 12}[season]
    end_year, end_month = shift_month(year, first_month, 3)
    return date(year, first_month, 1), date(end_year, end_month, 1)


def season_of_today(today: date, season: str) -> DaySpan:
    """"This <season>": the occurrence in the current year; for winter in Jan/Feb, the running one."""
    if season == "winter" and today.month <= 2:
        return season_days(today.year - 1, season)
    return season_days(today.year, season)


def pick_occurrence(
    occurrence: Callable[[int], DaySpan | None], mode: str, today: date
) -> DaySpan | None:
    """Choose one yearly occurrence relative to today.

    mode "recent": the latest that has started (start <= today), i.e. not in the future;
    "last": the latest that is over (end <= today); "next": the first that starts after today;
    "this": the current year's.
    """
    if mode == "this":
        return occurrence(today.year)
    years = range(today.year - 1, today.year + 3) if mode == "next" else range(today.year + 1, today.year - 3, -1)
    for year in years:
        span = occurrence(year)
        if span is None:
            continue
        first, end = span
        if mode == "next" and first > today:
            return span
        if mode == "recent" and first <= today:
            return span
        if mode == "last" and end <= today:
            return span
    return None


def hours_span(day: date, part: str) -> Span:
    """A part of a day ("morning", "night", ...) as a datetime span."""
    start_hour, end_hour = DAY_PARTS[part]
    base = datetime.combine(day, time())
    return base + timedelta(hours=start_hour), base + timedelta(hours=end_hour)


def past_window(ctx: Context, unit: str, count: int) -> Span:
    """Rolling window: the last `count` units up to the end of today, widened to whole days.

    Hours and minutes end at now and are not widened.
    """
    tomorrow = datetime.combine(ctx.today + ONE_DAY, time())
    if unit == "hour":
        return ctx.now - timedelta(hours=count), ctx.now
    if unit == "minute":
        return ctx.now - timedelta(minutes=count), ctx.now
    if unit == "day":
        first = ctx.today - timedelta(days=count)
    elif unit == "week":
        first = ctx.today - timedelta(weeks=count)
    elif unit == "month":
        first = add_months(ctx.today, -count)
    else:
        first = add_years(ctx.today, -count)
    return datetime.combine(first, time()), tomorrow


def unit_ago(ctx: Context, unit: str, count: int) -> Span:
    """The calendar unit (day, week, month, year, hour) that contains now moved back `count` units.

    A negative count looks forward ("in 3 days").
    """
    if unit == "hour":
        start = (ctx.now - timedelta(hours=count)).replace(minute=0, second=0, microsecond=0)
        return start, start + timedelta(hours=1)
    if unit == "minute":
        start = (ctx.now - timedelta(minutes=count)).replace(second=0, microsecond=0)
        return start, start + timedelta(minutes=1)
    if unit == "day":
        return day_span(ctx.today - timedelta(days=count))
    if unit == "week":
        return to_span(*week_days(ctx.today, -count))
    if unit == "month":
        year, month = shift_month(ctx.today.year, ctx.today.month, -count)
        return to_span(*month_days(year, month))
    return to_span(*year_days(ctx.today.year - count))


def recent_day_of_month(today: date, day: int) -> date | None:
    """Latest date with this day-of-month on or before today (skips months without that day)."""
    for back in range(13):
        year, month = shift_month(today.year, today.month, -back)
        candidate = safe_date(year, month, day)
        if candidate is not None and candidate <= today:
            return candidate
    return None


def recent_month_day(today: date, month: int, day: int) -> date | None:
    """Latest date with this month and day on or before today (Feb 29 looks back to a leap year)."""
    for year in range(today.year, today.year - 9, -1):
        candidate = safe_date(year, month, day)
        if candidate is not None and candidate <= today:
            return candidate
    return None


Resolver = Callable[[re.Match[str], Context], Span | None]


@dataclass(frozen=True, slots=True)
class Rule:
    """One time-expression pattern and the function that turns a match into a span."""

    name: str
    pattern: re.Pattern[str]
    resolve: Resolver
    trigger: re.Pattern[str] | None = None  # a cheap pattern that must occur for the rule to be tried


def future_window(ctx: Context, unit: str, count: int) -> Span:
    """Rolling window from the start of today over the next `count` units, widened to whole days."""
    start = datetime.combine(ctx.today, time())
    if unit == "hour":
        return ctx.now, ctx.now + timedelta(hours=count)
    if unit == "minute":
        return ctx.now, ctx.now + timedelta(minutes=count)
    if unit == "day":
        last = ctx.today + timedelta(days=count)
    elif unit == "week":
        last = ctx.today + timedelta(weeks=count)
    elif unit == "month":
        last = add_months(ctx.today, count)
    else:
        last = add_years(ctx.today, count)
    return start, datetime.combine(last + ONE_DAY, time())
